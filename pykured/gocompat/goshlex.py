"""Command-line splitting as ``github.com/google/shlex`` does it: how kured turns a command string into argv.

kured splits ``--reboot-command`` and ``--reboot-sentinel-command`` with google/shlex before running them
under ``nsenter``. Its grammar is POSIX-like but not POSIX:

* words are separated by runs of space, tab, CR or LF;
* ``'…'`` is literal; ``"…"`` is literal except that a backslash takes the next character verbatim (any
  character, so ``"a\\b"`` is ``ab``); outside quotes a backslash also takes the next character verbatim;
* quotes may start or continue a word (``a"b c"d`` is one word ``ab cd``); ``''`` is an empty word;
* ``#`` **at the start of a word** begins a comment that runs to the end of the line (``a#b`` is one word);
* an unterminated quote or a trailing backslash is an error (kured treats it as fatal).

Python's :mod:`shlex` differs (it keeps backslashes in double quotes unless they escape ``$`\\"`` or newline),
so this module is the one place that knows Go's rules.
"""

from __future__ import annotations

from pykured.gocompat.goflags import GoValueError

_SPACE = frozenset(" \t\r\n")


def split(command: str) -> list[str]:
    """Split ``command`` into words; raises :class:`GoValueError` with google/shlex's error text."""
    words: list[str] = []
    i = 0
    n = len(command)
    while i < n:
        ch = command[i]
        if ch in _SPACE:
            i += 1
            continue
        if ch == "#":
            end = command.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        word: list[str] = []
        while i < n and command[i] not in _SPACE:
            ch = command[i]
            if ch == "\\":
                if i + 1 >= n:
                    raise GoValueError("EOF found after escape character")
                word.append(command[i + 1])
                i += 2
            elif ch == "'":
                end = command.find("'", i + 1)
                if end < 0:
                    raise GoValueError("EOF found when expecting closing quote")
                word.append(command[i + 1 : end])
                i = end + 1
            elif ch == '"':
                i += 1
                while True:
                    if i >= n:
                        raise GoValueError("EOF found when expecting closing quote")
                    ch = command[i]
                    if ch == '"':
                        i += 1
                        break
                    if ch == "\\":
                        if i + 1 >= n:
                            raise GoValueError("EOF found after escape character")
                        word.append(command[i + 1])
                        i += 2
                    else:
                        word.append(ch)
                        i += 1
            else:
                word.append(ch)
                i += 1
        words.append("".join(word))
    return words
