"""Console entry point: ``pykured``, ``kured`` and ``python -m pykured``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run pykured; returns the process exit code."""
    from pykured.cli.agent import main as cli_main

    return cli_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
