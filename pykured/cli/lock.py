"""``pykured lock status`` / ``pykured lock release NODE``: see and fix the reboot lock (kured #137).

The work is in :mod:`pykured.fleet.locks`; both backends are read (the DaemonSet annotation and the Leases)
unless ``--lock-backend`` names one to release.
"""

from __future__ import annotations

import argparse
import sys

from pykured.cli import options
from pykured.gocompat import logrus
from pykured.lock.registry import BACKENDS


def lock_main(argv: list[str]) -> int:
    """``pykured lock ACTION [NODE]``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="pykured lock", description="See and fix kured's reboot lock.")
    parser.add_argument("action", choices=["status", "release"])
    parser.add_argument("node", nargs="?", help="the holder to release (release only)")
    options.add(parser, options.CLUSTER, options.LOCK)
    parser.add_argument("--lock-backend", choices=[*BACKENDS.names, "both"], default="both")
    opts = parser.parse_args(argv)
    logrus.configure("text", "warning")
    from pykured.fleet import locks as admin

    kube = options.kube(opts)
    common = {
        "namespace": opts.ds_namespace,
        "ds_name": opts.ds_name,
        "annotation": opts.lock_annotation,
        "lease_prefix": options.lease_prefix(opts),
    }
    if opts.action == "status":
        return int(admin.lock_status(kube, out=sys.stdout, **common))
    if not opts.node:
        parser.error("release needs the NODE whose slot to free")
    return int(admin.lock_release(kube, opts.node, out=sys.stdout, backend=opts.lock_backend, **common))
