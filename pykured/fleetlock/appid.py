"""Zincati's FleetLock ``id``: the systemd app-specific machine ID of Zincati's app id. Pure.

Zincati identifies itself with ``sd_id128_get_machine_app_specific(de35106b-6ec2-4688-b63a-fddaa156679b)``
(Zincati's ``identity`` module; docs/fleetlock.md): HMAC-SHA256 keyed with the 16 raw bytes of
``/etc/machine-id`` over the 16 raw bytes of the app id, truncated to 16 bytes, with the UUID v4 version and
RFC 4122 variant bits set, written as 32 lowercase hex characters (``systemd-id128 machine-id -a
de35106b6ec24688b63afddaa156679b``).

Invariants: the key is the *decoded* machine id, never its text; a machine id may be written with or
without dashes and in any case; anything that is not 32 hex digits (or is all zeros, systemd's "unset") is
rejected with ``ValueError`` rather than mapped to some id.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

ZINCATI_APP_ID: Final = "de35106b6ec24688b63afddaa156679b"

_HEX = frozenset("0123456789abcdef")


def parse_id128(text: str) -> bytes:
    """The 16 bytes of an id128 written as 32 hex digits, dashes allowed; ``ValueError`` otherwise."""
    compact = text.strip().replace("-", "").lower()
    if len(compact) != 32 or not set(compact) <= _HEX:
        raise ValueError(f"not a 128-bit id: {text[:64]!r}")
    raw = bytes.fromhex(compact)
    if raw == bytes(16):
        raise ValueError("the all-zero id128 is not a machine id")
    return raw


def app_specific_id(machine_id: str, app_id: str = ZINCATI_APP_ID) -> str:
    """``sd_id128_get_machine_app_specific``: the id Zincati sends for this machine id."""
    digest = bytearray(hmac.new(parse_id128(machine_id), parse_id128(app_id), hashlib.sha256).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x40  # UUID version 4
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    return digest.hex()


def normalize_id(text: str) -> str:
    """A request ``id`` in the form the index uses: dashes removed, lower case (ids are hex id128s)."""
    return text.strip().replace("-", "").lower()


def read_machine_id(path: str) -> str:
    """The machine id in ``path`` (``/etc/machine-id``), validated; ``OSError``/``ValueError`` on failure."""
    with open(path, encoding="ascii", errors="replace") as handle:
        text = handle.read(256)
    parse_id128(text)
    return text.strip()
