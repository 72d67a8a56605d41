"""The reference pykured is judged against: the real kured 1.23.0 binary, helm, and kured's chart 6.1.0.

``tools/kured-build`` builds kured, the ``timewindow`` oracle (kured's own ``pkg/timewindow`` behind a stdin
protocol) and helm and unpacks the chart into the test cache (cached by version and source, serialised on a
lock file), and prints the bin directory on its last line. :func:`reference` runs it when something is
missing; :func:`artifact` runs it once per process for one artifact, so a changed source is rebuilt.
:func:`helm_template` renders the chart offline and returns its objects. A build failure fails the test
that needs it: these tests never skip.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pykured.kube.client import Obj
from pykured_dev.testenv.procs import TestEnvError, cache_dir, run_build

KURED_VERSION = "1.23.0"
CHART_VERSION = "6.1.0"
BUILD_TIMEOUT_S = 1800


@dataclasses.dataclass(frozen=True)
class Reference:
    """Paths of the reference artifacts (``helm`` and ``chart`` are ``None`` unless asked for)."""

    kured: Path
    helm: Path | None = None
    chart: Path | None = None
    """The unpacked chart directory (``.../kured``, holding ``Chart.yaml``)."""


def _find(bindir: Path, name: str) -> Path | None:
    if name != "chart":
        return bindir / name if (bindir / name).exists() else None
    for candidate in (bindir.parent / "chart" / "kured", cache_dir() / "chart" / "kured"):
        if (candidate / "Chart.yaml").exists():
            return candidate
    return None


def _build(names: Sequence[str], *, why: str, timeout: float | None = None) -> Path:
    """Run ``tools/kured-build NAMES`` (idempotent); the bin directory it prints on its last line."""
    out = run_build("kured-build", names, missing=f"{', '.join(names)} {why}", timeout=timeout)
    return Path(out.strip().splitlines()[-1])


@functools.cache
def artifact(name: str) -> Path:
    """The path of one kured-build artifact (``kured``, ``timewindow``, ``helm``), built or refreshed first.

    Unlike :func:`reference`, this always asks ``tools/kured-build`` (once per process), which rebuilds an
    artifact whose source changed, such as the ``timewindow`` oracle after an edit of ``tools/timewindow``.
    """
    bindir = _build([name], why="needed", timeout=BUILD_TIMEOUT_S)
    path = bindir / name
    if not path.is_file():
        raise TestEnvError(f"tools/kured-build {name} printed {bindir} but {path} is missing")
    return path


def reference(need: Sequence[str] = ("kured", "helm", "chart")) -> Reference:
    """The reference artifacts in ``need``, building the missing ones first (``tools/kured-build``)."""
    bindir = cache_dir() / "bin" / "current"
    missing = [name for name in need if _find(bindir, name) is None]
    if missing:
        bindir = _build(missing, why=f"missing from {bindir}")
    found = {name: _find(bindir, name) for name in ("kured", "helm", "chart")}
    if any(found[name] is None for name in need):
        raise TestEnvError(f"tools/kured-build left no {', '.join(need)} beside {bindir}")
    kured = found["kured"]
    if kured is None:
        raise TestEnvError(f"no kured binary in {bindir}")
    return Reference(kured=kured, helm=found["helm"], chart=found["chart"])


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
    if ref.helm is None or ref.chart is None:
        raise TestEnvError("helm_template needs reference() with helm and the chart")
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
