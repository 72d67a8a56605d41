"""pykured at scale: N real agent processes on simulated nodes, every node needing a reboot, then idle.

    nice .venv/bin/python benchmarks/scale.py --nodes 100 --concurrency 5 --lock-backend lease
    nice .venv/bin/python benchmarks/scale.py --nodes 100 --lock-backend daemonset --idle-minutes 10
    nice .venv/bin/python benchmarks/scale.py --lock-backend lease --agent-arg=--resume-rolls --idle-minutes 0

Prints, from kube-apiserver's own ``/metrics`` (``apiserver_request_total``,
``apiserver_longrunning_requests``, ``apiserver_flowcontrol_rejected_requests_total``) and ``/proc``:

* the agents' memory (RSS) once settled;
* waiting (``--wait-minutes``): every node needs a reboot while the benchmark holds every slot of the lock
  (holder nodes of its own, with no agent): requests per waiting node per hour by verb and resource;
* the roll: total time against the ideal (ceil(nodes / concurrency) × the median single-node cycle, cordon to
  uncordon), API requests per second by verb and resource, 429s, the most open watches, agents' CPU, and
  per hand-over (one slot freed and taken) the lock's requests for the whole fleet;
* idle: requests per agent per hour by verb and resource;
* the load of 1,000 and 5,000 nodes at a 5-minute cycle, from these figures (see ``project``).

The API server's own background traffic (measured for a minute before any agent starts) and the harness's
traffic (the simulated kubelet's pod watch, this script's node watch and scrapes) are subtracted or
excluded, so the figures are the agents'. Run one backend at a time on a shared machine; the load average is
printed with the figures.

The agents notice their sentinel file by a stat every 5 seconds, not by inotify (:data:`STAT_SENTINEL`):
a machine grants a user only so many inotify instances (128 by default, shared by every process), and a
few hundred agents would take them all. The agents are otherwise the product's ``python -m pykured``;
the stat is the product's own fallback (its sentinel supervisor), so no request count changes.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import re
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TextIO

from pykured.core import errors
from pykured.gocompat.goflags import Duration
from pykured.lock.annotation import AnnotationLock
from pykured.lock.lease import WATCH_SECONDS as LEASE_WATCH_SECONDS
from pykured.lock.lease import LeaseLock
from pykured.policy.source import WATCH_SECONDS as POLICY_WATCH_SECONDS
from pykured.requests.watch import WATCH_SECONDS as NODE_WATCH_SECONDS
from pykured_dev.testenv import Cluster
from pykured_dev.testenv.fleet import AgentSlot, Fleet

STAT_SENTINEL = (
    "import sys; from pykured.host.sentinel import FileSentinel; FileSentinel._arm = lambda self: None; "
    "from pykured.__main__ import main; sys.exit(main())"
)
"""The agent, with no inotify watch on its sentinel directory (see the module docstring)."""

_SAMPLE = re.compile(r"^(\w+)\{([^}]*)\}\s+([0-9.eE+-]+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
TICK = os.sysconf("SC_CLK_TCK")

Counts = dict[tuple[str, str, str], float]
"""(verb, resource[/subresource], code) → count."""


def scrape(cluster: Cluster) -> tuple[Counts, dict[str, float], float]:
    """Request counts, open long-running requests by resource, APF rejections."""
    text = cluster.kube().request("GET", "/metrics").get("text", "")
    requests: Counts = collections.defaultdict(float)
    watches: dict[str, float] = collections.defaultdict(float)
    rejected = 0.0
    for line in str(text).splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, labels_text, value = match.groups()
        labels = dict(_LABEL.findall(labels_text))
        res = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
        if name == "apiserver_request_total":
            requests[(labels.get("verb", ""), res, labels.get("code", ""))] += float(value)
        elif name == "apiserver_longrunning_requests" and labels.get("verb") == "WATCH":
            watches[res] += float(value)
        elif name == "apiserver_flowcontrol_rejected_requests_total":
            rejected += float(value)
    return dict(requests), dict(watches), rejected


def delta(after: Counts, before: Counts) -> Counts:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


def by_verb_resource(counts: Counts) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = collections.defaultdict(float)
    for (verb, res, _code), value in counts.items():
        if res:  # non-resource URLs (/metrics, /readyz) are the harness's
            out[(verb, res)] += value
    return dict(out)


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


class NodeWatch:
    """Cordon and uncordon times and bootID changes of every Node, from one watch."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.cordoned_at: dict[str, float] = {}
        self.cycles: list[float] = []
        self.rebooted: set[str] = set()
        self.boot: dict[str, str] = {}
        self.cordoned: set[str] = set()
        self.most_cordoned = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        kube = self.cluster.kube()
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    listing = kube.list_nodes()
                    for node in listing["items"]:
                        self._see(node)
                    rv = listing["metadata"]["resourceVersion"]
                for event in kube.watch_nodes(resource_version=rv, timeout_seconds=60):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        rv = ""
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._see(obj)
                    if self._stop.is_set():
                        return
            except errors.KubeError:
                rv = ""
                time.sleep(0.5)

    def _see(self, node: dict[str, object]) -> None:
        meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
        assert isinstance(meta, dict) and isinstance(spec, dict) and isinstance(status, dict)
        name = meta["name"]
        boot = (status.get("nodeInfo") or {}).get("bootID", "")
        if name in self.boot and boot and boot != self.boot[name]:
            self.rebooted.add(name)
        if boot:
            self.boot[name] = boot
        now = time.monotonic()
        if spec.get("unschedulable"):
            if name not in self.cordoned:
                self.cordoned.add(name)
                self.cordoned_at[name] = now
        elif name in self.cordoned:
            self.cordoned.discard(name)
            self.cycles.append(now - self.cordoned_at.pop(name))
        self.most_cordoned = max(self.most_cordoned, len(self.cordoned))


