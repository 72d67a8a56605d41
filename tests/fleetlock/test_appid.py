"""Zincati's app-specific machine id: the §1.3 vectors and the error cases."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykured.fleetlock.appid import (
    ZINCATI_APP_ID,
    app_specific_id,
    normalize_id,
    parse_id128,
    read_machine_id,
)

ZID = "978a225b3d7b40e9acd7ce9b62f68444"
VECTORS = [
    ("poseidon-compact", "1c09ca98649c4c7abc779cd04c96812e", ZINCATI_APP_ID, ZID),
    ("poseidon-dashed", "1c09ca98-649c-4c7a-bc77-9cd04c96812e", ZINCATI_APP_ID, ZID),
    ("poseidon-upper", "1C09CA98649C4C7ABC779CD04C96812E\n", ZINCATI_APP_ID, ZID),
    (
        "libsystemd",
        "2e074e9b299c41a59923c51ae16f279b",
        "033b1b9b264441fcaa173e9e5bf35c5a",
        "4d4a86c9c6644a479560ded5d19a30c5",
    ),
]


@pytest.mark.parametrize(
    ("machine", "app", "expected"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
)
def test_vectors(machine: str, app: str, expected: str) -> None:
    assert app_specific_id(machine, app) == expected


def test_default_app_is_zincati() -> None:
    assert app_specific_id("1c09ca98649c4c7abc779cd04c96812e") == "978a225b3d7b40e9acd7ce9b62f68444"


def test_key_is_raw_bytes_not_text() -> None:
    text_keyed = hmac.new(b"1c09ca98649c4c7abc779cd04c96812e", bytes.fromhex(ZINCATI_APP_ID), hashlib.sha256)
    assert app_specific_id("1c09ca98649c4c7abc779cd04c96812e") != text_keyed.hexdigest()[:32]


BAD = [
    ("empty", ""),
    ("short", "1c09ca98649c4c7abc779cd04c96812"),
    ("long", "1c09ca98649c4c7abc779cd04c96812e0"),
    ("non-hex", "zc09ca98649c4c7abc779cd04c96812e"),
    ("all-zero", "00000000000000000000000000000000"),
    ("node-name", "worker-1"),
]


@pytest.mark.parametrize("text", [b[1] for b in BAD], ids=[b[0] for b in BAD])
def test_rejects_non_ids(text: str) -> None:
    with pytest.raises(ValueError):
        parse_id128(text)


@given(st.binary(min_size=16, max_size=16).filter(any))
def test_uuid_v4_bits_and_format(raw: bytes) -> None:
    out = app_specific_id(raw.hex())
    assert len(out) == 32 and out == out.lower()
    assert out[12] == "4"
    assert out[16] in "89ab"


def test_normalize_id() -> None:
    assert normalize_id(" 978A225B-3D7B-40E9-ACD7-CE9B62F68444 ") == "978a225b3d7b40e9acd7ce9b62f68444"


def test_read_machine_id(tmp_path: Path) -> None:
    path = tmp_path / "machine-id"
    path.write_text("1c09ca98649c4c7abc779cd04c96812e\n")
    assert read_machine_id(str(path)) == "1c09ca98649c4c7abc779cd04c96812e"
    path.write_text("uninitialized\n")
    with pytest.raises(ValueError):
        read_machine_id(str(path))
    with pytest.raises(OSError):
        read_machine_id(str(tmp_path / "missing"))
