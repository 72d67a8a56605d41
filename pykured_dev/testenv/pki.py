"""The test control plane's PKI: a serving CA, a client CA, client certificates per identity, an SA key.

Client certificates authenticate as ``CN=<user>, O=<group>…``: RBAC subjects of kind ServiceAccount match the
username string, so ``system:serviceaccount:kube-system:kured`` gets kured's own RBAC unchanged.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class KeyPair:
    """PEM certificate and key."""

    cert_pem: bytes
    key_pem: bytes


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _name(cn: str, orgs: tuple[str, ...] = ()) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


class CA:
    """A self-signed certificate authority that issues leaf certificates."""

    def __init__(self, cn: str) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes

        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        self._name = _name(cn)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate in PEM."""
        from cryptography.hazmat.primitives import serialization

        return bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self, cn: str, *, orgs: tuple[str, ...] = (), server: bool = False, ips: tuple[str, ...] = ()
    ) -> KeyPair:
        """A leaf certificate: a serving one (SANs localhost, 127.0.0.1, ::1 and ``ips``) or a client one."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID

        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, orgs))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server:
            sans = [
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(ipaddress.ip_address("::1")),
                *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips),
            ]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
        else:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
            )
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(bytes(cert.public_bytes(serialization.Encoding.PEM)), _pem_key(key))


def service_account_keys() -> KeyPair:
    """The service-account signing key pair: (public key PEM, private key PEM)."""
    from cryptography.hazmat.primitives import serialization

    key = _key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyPair(bytes(public), _pem_key(key))


def write(path: str, data: bytes, *, mode: int = 0o600) -> str:
    """Write ``data`` to ``path`` with ``mode``; returns the path."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path