class StatSentinelFleet(Fleet):
    """A :class:`Fleet` whose agents hold no inotify instance (:data:`STAT_SENTINEL`)."""

    def argv(self, slot: AgentSlot) -> list[str]:
        argv = super().argv(slot)
        assert argv[1:3] == ["-m", "pykured"], argv
        return [argv[0], "-c", STAT_SENTINEL, *argv[3:]]


def inotify_instances() -> int:
    """inotify instances open on this machine, all users': ``find /proc/*/fd -lname anon_inode:inotify``."""
    count = 0
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            for fd in fd_dir.iterdir():
                try:
                    if os.readlink(fd) == "anon_inode:inotify":
                        count += 1
                except OSError:
                    continue
        except OSError:
            continue
    return count


def table(rates: dict[tuple[str, str], float], unit: str, limit: int = 14) -> list[str]:
    rows = sorted(rates.items(), key=lambda kv: -kv[1])[:limit]
    return [f"    {verb:<7} {res:<28} {value:10.2f} {unit}" for (verb, res), value in rows]


LOCK_RESOURCES = ("leases", "daemonsets")
WRITES = ("PUT", "PATCH", "POST", "DELETE", "CREATE", "UPDATE")
HARNESS = (("WATCH", "nodes"), ("WATCH", "pods"), ("PATCH", "nodes/status"), ("PATCH", "pods/status"))


def hold_every_slot(cluster: Cluster, opts: argparse.Namespace) -> list[LeaseLock | AnnotationLock]:
    """Take every slot of the agents' lock for holder nodes of the benchmark's own (Nodes that exist, so no
    agent frees them as gone; no agent runs on them)."""
    holders = cluster.add_nodes(*[f"holder-{i}" for i in range(opts.concurrency)])
    locks: list[LeaseLock | AnnotationLock] = []
    for name in holders:
        lock: LeaseLock | AnnotationLock
        if opts.lock_backend == "lease":
            lock = LeaseLock(cluster.kube(), namespace="kube-system", prefix="kured-lock", node_id=name,
                             concurrency=opts.concurrency, ttl=Duration(0))  # fmt: skip
        else:
            lock = AnnotationLock(cluster.kube(), namespace="kube-system", ds_name="kured",
                                  annotation="weave.works/kured-node-lock", node_id=name,
                                  concurrency=opts.concurrency, ttl=Duration(0))  # fmt: skip
        assert lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired, name
        locks.append(lock)
    return locks


