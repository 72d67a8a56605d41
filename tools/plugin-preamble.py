"""The single-file kubectl-pykured's preamble (tools/plugin-build): run by shiv's bootstrap before the plugin.

The file carries compiled modules for some CPython versions on one platform; on any other interpreter the
Kubernetes client's import would end in a traceback. This says so in one line instead, and exits 1.
"""

import importlib.machinery
import pathlib
import platform
import sys

here = pathlib.Path(globals().get("site_packages", "."))
core = here / "pydantic_core"
carried = sorted(path.name.split(".", 1)[1] for path in core.glob("_pydantic_core.*"))
usable = any(
    (core / f"_pydantic_core{suffix}").is_file() for suffix in importlib.machinery.EXTENSION_SUFFIXES
)
if sys.version_info < (3, 11) or not usable:
    wanted = ", ".join(name.rsplit(".", 1)[0] for name in carried) or "none"
    sys.stderr.write(
        f"kubectl-pykured: this file has no compiled modules for {platform.python_implementation()} "
        f"{platform.python_version()} on {sys.platform}/{platform.machine()} ({sys.executable}); it has: "
        f"{wanted}. Use a python3 it supports first on PATH, the file for your platform, or "
        "`pip install pykured`\n"
    )
    sys.exit(1)
