"""``python -m pykured_dev [ARGS]``: the demo (``tools/dev demo``); with ``--real-nodes``, on real nodes."""

from __future__ import annotations

import sys

from pykured_dev import demo, realdemo

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(realdemo.main(args) if "--real-nodes" in args else demo.main(args))