def waiting_phase(
    cluster: Cluster, opts: argparse.Namespace, background: dict[tuple[str, str], float], out: TextIO
) -> float:
    """Every node waits for a held lock for ``--wait-minutes``: requests per waiting node per hour."""
    w0, _, _ = scrape(cluster)
    time.sleep(opts.wait_minutes * 60)
    w1, watches, _ = scrape(cluster)
    seconds = opts.wait_minutes * 60
    rates = {
        k: (v / seconds - background.get(k, 0.0)) * 3600 / opts.nodes
        for k, v in by_verb_resource(delta(w1, w0)).items()
    }
    rates = {k: v for k, v in rates.items() if v > 0.05 and k not in HARNESS}
    total = sum(rates.values())
    print(
        f"  waiting {opts.wait_minutes:g} min, every slot held, all {opts.nodes} nodes needing a reboot: "
        f"requests per waiting node per hour (background subtracted): total {total:.1f}",
        file=out,
    )
    for line in table(rates, "req/node/h"):
        print(line, file=out)
    print(f"  open watches while waiting (all, API server's own included): {watches}", file=out, flush=True)
    return float(total)


def project(
    opts: argparse.Namespace, *, per_handover: float, per_cycle: float, waiting_per_hour: float, out: TextIO
) -> None:
    """The fleet's request rate at 1,000 and 5,000 nodes, a 5-minute cycle, this ``--concurrency``.

    A roll of N nodes hands a slot over h = concurrency / cycle times a second. Each hand-over costs the
    measured lock requests of the whole fleet and one node's cycle (its own writes, drain, events); each
    waiting node costs what it asked while waiting (``--wait-minutes``; on the Lease backend a waiter looks
    again only at its ``--period`` pass, too rare for the window, so that pass is added: its reads come from
    the watched copy, but the gone-holder check GETs each holder's Node, and the watch on the Leases is
    renewed every six hours while it waits; the DaemonSet backend's minute passes are in the window).
    W waiting nodes: N at the start of a roll (the peak), N/2 on average. Every agent also renews its watches
    on its own Node and on the policy ConfigMap once a day (idle or not); an idle agent sends nothing else
    (its ``--period`` pass reads the lock only when the Node or the sentinel asks for a reboot).
    """
    cycle = 300.0
    h = opts.concurrency / cycle
    renewals = 3600 / NODE_WATCH_SECONDS + 3600 / POLICY_WATCH_SECONDS  # per agent per hour
    hourly_pass = opts.concurrency + 3600 / LEASE_WATCH_SECONDS if opts.lock_backend == "lease" else 0.0
    per_waiter = (waiting_per_hour + hourly_pass) / 3600
    print(
        f"  projection, 5-minute cycle, --concurrency={opts.concurrency} (h = {h:.4f} hand-overs/s): "
        f"{per_handover:.2f} lock requests per hand-over, {per_cycle:.1f} per node's cycle, "
        f"{per_waiter * 3600:.1f} per waiting node per hour",
        file=out,
    )
    for nodes in (1000, 5000):
        renew = nodes * renewals / 3600
        avg = h * (per_handover + per_cycle) + nodes / 2 * per_waiter + renew
        peak = h * (per_handover + per_cycle) + nodes * per_waiter + renew
        print(
            f"    {nodes:>5} nodes: roll {math.ceil(nodes / opts.concurrency) * cycle / 3600:.1f} h; "
            f"requests/s average {avg:.1f}, peak {peak:.1f}; idle {renew:.3f} (the watches' daily renewals; "
            f"kured 1.23.0 idle: 0)",
            file=out,
        )


