"""kured's startup log lines, in kured's order (``cmd/kured/main.go``)."""

from __future__ import annotations

import logging

import pytest

from pykured.config import parse, startup
from pykured.config.reader import read_flags
from pykured.config.startup import settle, startup_lines, startup_records
from pykured.core.errors import ConfigError
from pykured.lock.registry import BACKENDS, LEASE, Backend

NODE = {"KURED_NODE_ID": "node-1"}

DEFAULT_LINES = [
    "Kubernetes Reboot Daemon: 1.23.0",
    "Node ID: node-1",
    "PreferNoSchedule taint: ",
    "Blocking Pod Selectors: []",
    "Reboot period 1h0m0s",
    "Concurrency: 1",
    "Reboot schedule: SunMonTueWedThuFriSat between 00:00 and 23:59 UTC",
    "Reboot method: command",
    "Reboot command: /bin/systemctl reboot",
    "Sentinel checker is (unprivileged) testing for the presence of: /var/run/reboot-required",
    "Lock Annotation: kube-system/kured:weave.works/kured-node-lock",
    "Lock TTL not set, lock will remain until being released",
    "Lock release delay not set, lock will be released immediately after rebooting",
]


def test_default_lines() -> None:
    assert startup_lines(parse([], NODE), "1.23.0") == DEFAULT_LINES
    assert {level for level, _ in startup_records(parse([], NODE), "1.23.0")} == {logging.INFO}


def test_every_optional_line_in_order() -> None:
    cfg = parse(
        [
            "--prefer-no-schedule-taint=weave.works/kured-node-reboot",
            "--blocking-pod-selector=app=db",
            "--blocking-pod-selector=runtime=long,cost=high",
            "--period=20s",
            "--concurrency=2",
            "--annotate-nodes",
            "--reboot-days=mo,tu,we,th",
            "--start-time=8:00",
            "--end-time=18:00",
            "--time-zone=Europe/Berlin",
            "--reboot-method=signal",
            '--reboot-sentinel-command=sh -c "! needs-restarting --reboothint"',
            "--ds-namespace=ops",
            "--ds-name=k",
            "--lock-annotation=example.com/lock",
            "--lock-backend=lease",
            "--lock-ttl=30m",
            "--lock-release-delay=2m",
            "--pre-reboot-node-labels=a=1",
            "--post-reboot-node-labels=b=1",
        ],
        NODE,
    )
    assert startup_records(cfg, "dev") == [
        (logging.INFO, "Kubernetes Reboot Daemon: dev"),
        (logging.INFO, "Node ID: node-1"),
        (
            logging.WARNING,
            "pre-reboot-node-labels keys and post-reboot-node-labels keys do not match, "
            "resulting in unexpected behaviour",
        ),
        (logging.INFO, "PreferNoSchedule taint: weave.works/kured-node-reboot"),
        (logging.INFO, "Blocking Pod Selectors: [app=db runtime=long,cost=high]"),
        (logging.INFO, "Reboot period 20s"),
        (logging.INFO, "Concurrency: 2"),
        (logging.INFO, "Will annotate nodes during kured reboot operations"),
        (logging.INFO, "Reboot schedule: ---MonTueWedThu------ between 08:00 and 18:00 Europe/Berlin"),
        (logging.INFO, "Reboot method: signal"),
        (logging.INFO, "Reboot signal: 39"),
        (
            logging.INFO,
            'Sentinel checker is (privileged) user provided command: sh -c "! needs-restarting --reboothint"',
        ),
        (logging.INFO, "Lock Annotation: ops/k:example.com/lock"),
        (logging.INFO, "Lock backend: lease"),
        (logging.INFO, "Lock TTL set, lock will expire after: 30m0s"),
        (logging.INFO, "Lock release delay set, lock release will be delayed by: 2m0s"),
    ]


@pytest.mark.parametrize(
    ("pre", "post", "warns"),
    [("a=1,b=2", "b=3,a=4", False), ("a=1", "", True), ("", "", False)],
    ids=["same-keys-any-order", "different-keys", "none"],
)
def test_label_keys_warning(pre: str, post: str, warns: bool) -> None:
    cfg = parse([f"--pre-reboot-node-labels={pre}", f"--post-reboot-node-labels={post}"], NODE)
    levels = [level for level, _ in startup_records(cfg, "v")]
    assert (logging.WARNING in levels) is warns


def test_zincati_method_line() -> None:
    lines = startup_lines(parse(["--reboot-method=zincati"], NODE), "v")
    assert "Reboot method: zincati" in lines
    assert "Zincati marker file: /var/lib/zincati/admin/strategy/marker_file/allowfinalize.json" in lines


