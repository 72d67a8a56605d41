"""One CSV record, read the way Go's ``encoding/csv`` reads it: how pflag splits a ``stringSlice`` value.

kured's ``--reboot-days``, ``--pre-reboot-node-labels`` and ``--post-reboot-node-labels`` are pflag
``stringSlice`` flags. Each ``Set(value)`` reads **one record** with a default ``csv.Reader`` (comma ``,``, no
comment character, strict quotes, leading spaces kept): ``a,"b,c"`` → ``["a", "b,c"]``; ``mon, tue`` →
``["mon", " tue"]``; ``a"b`` → ``parse error on line 1, column 2: bare " in non-quoted-field``. Empty lines
before the record are skipped, ``\\r\\n`` counts as ``\\n``, a quoted field may span lines, and everything
after the first record is ignored. The empty string is the empty list (pflag's special case); input made only
of empty lines is Go's ``EOF`` error. Columns in errors are 1-based byte offsets, as in Go.
"""

from __future__ import annotations

from pykured.gocompat.goflags import GoValueError

_BARE_QUOTE = 'bare " in non-quoted-field'
_QUOTE = 'extraneous or missing " in quoted-field'


def _error(start_line: int, line: int, column: int, what: str) -> GoValueError:
    if start_line != line:
        prefix = f"record on line {start_line}; "
        return GoValueError(f"{prefix}parse error on line {line}, column {column}: {what}")
    return GoValueError(f"parse error on line {line}, column {column}: {what}")


class _Lines:
    """Go's ``readLine``: lines keep their ``\\n``; a last line without one is returned bare."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0
        self.number = 0

    def read(self) -> bytes | None:
        if self._pos >= len(self._data):
            return None
        end = self._data.find(b"\n", self._pos)
        if end < 0:
            line = self._data[self._pos :]
            self._pos = len(self._data)
            line = line.removesuffix(b"\r")
        else:
            line = self._data[self._pos : end + 1]
            self._pos = end + 1
        self.number += 1
        if line.endswith(b"\r\n"):
            line = line[:-2] + b"\n"
        return line


def _nl_len(line: bytes) -> int:
    return 1 if line.endswith(b"\n") else 0


def _decode(fields: list[bytes]) -> list[str]:
    return [field.decode("utf-8", "surrogateescape") for field in fields]


def read_record(text: str) -> list[str]:
    """The first CSV record of ``text``; raises :class:`GoValueError` with ``encoding/csv``'s message."""
    lines = _Lines(text.encode("utf-8", "surrogateescape"))
    line = lines.read()
    while line is not None and len(line) == _nl_len(line):
        line = lines.read()  # empty lines are skipped
    if line is None:
        raise GoValueError("EOF")
    start = lines.number
    fields: list[bytes] = []
    col = 1
    while True:
        if not line.startswith(b'"'):
            comma = line.find(b",")
            field = line[:comma] if comma >= 0 else line[: len(line) - _nl_len(line)]
            quote = field.find(b'"')
            if quote >= 0:
                raise _error(start, lines.number, col + quote, _BARE_QUOTE)
            fields.append(field)
            if comma < 0:
                return _decode(fields)
            line = line[comma + 1 :]
            col += comma + 1
            continue
        line = line[1:]
        col += 1
        value = bytearray()
        line_no = lines.number
        while True:
            quote = line.find(b'"')
            if quote >= 0:
                value += line[:quote]
                line = line[quote + 1 :]
                col += quote + 1
                if line.startswith(b'"'):
                    value += b'"'
                    line = line[1:]
                    col += 1
                elif line.startswith(b","):
                    line = line[1:]
                    col += 1
                    fields.append(bytes(value))
                    break
                elif len(line) == _nl_len(line):
                    fields.append(bytes(value))
                    return _decode(fields)
                else:
                    raise _error(start, lines.number, col - 1, _QUOTE)
            elif line:
                value += line
                col += len(line)
                following = lines.read()
                line = following if following is not None else b""
                if line:
                    line_no, col = lines.number, 1
            else:
                raise _error(start, line_no, col, _QUOTE)


def parse_string_slice(text: str) -> list[str]:
    """pflag's ``readAsCSV``: ``""`` is ``[]``, anything else is :func:`read_record`."""
    if text == "":
        return []
    return read_record(text)