def idle_phase(
    cluster: Cluster,
    fleet: Fleet,
    opts: argparse.Namespace,
    background: dict[tuple[str, str], float],
    base_watches: dict[str, float],
    out: TextIO,
) -> None:
    """The same fleet idle for ``--idle-minutes``: requests per agent per hour, watches, CPU."""
    time.sleep(5)
    i0, _, _ = scrape(cluster)
    idle_cpu0 = sum(cpu_seconds(s.proc.pid) for s in fleet.slots.values() if s.proc)
    time.sleep(opts.idle_minutes * 60)
    i1, watches_end, _ = scrape(cluster)
    idle_cpu1 = sum(cpu_seconds(s.proc.pid) for s in fleet.slots.values() if s.proc)
    seconds = opts.idle_minutes * 60
    idle = {
        k: (v / seconds - background.get(k, 0.0)) * 3600 / opts.nodes
        for k, v in by_verb_resource(delta(i1, i0)).items()
    }
    # the harness's own watches (the simulated kubelet's pods, this script's nodes)
    idle = {k: v for k, v in idle.items() if v > 0.05 and k not in (("WATCH", "pods"), ("WATCH", "nodes"))}
    print(
        f"  idle {opts.idle_minutes:g} min: requests per agent per hour (background subtracted): "
        f"total {sum(idle.values()):.1f}",
        file=out,
    )
    for line in table(idle, "req/agent/h"):
        print(line, file=out)
    idle_watches = {
        res: value - base_watches.get(res, 0.0)
        for res, value in watches_end.items()
        if value - base_watches.get(res, 0.0) > 0
    }
    print(f"  agents' open watches while idle: {idle_watches or 'none'}", file=out)
    print(
        f"  agents' CPU while idle: {(idle_cpu1 - idle_cpu0) / seconds * 100:.2f} % of one core "
        f"for all {opts.nodes}",
        file=out,
    )
    print(f"  load average at the end {loadavg()}", file=out, flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=5)
    parser.add_argument("--lock-backend", choices=["lease", "daemonset"], default="lease")
    parser.add_argument("--idle-minutes", type=float, default=10.0)
    parser.add_argument(
        "--wait-minutes", type=float, default=5.0, help="every node waits for a held lock this long first"
    )
    parser.add_argument("--baseline-seconds", type=float, default=60.0)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument(
        "--agent-arg",
        action="append",
        default=[],
        help="one more agent argument, e.g. --agent-arg=--resume-rolls (repeatable)",
    )
    opts = parser.parse_args(argv)
    out = sys.stdout
    print(
        f"scale: {opts.nodes} agents, --concurrency={opts.concurrency}, --lock-backend={opts.lock_backend}"
        f"{''.join(' ' + a for a in opts.agent_arg)}; "
        f"load average at start {loadavg()}",
        file=out,
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="pykured-scale-"))
    cluster = Cluster().start()
    try:
        cluster.ensure_namespace("kube-system")
        cluster.create_daemonset("kube-system", "kured")
        names = [f"node-{i:03d}" for i in range(opts.nodes)]
        cluster.add_nodes(*names)
        apps = cluster.new_namespace("apps")
        for name in names:
            cluster.create_pod(apps, f"app-{name}", node=name, grace=1)

        # the API server's own background traffic, before any agent runs
        base0, _, _ = scrape(cluster)
        time.sleep(opts.baseline_seconds)
        base1, base_watches, _ = scrape(cluster)
        background = {k: v / opts.baseline_seconds for k, v in by_verb_resource(delta(base1, base0)).items()}

        args = [f"--concurrency={opts.concurrency}", f"--lock-backend={opts.lock_backend}", *opts.agent_arg]
        with StatSentinelFleet(cluster, workdir=workdir / "fleet", args=args) as fleet:
            began = time.monotonic()
            for name in names:
                fleet.add(name)
                time.sleep(0.1)
            # settled: every agent finished its first pass (read from its log only to know it is up)
            settle_deadline = time.monotonic() + 600
            while time.monotonic() < settle_deadline:
                if all("Reboot not required" in fleet.log_text(n) for n in names):
                    break
                time.sleep(2)
            time.sleep(5)
            rss = [rss_mb(s.proc.pid) for s in fleet.slots.values() if s.proc]
            print(
                f"  agents started and settled in {time.monotonic() - began:.0f} s; RSS per agent: mean "
                f"{statistics.mean(rss):.1f} MB, max {max(rss):.1f} MB, total {sum(rss) / 1024:.2f} GB; "
                f"inotify instances on the machine: {inotify_instances()}",
                file=out,
                flush=True,
            )

            waiting_per_hour = 0.0
            if opts.wait_minutes > 0:
                held = hold_every_slot(cluster, opts)
                for name in names:
                    fleet.touch(name)
                time.sleep(30)  # every agent sees its sentinel (a stat every 5 s) and starts to wait
                waiting_per_hour = waiting_phase(cluster, opts, background, out)
            watch = NodeWatch(cluster)
            watch.start()
            time.sleep(1)
            m0, _, rej0 = scrape(cluster)
            cpu_start = {n: cpu_seconds(s.proc.pid) for n, s in fleet.slots.items() if s.proc}
            children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            most_watches: dict[str, float] = {}
            t0 = time.monotonic()
            if opts.wait_minutes > 0:
                for lock in held:
                    lock.release()
            else:
                for name in names:
                    fleet.touch(name)
            deadline = t0 + opts.timeout
            next_scrape = t0
            while time.monotonic() < deadline:
                if time.monotonic() >= next_scrape:
                    _, watches, _ = scrape(cluster)
                    for res, value in watches.items():
                        agents = value - base_watches.get(res, 0.0) - (1 if res == "nodes" else 0)
                        if agents > 0:
                            most_watches[res] = max(most_watches.get(res, 0.0), agents)
                    next_scrape = time.monotonic() + 5
                if len(watch.rebooted) == len(names) and not watch.cordoned:
                    break
                time.sleep(0.5)
            roll = time.monotonic() - t0
            m1, _, rej1 = scrape(cluster)
            children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            live_cpu = sum(cpu_seconds(s.proc.pid) for s in fleet.slots.values() if s.proc)
            agent_cpu = (
                (children1.ru_utime + children1.ru_stime - children0.ru_utime - children0.ru_stime)
                + live_cpu
                - sum(v for n, v in cpu_start.items())
            )
            watch.stop()
            rolled = len(watch.rebooted)
            cycle = statistics.median(watch.cycles) if watch.cycles else float("nan")
            ideal = math.ceil(opts.nodes / opts.concurrency) * cycle
            roll_counts = delta(m1, m0)
            rates = {k: v / roll - background.get(k, 0.0) for k, v in by_verb_resource(roll_counts).items()}
            rates = {k: v for k, v in rates.items() if v > 0.005 and k not in HARNESS}
            throttled = sum(v for (_verb, _res, code), v in roll_counts.items() if code == "429")
            print(
                f"  roll: {rolled}/{opts.nodes} nodes rebooted in {roll:.1f} s; ideal {ideal:.1f} s "
                f"(ceil({opts.nodes}/{opts.concurrency}) × median cycle {cycle:.1f} s, cordon→uncordon); "
                f"ratio {roll / ideal:.2f}; most cordoned at once {watch.most_cordoned}",
                file=out,
            )
            print(
                f"  API requests/s during the roll (agents; background subtracted): total "
                f"{sum(rates.values()):.1f}",
                file=out,
            )
            for line in table(rates, "req/s"):
                print(line, file=out)
            print(f"  HTTP 429: {throttled:.0f}; APF rejections: {rej1 - rej0:.0f}", file=out)
            print(
                f"  most open watches by the agents (API server's own and the harness's subtracted): "
                f"{dict(sorted(most_watches.items()))}",
                file=out,
            )
            print(
                f"  agents' CPU during the roll: {agent_cpu:.1f} s "
                f"({agent_cpu / roll * 100:.1f} % of one core, "
                f"{agent_cpu / opts.nodes:.2f} s per agent)",
                file=out,
            )
            print(f"  load average after the roll {loadavg()}", file=out, flush=True)
            handovers = max(rolled, 1)
            lock_total = sum(v for (_verb, res), v in rates.items() if res in LOCK_RESOURCES) * roll
            per_handover = lock_total / handovers
            per_cycle = (sum(rates.values()) * roll - lock_total) / handovers
            lock_rates = {k: v * roll / handovers for k, v in rates.items() if k[1] in LOCK_RESOURCES}
            print(
                f"  per hand-over ({rolled} slots freed and taken): {per_handover:.2f} lock requests for the "
                f"whole fleet ({', '.join(f'{v} {r} {n:.2f}' for (v, r), n in sorted(lock_rates.items()))}); "
                f"{per_cycle:.1f} other requests per node's cycle",
                file=out,
                flush=True,
            )
            handover = sum(n for (v, _r), n in lock_rates.items() if v in WRITES)
            own = per_handover - handover
            print(
                f"    (a) the hand-over itself (the release, the take, the lost races' 409s: lock writes): "
                f"{handover:.2f}; (b) the holders' own cycles and the waiters' reads (the switch guard's "
                f"read of the other backend after a take, the rebooted agent's read of its lock, "
                f"{'the waiters’ passes, ' if opts.lock_backend == 'daemonset' else ''}"
                f"watches ended): {own:.2f}",
                file=out,
                flush=True,
            )
            project(
                opts,
                per_handover=per_handover,
                per_cycle=per_cycle,
                waiting_per_hour=waiting_per_hour,
                out=out,
            )

            if opts.idle_minutes > 0:
                idle_phase(cluster, fleet, opts, background, base_watches, out)
        return 0 if rolled == opts.nodes else 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
