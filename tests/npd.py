"""Node Problem Detector's custom plugin monitor for the tests that run the real NPD (``tools/kured-build
npd``): ``RebootRequired`` from a script, as NPD's plugins report a problem."""

from __future__ import annotations

import json
from pathlib import Path

CONDITION = "RebootRequired"
REASON = "KernelUpdateStaged"


def monitor(directory: Path, problem: Path) -> Path:
    """Write a custom plugin monitor into ``directory``: ``RebootRequired`` from a script that exits 1 (a
    problem) while ``problem`` exists, as NPD's plugins report one; its config's path."""
    script = directory / "check.sh"
    script.write_text(
        f"#!/bin/sh\nif [ -e {problem} ]; then echo 'kernel update staged'; exit 1; fi\nexit 0\n"
    )
    script.chmod(0o755)
    config = {
        "plugin": "custom",
        "pluginConfig": {"invoke_interval": "1s", "timeout": "5s", "max_output_length": 80, "concurrency": 1},
        "source": "pykured-test-monitor",
        "metricsReporting": False,
        "conditions": [
            {"type": CONDITION, "reason": "NoRebootRequired", "message": "no reboot required"}
        ],
        "rules": [
            {"type": "permanent", "condition": CONDITION, "reason": REASON,
             "path": str(script), "timeout": "3s"}
        ],
    }  # fmt: skip
    path = directory / "monitor.json"
    path.write_text(json.dumps(config))
    return path