def test_a_fatal_comes_after_the_lines_kured_logs_before_it() -> None:
    """kured logs its settings up to the failing step, then one fatal line (here: the time window)."""
    lines: list[tuple[int, str]] = []
    flags = read_flags(
        ["--time-zone=Mars/Olympus", "--slack-hook-url=https://hooks.slack.com/services/A/B/C"], NODE
    )
    with pytest.raises(ConfigError, match=r"^Failed to build time window: unknown time zone Mars/Olympus$"):
        settle(flags, NODE, log=lambda level, message: lines.append((level, message)))
    assert [message for _, message in lines] == [
        "Node ID: node-1",
        "Deprecated flag(s). Please use --notify-url flag instead.",
        "PreferNoSchedule taint: ",
        "Blocking Pod Selectors: []",
        "Reboot period 1h0m0s",
        "Concurrency: 1",
    ]


def test_the_reboot_command_line_comes_before_its_error() -> None:
    lines: list[tuple[int, str]] = []
    with pytest.raises(
        ConfigError, match=r"^Failed to build rebooter: error EOF found after escape character"
    ):
        settle(
            read_flags(["--reboot-command=reboot \\"], NODE), NODE, log=lambda _l, m: lines.append((_l, m))
        )
    assert lines[-2:] == [
        (logging.INFO, "Reboot method: command"),
        (logging.INFO, "Reboot command: reboot \\"),
    ]


def test_the_lock_backend_checks_and_line_follow_the_lock_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend registered as serving ``--concurrency-label`` is accepted, and named where it is needed."""
    third = Backend("third", LEASE.build, LEASE.open, serves=frozenset({"concurrency-label"}))
    monkeypatch.setattr(startup, "LOCK_BACKENDS", BACKENDS.register(third))
    cfg = parse(["--lock-backend=third", "--concurrency-label=zone"], NODE)
    assert (logging.INFO, "Lock backend: third") in startup_records(cfg, "1.23.0")
    with pytest.raises(ConfigError, match="--concurrency-label needs --lock-backend=lease or third"):
        parse(["--concurrency-label=zone"], NODE)
    with pytest.raises(ConfigError, match=r"--resume-rolls needs --lock-backend=lease$"):
        parse(["--lock-backend=third", "--resume-rolls"], NODE)


@pytest.mark.parametrize("flag", ["--before-reboot-annotations", "--after-reboot-annotations"])
@pytest.mark.parametrize("name", ["pykured.dev/approved", "weave.works/kured-ok"])
def test_a_hook_the_agent_could_approve_itself_is_fatal(flag: str, name: str) -> None:
    """The agent may write ``pykured.dev/*`` and ``weave.works/kured-*`` on its own Node: a hook so named
    would be approved by the very agent it is meant to hold."""
    flags = read_flags([f"{flag}=example.com/ok,{name}"], NODE)
    with pytest.raises(ConfigError, match=f"{flag.lstrip('-')}: {name}: a reboot hook is another") as caught:
        settle(flags, NODE)
    assert caught.value.exit_code == 1
    settle(read_flags([f"{flag}=example.com/ok"], NODE), NODE)  # another controller's name is fine


def test_the_autoscalers_annotations_are_on_by_default_renamed_or_off() -> None:
    defaults = parse([], NODE)
    assert defaults.autoscaler_annotations == (
        "cluster-autoscaler.kubernetes.io/scale-down-disabled",
        "karpenter.sh/do-not-disrupt",
    )
    off = parse(
        ["--cluster-autoscaler-annotation=", "--karpenter-annotation=karpenter.sh/do-not-consolidate"], NODE
    )
    assert off.autoscaler_annotations == ("karpenter.sh/do-not-consolidate",)
    env = {**NODE, "KURED_CLUSTER_AUTOSCALER_ANNOTATION": "", "KURED_KARPENTER_ANNOTATION": ""}
    assert parse([], env).autoscaler_annotations == ()


@pytest.mark.parametrize(
    ("value", "why"),
    [("bad key!", "must be"), ("pykured.dev/keep", "an autoscaler's annotation"),
     ("weave.works/kured-keep", "an autoscaler's annotation")],
    ids=["not-a-key", "pykureds-own", "kureds-own"],
)  # fmt: skip
@pytest.mark.parametrize("flag", ["--cluster-autoscaler-annotation", "--karpenter-annotation"])
def test_an_autoscaler_annotation_that_is_no_key_or_pykureds_own_is_fatal(
    flag: str, value: str, why: str
) -> None:
    with pytest.raises(ConfigError, match=f"{flag.lstrip('-')}.*{why}") as caught:
        parse([f"{flag}={value}"], NODE)
    assert caught.value.exit_code == 1
