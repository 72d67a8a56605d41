"""The Alertmanager blocker against a real Alertmanager (built from its Go module): alerts put in through
its API as Prometheus sends them, silences made as an operator makes them and as pykured makes its reboot
silences (which the gate does not trust)."""

from __future__ import annotations

import datetime

import pytest

from pykured.alertmanager import api
from pykured.alertmanager.silence import silence_spec
from pykured.blockers.alertmanager import AlertmanagerAlertBlocker
from pykured_dev.eventually import eventually
from pykured_dev.testenv.alertmanager import Alertmanager

NOW = datetime.datetime.now(datetime.UTC)


def test_no_alert_no_block(alertmanager: Alertmanager) -> None:
    assert AlertmanagerAlertBlocker(alertmanager.url).check(now=NOW) is None


def test_an_active_alert_blocks_and_a_silence_lets_go(alertmanager: Alertmanager) -> None:
    alertmanager.fire("DiskFull", node="n1")
    alertmanager.fire("Other", node="n2")
    blocker = AlertmanagerAlertBlocker(alertmanager.url)
    reason = blocker.check(now=NOW)
    assert reason is not None and reason.kind == "alertmanager"
    assert reason.message == "2 active alerts: [DiskFull Other] in Alertmanager"
    alertmanager.silence({"alertname": "Other"})
    assert eventually(lambda: str(blocker.check(now=NOW)) == "1 active alerts: [DiskFull] in Alertmanager")
    alertmanager.silence({"node": "n1"})
    assert eventually(lambda: blocker.check(now=NOW) is None)


def test_a_resolved_alert_does_not_block(alertmanager: Alertmanager) -> None:
    alertmanager.fire("Flapping")
    blocker = AlertmanagerAlertBlocker(alertmanager.url)
    assert blocker.check(now=NOW) is not None
    alertmanager.resolve("Flapping")
    assert eventually(lambda: blocker.check(now=NOW) is None)


def test_an_inhibited_alert_does_not_block() -> None:
    config = """\
route:
  receiver: "null"
receivers:
  - name: "null"
inhibit_rules:
  - source_matchers: ['alertname="NodeDown"']
    target_matchers: ['alertname="PodCrashing"']
    equal: ["node"]
"""
    with Alertmanager(config=config) as am:
        am.fire("PodCrashing", node="n1")
        blocker = AlertmanagerAlertBlocker(am.url, filter_regexp="NodeDown")
        assert str(blocker.check(now=NOW)) == "1 active alerts: [PodCrashing] in Alertmanager"
        am.fire("NodeDown", node="n1")  # inhibits PodCrashing on n1; itself filtered out by the regexp
        assert eventually(lambda: blocker.check(now=NOW) is None)


@pytest.mark.parametrize(
    ("regexp", "match_only", "firing_only", "blocking"),
    [
        (None, False, False, ["Critical", "Warning"]),
        ("Warn", False, False, ["Critical"]),
        ("Warn", True, False, ["Warning"]),
        (None, False, True, ["Critical", "Warning"]),  # every alert in Alertmanager is firing
    ],
)
def test_kureds_filters(
    alertmanager: Alertmanager, regexp: str | None, match_only: bool, firing_only: bool, blocking: list[str]
) -> None:
    alertmanager.fire("Critical")
    alertmanager.fire("Warning")
    blocker = AlertmanagerAlertBlocker(
        alertmanager.url, filter_regexp=regexp, match_only=match_only, firing_only=firing_only
    )
    assert blocker.active_alerts() == blocking


def test_basic_auth_is_sent_and_never_shown(alertmanager: Alertmanager) -> None:
    """Alertmanager takes no basic auth of its own; the URL's credentials still go with the request, and a
    failure's message never shows the password."""
    url = alertmanager.url.replace("http://", "http://pk:s3cret@")
    assert AlertmanagerAlertBlocker(url).check(now=NOW) is None
    dead = url.rsplit(":", 1)[0] + ":1"
    reason = AlertmanagerAlertBlocker(dead, timeout=2).check(now=NOW)
    assert reason is not None and reason.message.startswith("alertmanager query error: ")
    assert "s3cret" not in reason.message


