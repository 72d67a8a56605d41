"""docs/parity.md is the matrix of tests/parity/matrix.py, and every cell names a test that exists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.parity import matrix

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "parity.md"


def collected_ids() -> set[str]:
    """The parity tests' ids, as pytest names them (function[params])."""
    import tests.e2e.parity.test_parity as module

    ids: set[str] = set()
    for name in dir(module):
        func = getattr(module, name)
        if not (name.startswith("test_") and callable(func)):
            continue
        marks = [m for m in getattr(func, "pytestmark", []) if m.name == "parametrize"]
        combos: list[list[str]] = [[]]
        for mark in marks:  # the decorator nearest the function comes first in the id
            values = mark.args[1]
            explicit = mark.kwargs.get("ids")
            names = [str(v) for v in (explicit or values)]
            combos = [[*c, n] for c in combos for n in names]
        ids |= {f"{name}[{'-'.join(c)}]" if c else name for c in combos}
    return ids


def test_every_cell_names_a_test_that_exists() -> None:
    ids = collected_ids()
    missing = [
        matrix.cell(f, d)
        for f in matrix.FEATURES
        for d in matrix.DRIVERS
        if not matrix.cell(f, d).startswith("n/a") and matrix.cell(f, d) not in ids
    ]
    assert missing == []


def test_every_na_gives_its_reason() -> None:
    for feature in matrix.FEATURES:
        for driver, why in feature.na.items():
            assert driver in matrix.DRIVERS and len(why) > 40, (feature.name, driver)


def test_the_document_is_current() -> None:
    text = matrix.render()
    if os.environ.get("PYKURED_UPDATE_GOLDEN"):
        DOC.write_text(text)
    if not DOC.exists():
        pytest.fail(f"{DOC} is missing: PYKURED_UPDATE_GOLDEN=1 pytest {__file__}")
    assert DOC.read_text() == text, f"{DOC} drifted: PYKURED_UPDATE_GOLDEN=1 pytest {__file__}"
