"""``--drain-escalation``: its grammar (an ordered list), what it needs, and its env variable."""

from __future__ import annotations

import re

import pytest

from pykured.agent import wiring
from pykured.config.checks import check_escalation
from pykured.config.startup import parse
from pykured.core.errors import ConfigError
from pykured.cycle.decide import Escalation


@pytest.mark.parametrize(
    ("value", "steps"),
    [
        ("delete", ("delete",)),
        ("force", ("force",)),
        ("quarantine", ("quarantine",)),
        ("delete,force", ("delete", "force")),
        ("delete,quarantine", ("delete", "quarantine")),
        (" delete , quarantine ", ("delete", "quarantine")),
    ],
)
def test_the_steps_in_order(value: str, steps: tuple[str, ...]) -> None:
    cfg = parse(["--node-id=n", "--drain-timeout=1m", f"--drain-escalation={value}"], {})
    assert check_escalation(cfg.drain_escalation) == steps
    assert wiring.build_policy(cfg).escalation == tuple(Escalation(s) for s in steps)


def test_from_its_kured_env_var() -> None:
    env = {"KURED_DRAIN_ESCALATION": "delete,quarantine", "KURED_DRAIN_TIMEOUT": "30s"}
    cfg = parse(["--node-id=n"], env)
    assert wiring.build_policy(cfg).escalation == (Escalation.DELETE, Escalation.QUARANTINE)


def test_off_by_default() -> None:
    cfg = parse(["--node-id=n"], {})
    assert cfg.drain_escalation == () and wiring.build_policy(cfg).escalation == ()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--drain-escalation=reboot"], "invalid --drain-escalation step 'reboot'"),
        (["--drain-escalation=delete,delete"], "a step named twice"),
        (
            ["--drain-escalation=force,quarantine"],
            "delete comes first, then at most one of force or quarantine",
        ),
        (["--drain-escalation=quarantine,delete"], "delete comes first"),
        (["--drain-escalation=force,delete"], "delete comes first"),
    ],
)
def test_a_bad_list_is_fatal(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        parse(["--node-id=n", "--drain-timeout=1m", *argv], {})
    assert info.value.exit_code == 1 and "\n" not in str(info.value)


def test_it_needs_a_drain_timeout() -> None:
    with pytest.raises(ConfigError, match=re.escape("--drain-escalation needs --drain-timeout")):
        parse(["--node-id=n", "--drain-escalation=delete"], {})


def test_quarantine_contradicts_force_reboot() -> None:
    with pytest.raises(ConfigError, match="contradicts --force-reboot"):
        parse(["--node-id=n", "--drain-timeout=1m", "--drain-escalation=quarantine", "--force-reboot"], {})
    # delete then kured's --force-reboot: allowed (the reboot goes ahead whatever the drain did)
    cfg = parse(["--node-id=n", "--drain-timeout=1m", "--drain-escalation=delete", "--force-reboot"], {})
    assert wiring.build_policy(cfg).force_reboot