def test_a_silence_made_and_expired_through_the_api(alertmanager: Alertmanager) -> None:
    from pykured.alertmanager import matchers

    now = datetime.datetime.now(datetime.UTC)
    spec = api.SilenceSpec(
        matchers.parse('node="n1", alertname=~"Disk.*"'),
        starts=now,
        ends=now + datetime.timedelta(hours=1),
        comment="test",
    )
    ident = api.create_silence(alertmanager.url, spec)
    (made,) = alertmanager.silences(state="active")
    assert made["id"] == ident and made["createdBy"] == "pykured"
    assert {(m["name"], m["value"], m["isRegex"]) for m in made["matchers"]} == {
        ("node", "n1", False), ("alertname", "Disk.*", True),
    }  # fmt: skip
    assert api.expire_silence(alertmanager.url, ident) is True
    assert api.expire_silence(alertmanager.url, ident) is True  # expiring twice is no error
    assert alertmanager.silences(state="active") == []
    assert api.expire_silence(alertmanager.url, "00000000-0000-0000-0000-000000000000") is False
    bad = api.SilenceSpec(matchers.parse('node=~".*"'), starts=now, ends=now, comment="x")
    with pytest.raises(api.AlertmanagerError, match="HTTP 400"):
        api.create_silence(alertmanager.url, bad)


def reboot_silence(alertmanager: Alertmanager, node: str) -> str:
    """A silence as ``--silence-during-reboot='node="{{.Node}}"'`` makes it for ``node``."""
    spec = silence_spec(
        'node="{{.Node}}"',
        node=node,
        now=datetime.datetime.now(datetime.UTC),
        longest=datetime.timedelta(hours=1),
    )
    return api.create_silence(alertmanager.url, spec)


def test_an_alert_under_pykureds_reboot_silence_still_blocks(alertmanager: Alertmanager) -> None:
    """Another node's reboot silence (one whose expiry failed, say) hides its alert from whoever pages, never
    from the gate; an operator's silence on the same alert lets the node go, and so does a silence that only
    says ``createdBy: pykured``."""
    alertmanager.fire("NodeNotReady", node="n1")
    ours = reboot_silence(alertmanager, "n1")
    assert eventually(lambda: alertmanager.alerts() == [])  # silenced in Alertmanager: nobody is paged
    blocker = AlertmanagerAlertBlocker(alertmanager.url)
    held = (
        "1 active alerts: [NodeNotReady] in Alertmanager ([NodeNotReady] silenced only by pykured's reboot "
        "silences, which the gate does not trust)"
    )
    assert str(blocker.check(now=NOW)) == held
    operator = alertmanager.silence({"node": "n1"})
    assert eventually(lambda: blocker.check(now=NOW) is None)  # an operator's silence is trusted
    alertmanager.call("DELETE", f"silence/{operator}")
    assert eventually(lambda: str(blocker.check(now=NOW)) == held)
    alertmanager.silence({"alertname": "NodeNotReady"}, created_by="pykured")  # not a reboot silence
    assert eventually(lambda: blocker.check(now=NOW) is None)
    assert api.expire_silence(alertmanager.url, ours)


def test_kureds_filters_apply_to_alerts_under_reboot_silences(alertmanager: Alertmanager) -> None:
    alertmanager.fire("NodeNotReady", node="n1")
    alertmanager.fire("Watchdog")
    reboot_silence(alertmanager, "n1")
    filtered = AlertmanagerAlertBlocker(alertmanager.url, filter_regexp="NodeNotReady|Watchdog")
    assert eventually(lambda: filtered.check(now=NOW) is None)
    only = AlertmanagerAlertBlocker(alertmanager.url, filter_regexp="Watchdog")
    assert eventually(lambda: only.active_alerts() == ["NodeNotReady"])
