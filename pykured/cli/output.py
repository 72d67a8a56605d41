"""The output edge of pykured's commands: everything they print is terminal-safe.

:func:`safe_stdio` puts a :class:`TerminalSafe` writer in place of ``sys.stdout`` and ``sys.stderr`` while a
command runs, so no value read from the cluster reaches the terminal raw, whichever path prints it
(:func:`pykured.core.printable.terminal_safe`). What a command means to send to the terminal itself (the
screen clear of ``pykured status --watch``) goes through :func:`control`. A command prints to the streams
:func:`streams` gives it, and :func:`run` ends it: its exit code, or 1 and its error in one line on stderr.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO, cast

from pykured.core import errors
from pykured.core.printable import terminal_safe


class TerminalSafe:
    """A text stream that escapes what :func:`terminal_safe` escapes and passes the rest to ``raw``."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(terminal_safe(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, …: the raw stream's
        return getattr(self.raw, name)


def control(out: TextIO, sequence: str) -> None:
    """Write a terminal control ``sequence`` the command means to send (raw, past a :class:`TerminalSafe`)."""
    raw = out.raw if isinstance(out, TerminalSafe) else out
    raw.write(sequence)


@contextlib.contextmanager
def safe_stdio() -> Iterator[None]:
    """While the block runs, ``sys.stdout`` and ``sys.stderr`` are :class:`TerminalSafe` writers."""
    saved = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, TerminalSafe(saved[0]))
    sys.stderr = cast(TextIO, TerminalSafe(saved[1]))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def streams(out: TextIO | None, err: TextIO | None) -> tuple[TextIO, TextIO]:
    """The streams a command prints to: those given, else ``sys.stdout``/``sys.stderr`` as they are when it
    runs (the terminal-safe writers :func:`safe_stdio` puts in place), never as they were when its module
    was imported."""
    return out or sys.stdout, err or sys.stderr


def _fail(prog: str, message: str, err: TextIO) -> int:
    err.write(f"{prog}: error: {message}\n")
    return 1


def run(prog: str, err: TextIO, body: Callable[[], int]) -> int:
    """A command's work: its exit code; 1 for a failure, told in one line on ``err`` (no traceback); 130
    when interrupted."""
    try:
        return body()
    except KeyboardInterrupt:
        return 130
    except errors.PykuredError as exc:
        return _fail(prog, str(exc), err)
