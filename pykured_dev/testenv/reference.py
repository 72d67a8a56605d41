"""The reference pykured is judged against: the real kured 1.23.0 binary, helm, and kured's chart 6.1.0.

``tools/kured-build`` builds kured and helm and unpacks the chart into the test cache (cached by version,
serialised on a lock file); :func:`reference` runs it when something is missing. :func:`helm_template`
renders the chart offline and returns its objects.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pykured.kube import Obj
from pykured_dev.testenv.procs import TestEnvError, cache_dir

KURED_VERSION = "1.23.0"
CHART_VERSION = "6.1.0"


@dataclasses.dataclass(frozen=True)
class Reference:
    """Paths of the reference artifacts."""

    kured: Path
    helm: Path
    chart: Path
    """The unpacked chart directory (``.../kured``, holding ``Chart.yaml``)."""


def _chart_dir(bindir: Path) -> Path | None:
    for candidate in (bindir.parent / "chart" / "kured", cache_dir() / "chart" / "kured"):
        if (candidate / "Chart.yaml").exists():
            return candidate
    return None


def reference() -> Reference:
    """The reference artifacts, building them first (``tools/kured-build``) when one is missing."""
    bindir = cache_dir() / "bin" / "current"
    chart = _chart_dir(bindir)
    if not ((bindir / "kured").exists() and (bindir / "helm").exists() and chart):
        script = Path(__file__).resolve().parents[2] / "tools" / "kured-build"
        if not script.exists():
            raise TestEnvError(f"kured/helm/chart missing from {bindir} and no {script}")
        result = subprocess.run([str(script)], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise TestEnvError(f"tools/kured-build failed:\n{result.stderr[-4000:]}")
        bindir = Path(result.stdout.strip().splitlines()[-1])
        chart = _chart_dir(bindir)
    if chart is None or not (bindir / "kured").exists() or not (bindir / "helm").exists():
        raise TestEnvError(f"tools/kured-build left no kured, helm or chart beside {bindir}")
    return Reference(kured=bindir / "kured", helm=bindir / "helm", chart=chart)


def helm_template(
    ref: Reference,
    *,
    release: str,
    namespace: str,
    values: Mapping[str, Any] | None = None,
    workdir: Path,
    extra: Sequence[str] = (),
) -> tuple[str, list[Obj]]:
    """``helm template`` of the chart (offline); returns the YAML and its objects in order."""
    import yaml

    workdir.mkdir(parents=True, exist_ok=True)
    argv = [str(ref.helm), "template", release, str(ref.chart), "--namespace", namespace, *extra]
    if values is not None:
        path = workdir / f"values-{release}.yaml"
        path.write_text(json.dumps(values, indent=2))  # JSON is YAML
        argv += ["--values", str(path)]
    home = workdir / "helm-home"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    result = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        raise TestEnvError(f"helm template failed: {result.stderr.strip()}")
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return result.stdout, objects
