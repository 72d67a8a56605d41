"""``python -m pykured_dev [ARGS]``: the demo (what ``tools/dev demo`` runs)."""

from __future__ import annotations

import sys

from pykured_dev.demo import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
