"""The command lines of ``pykured status`` and ``plan``: the agents' ``--max-unavailable`` they take (the
outputs on the real API server: tests/e2e/cli/test_limit.py, tests/e2e/test_status.py)."""

from __future__ import annotations

import io

import pytest

from pykured.cli.plan import plan_main
from pykured.cli.status import status_main


@pytest.mark.parametrize("main", [status_main, plan_main], ids=["status", "plan"])
@pytest.mark.parametrize(("text", "why"), [("0%", "a percentage must be from 1% to 100%"),
                                           ("lots", "want a number of nodes")])  # fmt: skip
def test_a_bad_budget_is_a_usage_error(
    main: object, text: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert callable(main)
    with pytest.raises(SystemExit) as done:
        main([f"--max-unavailable={text}"], out=io.StringIO(), err=io.StringIO())
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "argument --max-unavailable" in err and why in err


@pytest.mark.parametrize("main", [status_main, plan_main], ids=["status", "plan"])
def test_the_help_names_the_agents_flag_and_variable(
    main: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert callable(main)
    with pytest.raises(SystemExit) as done:
        main(["--help"], out=io.StringIO(), err=io.StringIO())
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "the agents' --max-unavailable: N or P% (default: off) (env KURED_MAX_UNAVAILABLE)" in text
