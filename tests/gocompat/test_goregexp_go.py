"""Differential: pykured's ``--alert-filter-regexp`` (RE2) against Go's own ``regexp`` package.

The ``goregexp`` oracle (``tools/goregexp``, built by ``tools/kured-build goregexp`` with the Go that builds
kured) compiles each pattern with ``regexp.Compile`` and reports its error text, or the leftmost match
(``FindString``) in each input. :func:`pykured.gocompat.goregexp.compile_re2` must agree on every pattern:
the same acceptance, the same error text (kured prints it in its flag error), and the same leftmost match in
every input. The patterns are generated from a fixed seed (the same every run): RE2/Go constructs and flags,
Unicode classes, character classes, repetitions, and the fragments Go refuses, mixed; the inputs are random
strings over the patterns' own characters and a little Unicode.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator

import pytest

from pykured.gocompat.goflags import GoValueError
from pykured.gocompat.goregexp import compile_re2
from pykured_dev.testenv.reference import artifact

pytestmark = [pytest.mark.reference, pytest.mark.timeout(600)]

SEED = 20261201
PATTERNS = 4000
INPUTS_PER_PATTERN = 8


def words(text: str) -> list[str]:
    """The space-separated pieces of ``text``."""
    return text.split()


LITERALS = list("abcxyzABCXYZ019_ -.:/é\u03a9\u03bb\u00dfK\u212a\u017f\n\t")
ATOMS = words(r"""
    . \d \D \w \W \s \S \b \B \A \z ^ $ \pL \PL \p{Greek} \P{Greek} \p{^Greek} \p{Lu} \p{Ll} \pN \p{Latin}
    \p{Any} [abc] [^a-c] [a-zA-Z] [[:alpha:]] [[:^digit:]x] [[:word:]] [[:space:]] [\d\s] [^\W_] []a] [^]a]
    [a-] [\p{Greek}a] [-a] \x41 \x{3a9} \x{1F600} \101 \0 \Qa.b\E \Q*\E \. \* \( \[ \{ \^ \$ \- \n \t \f \v
    \a \r a{,2} { } ] \x{10FFFF}
""")
FLAGS = words("(?i) (?U) (?s) (?m) (?-i) (?i-s) (?im) (?-m) (?sU)")
OPEN = words("( (?: (?i: (?U: (?s: (?m: (?-i: (?P<n> (?<n1> (?P<name_2> (?<x>")
REPEAT = words("* + ? {2} {1,3} {2,} *? +? ?? {0} {0,1}? {3,3} {1000}")
BROKEN = words(r"""
    \ \C (?= (?! (?<= (?<! (?> \8 \1 [z-a] (?<é> (?P<é> [[:foo:]] a{1001} ** *+ ) (?P=n) \Z [ ( (? (?x) \e
    \p{Foo} \pX \x{110000} \xZ (?P<> (?<a-b> {2}{3} (?i [\C] \p{ \Q (?P<n>a)(?P<n>b) x{2,1} (?# (?< (?P< (?P>
    [[:alpha: \k<n>
""")
INPUT_EXTRA = list("aAbBxX01 _\n.-éÉΩωλΛßẞKkſ😀")


def gen_pattern(rng: random.Random, depth: int = 0) -> str:
    """One pattern: a sequence of pieces, sometimes alternated, grouped, repeated, flagged or broken."""
    parts: list[str] = []
    for _ in range(rng.randint(0 if depth else 1, 4)):
        roll = rng.random()
        if roll < 0.30:
            piece = "".join(rng.choice(LITERALS) for _ in range(rng.randint(1, 3)))
        elif roll < 0.60:
            piece = rng.choice(ATOMS)
        elif roll < 0.70 and depth < 3:
            piece = rng.choice(OPEN) + gen_pattern(rng, depth + 1) + ")"
        elif roll < 0.78:
            piece = rng.choice(FLAGS)
        elif roll < 0.84:
            piece = "|"
        elif roll < 0.90:
            piece = rng.choice(BROKEN)
        else:
            piece = rng.choice(LITERALS)
        if rng.random() < 0.25:
            piece += rng.choice(REPEAT)
        parts.append(piece)
    return "".join(parts)


def gen_inputs(rng: random.Random, pattern: str) -> list[str]:
    """Random strings over the pattern's own characters and a little Unicode, and a few fixed ones."""
    alphabet = [ch for ch in pattern if ch not in "\\[](){}*+?|^$"] + INPUT_EXTRA
    texts = ["", "\n"]
    while len(texts) < INPUTS_PER_PATTERN:
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 10))))
    return texts


def cases() -> Iterator[tuple[str, list[str]]]:
    rng = random.Random(SEED)
    seen: set[str] = set()
    while len(seen) < PATTERNS:
        pattern = gen_pattern(rng)
        if pattern in seen:
            continue
        seen.add(pattern)
        yield pattern, gen_inputs(rng, pattern)


def pykured_answer(pattern: str, inputs: list[str]) -> dict[str, object]:
    try:
        compiled = compile_re2(pattern)
    except GoValueError as exc:
        return {"err": str(exc), "m": None}
    return {"m": [compiled.search(text) for text in inputs]}


def go_answers(queries: list[tuple[str, list[str]]]) -> list[dict[str, object]]:
    text = "".join(json.dumps({"p": p, "in": inputs}, ensure_ascii=False) + "\n" for p, inputs in queries)
    done = subprocess.run(
        [str(artifact("goregexp"))], input=text.encode(), capture_output=True, timeout=300, check=True
    )
    answers = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert len(answers) == len(queries), done.stderr.decode()
    return answers


@pytest.fixture(scope="module")
def compared() -> list[tuple[str, list[str], dict[str, object], dict[str, object]]]:
    queries = list(cases())
    answers = go_answers(queries)
    return [
        (pattern, inputs, go, pykured_answer(pattern, inputs))
        for (pattern, inputs), go in zip(queries, answers, strict=True)
    ]


def test_the_generator_covers_acceptance_refusal_and_matches(
    compared: list[tuple[str, list[str], dict[str, object], dict[str, object]]],
) -> None:
    refused = sum(1 for _, _, go, _ in compared if "err" in go)
    results: list[list[str | None]] = [go["m"] for _, _, go, _ in compared if isinstance(go["m"], list)]
    matched = sum(1 for found in results if any(m is not None for m in found))
    missed = sum(1 for found in results if any(m is None for m in found))
    assert len(compared) == PATTERNS
    assert refused > PATTERNS // 5
    assert PATTERNS - refused > PATTERNS // 3
    assert matched > PATTERNS // 5
    assert missed > PATTERNS // 10


def test_pykured_agrees_with_go_regexp(
    compared: list[tuple[str, list[str], dict[str, object], dict[str, object]]],
) -> None:
    differences = [
        f"{pattern!r} inputs={inputs!r}\n  go:      {go}\n  pykured: {mine}"
        for pattern, inputs, go, mine in compared
        if go != mine
    ]
    assert not differences, f"{len(differences)} of {len(compared)} differ:\n" + "\n".join(differences[:30])


# Found by the generator with other seeds; listed in COMPATIBILITY.md. Go and RE2 both cap a repetition at
# 1000 and both refuse nested repetitions whose counts multiply past their limits, but they count differently
# (Go skips empty-width operands, RE2 does not, and Go's "expression too large" is a size RE2 does not
# measure), so a few such patterns compile in one and not the other. An alert filter never nests repeats so.
DOCUMENTED = [
    (
        "((?P<n>)(?i-s)??(?-m){1000}(?i){0}){1,3}\\vXé{1000}|",
        {"m": [""]},
        {"err": "error parsing regexp: invalid repeat count: `{1,3}`", "m": None},
    ),
    (
        "1z\tA\n(?U:\t{0}(?-i:K/a??\\r(?i){0,1}?\\B){1000}\\{){1000}",
        {
            "err": "error parsing regexp: expression too large: "
            "`1z\tA\n(?U:\t{0}(?-i:K/a??\\r(?i){0,1}?\\B){1000}\\{){1000}`",
            "m": None,
        },
        {"err": "error parsing regexp: invalid repeat count: `{1000}`", "m": None},
    ),
]


@pytest.mark.parametrize(("pattern", "go", "pykured"), DOCUMENTED, ids=["empty-width-repeats", "too-large"])
def test_documented_differences_still_hold(
    pattern: str, go: dict[str, object], pykured: dict[str, object]
) -> None:
    assert go_answers([(pattern, ["x"])]) == [go]
    assert pykured_answer(pattern, ["x"]) == pykured
