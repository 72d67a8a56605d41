"""Console entry points: ``pykured`` (also ``python -m pykured``) and ``kured``.

Both run the node agent with kured's flags and pykured's subcommands; they differ only in ``--help``: as
``kured`` it is kured's usage text byte for byte, as ``pykured`` the subcommands follow the flags.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run pykured as ``pykured``; returns the process exit code."""
    from pykured.cli.agent import main as cli_main

    return cli_main(sys.argv[1:] if argv is None else argv, prog="pykured")


def kured(argv: list[str] | None = None) -> int:
    """Run pykured as ``kured`` (kured's image and manifests call ``/usr/bin/kured``)."""
    from pykured.cli.agent import main as cli_main

    return cli_main(sys.argv[1:] if argv is None else argv, prog="kured")


if __name__ == "__main__":
    sys.exit(main())
