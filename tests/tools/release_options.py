"""The options the public release passes to ``tools/release``, shared by its workflow test and its dry run.

``.github/workflows/release.yaml`` runs ``tools/release`` with exactly :data:`PUBLIC`; the dry run
(``tests/e2e/tools/test_release.py``) runs it with the same options plus :data:`DRY_RUN_ONLY` (a local
registry's CA, the dry run itself, the key made for the run, the checkout's own image).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ("--registry",)
DRY_RUN_ONLY = ("--ca", "--dry-run", "--key", "--image")


def load_release() -> ModuleType:
    """``tools/release.py`` as a module (it is a script, not part of a package)."""
    spec = importlib.util.spec_from_file_location("pykured_release", ROOT / "tools" / "release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    import sys

    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module
