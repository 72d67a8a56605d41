"""Values for kured's chart 6.1.0 that set every ``configuration.*`` key, ``extraArgs`` and ``extraEnvVars``
(shared by the chart tests of kured's chart and of pykured's)."""

from __future__ import annotations

from typing import Any

LOCK_ANNOTATION = "example.com/reboot-lock"
TAINT = "example.com/reboot-pending"
LABEL = "example.com/reboot"
REBOOT_COMMAND = "/usr/local/sbin/simulated-reboot --now"
METRICS_PORT = 9102


def every_key_values(receiver_port: int, side: str, prometheus_url: str) -> dict[str, Any]:
    """Values that set every ``configuration.*`` key of the chart, ``extraArgs`` and ``extraEnvVars``
    (notifications to the receiver on ``receiver_port``, alerts from the Prometheus at ``prometheus_url``)."""
    base = f"127.0.0.1:{receiver_port}"
    return {
        "configuration": {
            "useRebootSentinelHostPath": True,
            "metricsHost": "0.0.0.0",
            "metricsPort": METRICS_PORT,
            "lockTtl": "30m",
            "alertFilterRegexp": "^(Watchdog|InfoInhibitor)$",
            "alertFiringOnly": True,
            "alertFilterMatchOnly": True,
            "blockingPodSelector": ["pykured.test/blocker=yes", "pykured.test/batch in (nightly)"],
            "endTime": "23:59:59",
            "lockAnnotation": LOCK_ANNOTATION,
            "period": "10s",
            "forceReboot": True,
            "drainGracePeriod": 5,
            "drainPodSelector": "pykured.test/drain!=skip",
            "drainDelay": "1s",
            "drainTimeout": "2m",
            "skipWaitForDeleteTimeout": 30,
            "prometheusUrl": prometheus_url,
            "rebootDays": ["mo", "tu", "we", "th", "fr", "sa", "su"],
            "rebootSentinel": "/var/run/reboot-required",
            "rebootSentinelCommand": "/usr/bin/test -e /var/run/reboot-required",  # ignored with the hostPath
            "rebootCommand": REBOOT_COMMAND,
            "rebootDelay": "1s",
            "rebootMethod": "command",
            "rebootSignal": 39,
            "slackChannel": "ops",
            "slackHookUrl": "https://hooks.slack.com/services/T000/B000/XXXXXXXX",
            "slackUsername": "reboots",
            "notifyUrl": f"generic+http://{base}/from-values-{side}",
            "messageTemplateDrain": "Draining %s (chart test)",
            "messageTemplateReboot": "Rebooting %s (chart test)",
            "messageTemplateUncordon": "Not used, the environment overrides %s",
            "startTime": "0:00",
            "timeZone": "Europe/Berlin",
            "annotateNodes": True,
            "lockReleaseDelay": "20s",
            "preferNoScheduleTaint": TAINT,
            "logFormat": "json",
            "preRebootNodeLabels": [f"{LABEL}=pending"],
            "postRebootNodeLabels": [f"{LABEL}=done"],
            "concurrency": 2,
        },
        "extraArgs": {"blocking-pod-selector": "pykured.test/extra=yes", "alert-firing-only": ""},
        "extraEnvVars": [
            {
                "name": "KURED_NOTIFY_URL",
                "valueFrom": {"secretKeyRef": {"name": "kured-notify", "key": "url"}},
            },
            {
                "name": "KURED_MESSAGE_TEMPLATE_UNCORDON",
                "valueFrom": {"configMapKeyRef": {"name": "kured-messages", "key": "uncordon"}},
            },
            {"name": "KURED_LOCK_RELEASE_DELAY", "value": "1s"},
        ],
    }
