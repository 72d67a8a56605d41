"""The real kured 1.23.0 artifacts the differential tests judge pykured by, built by ``tools/kured-build``.

``tools/kured-build NAME…`` builds (or finds in its cache, ``~/.cache/pykured-testenv``) kured's binary and
the ``timewindow`` oracle (kured's own ``pkg/timewindow`` behind a stdin protocol), and prints the bin
directory on its last line. A build failure fails the test that needs it: these tests never skip.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "tools" / "kured-build"
BUILD_TIMEOUT_S = 1800


@functools.cache
def artifact(name: str) -> Path:
    """The path of one kured-build artifact (``kured`` or ``timewindow``), building it if needed."""
    done = subprocess.run(
        [str(BUILD), name], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"tools/kured-build {name} failed ({done.returncode}):\n{done.stderr}")
    path = Path(done.stdout.strip().splitlines()[-1]) / name
    if not path.is_file():
        raise RuntimeError(f"tools/kured-build {name} printed {done.stdout!r} but {path} is missing")
    return path
