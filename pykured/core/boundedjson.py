"""JSON from the network, decoded within bounds: a size, a nesting depth, and a total parse.

Concept: a peer (Prometheus, a FleetLock client) decides what bytes arrive, so the decoder must not let it
decide how much memory or recursion pykured spends. :func:`loads` refuses a document larger than
``max_bytes`` or nested deeper than ``max_depth`` *before* ``json.loads`` builds anything, and refuses what
Go's ``encoding/json`` refuses too (invalid UTF-8 text, ``NaN``/``Infinity``). Every failure is one
:class:`JsonError` with a short reason that never echoes the document. Standard library only, no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

from pykured.core.errors import PykuredError

__all__ = ["JsonError", "loads", "nesting_depth"]

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


class JsonError(PykuredError, ValueError):
    """A JSON document was too large, too deep or not valid JSON (the reason is short and echoes nothing)."""


def nesting_depth(data: bytes) -> int:
    """The deepest ``[``/``{`` nesting of ``data``, brackets inside strings ignored (no parse)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub(b"", data)):
        if match.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _no_constant(name: str) -> NoReturn:
    raise JsonError(f"{name} is not JSON")


def loads(data: bytes, *, max_bytes: int, max_depth: int) -> Any:
    """Decode ``data`` or raise :class:`JsonError`: over ``max_bytes``, deeper than ``max_depth``, not UTF-8
    JSON, or carrying ``NaN``/``Infinity``."""
    if len(data) > max_bytes:
        raise JsonError(f"larger than {max_bytes} bytes")
    if nesting_depth(data) > max_depth:
        raise JsonError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise JsonError("not UTF-8") from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise JsonError(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise JsonError(f"not JSON: {exc.msg} at offset {exc.pos}") from None
