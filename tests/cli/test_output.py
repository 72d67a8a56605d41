import io
import sys
from typing import TextIO, cast

import pytest

from pykured.cli import agent
from pykured.cli.output import TerminalSafe, control, safe_stdio


def test_a_terminal_safe_writer_escapes_and_passes_the_rest_on() -> None:
    raw = io.StringIO()
    out = TerminalSafe(raw)
    assert out.write("a\x1b[2Jb\n") == len("a\x1b[2Jb\n")
    out.writelines(["c\x9b\n", "d\n"])
    control(cast(TextIO, out), "\x1b[H")
    out.flush()
    assert raw.getvalue() == "a\\u001b[2Jb\nc\\u009b\nd\n\x1b[H"
    assert out.getvalue() == raw.getvalue()  # anything else is the raw stream's


def test_safe_stdio_wraps_and_restores_both_streams() -> None:
    saved = sys.stdout, sys.stderr
    with safe_stdio():
        assert isinstance(sys.stdout, TerminalSafe) and isinstance(sys.stderr, TerminalSafe)
    assert (sys.stdout, sys.stderr) == saved


def test_every_subcommand_prints_through_the_safe_writer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def hostile(argv: list[str]) -> int:
        print("holder \x1b]0;owned\x07")
        print("error \x1b[2J", file=sys.stderr)
        return 0

    monkeypatch.setitem(agent._SUBCOMMANDS, "status", hostile)
    assert agent.main(["status"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "holder \\u001b]0;owned\\u0007\n"
    assert captured.err == "error \\u001b[2J\n"
