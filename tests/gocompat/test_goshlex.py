"""google/shlex splitting of --reboot-command and --reboot-sentinel-command."""

from __future__ import annotations

import pytest

from pykured.gocompat.goflags import GoValueError
from pykured.gocompat.goshlex import split


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("/bin/systemctl reboot", ["/bin/systemctl", "reboot"]),
        ('sh -c "! needs-restarting --reboothint"', ["sh", "-c", "! needs-restarting --reboothint"]),
        ("  a \t b\nc  ", ["a", "b", "c"]),
        ("'a b' c", ["a b", "c"]),
        ("'a\\b'", ["a\\b"]),
        ('"a\\"b"', ['a"b']),
        ('"a\\b"', ["ab"]),
        ("a\\ b", ["a b"]),
        ('a"b c"d', ["ab cd"]),
        ("a '' b", ["a", "", "b"]),
        ('""', [""]),
        ("a#b", ["a#b"]),
        ("a #comment b\nc", ["a", "c"]),
        ("# only a comment", []),
        ("", []),
        ("   ", []),
        ("it's\\ ok", None),
    ],
    ids=[
        "default-reboot-command",
        "needs-restarting-idiom",
        "whitespace-runs",
        "single-quotes",
        "single-quotes-keep-backslash",
        "escaped-double-quote",
        "backslash-any-char-in-double-quotes",
        "escaped-space",
        "quotes-join-word",
        "empty-word",
        "empty-double-quoted",
        "hash-inside-word",
        "comment-to-end-of-line",
        "only-comment",
        "empty",
        "blank",
        "unbalanced-single-quote",
    ],
)
def test_split(command: str, argv: list[str] | None) -> None:
    if argv is None:
        with pytest.raises(GoValueError, match="EOF found when expecting closing quote"):
            split(command)
    else:
        assert split(command) == argv


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ('sh -c "echo', "EOF found when expecting closing quote"),
        ("sh -c 'echo", "EOF found when expecting closing quote"),
        ("reboot\\", "EOF found after escape character"),
        ('"a\\', "EOF found after escape character"),
    ],
    ids=["double", "single", "trailing-backslash", "backslash-in-quotes"],
)
def test_split_errors(command: str, message: str) -> None:
    with pytest.raises(GoValueError) as err:
        split(command)
    assert str(err.value) == message
