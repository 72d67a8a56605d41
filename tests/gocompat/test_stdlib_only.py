"""pykured.gocompat imports nothing but the standard library and itself (the import-linter contract names the
third-party packages pykured knows; this test catches any other), except RE2's bindings in goregexp."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pykured.gocompat

PACKAGE = Path(pykured.gocompat.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_gocompat_imports_only_the_standard_library_and_itself() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) > 5
    foreign = {
        f"{path.name}: {name}"
        for path in modules
        for name in _imports(path)
        if name.split(".")[0] not in sys.stdlib_module_names
        and not name.startswith("pykured.gocompat")
        and (path.name, name) != ("goregexp.py", "re2")
    }
    assert not foreign
