"""The soak: 12 simulated nodes with real agents, needs at random, workloads, blockers, a window, and faults.

:func:`run` starts a control plane, one :class:`~pykured_dev.soak.proxy.FaultProxy` per agent, the
:class:`~pykured_dev.soak.observer.Observer`, and then for ``minutes`` drives the fleet from one seeded
random generator: sentinels (and, where the agent supports them, reboot requests) on nodes at rest, workload
pods under a PodDisruptionBudget the soak keeps current (as the disruption controller would), blocking pods,
administrator cordons, a maintenance window that closes and opens again, and the faults of
:mod:`pykured_dev.soak.faults` (its last ``quiet_seconds`` add no new need). Then it stops injecting,
removes every obstacle, waits for the fleet to converge and runs the end-of-run checks. The same seed
replays the same decisions (the timing of a real control plane and real processes still varies).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import json
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import TextIO

from pykured.core import errors
from pykured.kube.client import MERGE_PATCH
from pykured_dev.soak.faults import Faults
from pykured_dev.soak.observer import Observer
from pykured_dev.soak.proxy import FaultProxy
from pykured_dev.testenv import Cluster
from pykured_dev.testenv.fleet import Fleet

NAMESPACE = "soak"
WEB_LABELS = {"app": "soak-web"}
BLOCKER_LABEL = "soak/blocker"
REQUEST_ANNOTATION = "pykured.dev/reboot-request"
"""A reboot request bound to a bootID (``pykured request-reboot``)."""


@dataclasses.dataclass(frozen=True)
class Options:
    """One soak run."""

    minutes: float = 3.0
    seed: int | None = None
    backend: str = "lease"
    nodes: int = 12
    concurrency: int = 2
    period: str = "15s"
    """The agents' ``--period``: how soon an agent tries again after a failed step (a blocked drain, an API
    server that did not answer), also once the faults stop."""
    drain_timeout: str = "20s"
    fault_every: float = 6.0
    """Mean seconds between two faults."""
    need_every: float = 4.0
    """Mean seconds between two new needs (sentinels or requests)."""
    quiet_seconds: float = 30.0
    """The run's last seconds create no new need: the fleet works through its backlog under faults still,
    and the convergence after the last fault is not spent on needs created just before it."""
    converge_timeout: float = 600.0
    requests: bool = True
    """Also create reboot requests (``pykured request-reboot``'s annotation), half of the needs."""
    extra_args: tuple[str, ...] = ()
    """More agent flags (``--resume-rolls``, say)."""


@dataclasses.dataclass
class Report:
    """What a run found."""

    seed: int
    backend: str
    minutes: float
    faults: dict[str, int]
    needs: dict[str, int]
    reboots: int
    violations: list[str]
    longest_wait: float
    mean_wait: float
    converged_after: float | None
    peak_holders: int
    peak_cordoned: int
    relists: int
    events: int
    sigterm_exit_max: float
    window: str
    extra_args: tuple[str, ...] = ()
    fault_every: float = 6.0

    @property
    def ok(self) -> bool:
        return not self.violations and self.converged_after is not None

    def render(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())) or "none"
        needs = ", ".join(f"{k} {v}" for k, v in sorted(self.needs.items())) or "none"
        converged = f"{self.converged_after:.1f} s" if self.converged_after is not None else "NOT CONVERGED"
        lines = [
            f"soak report — backend {self.backend}, seed {self.seed}, {self.minutes:g} min of faults",
            f"  faults injected:        {sum(self.faults.values())} ({faults})",
            f"  needs created:          {sum(self.needs.values())} ({needs}); reboots seen: {self.reboots}",
            f"  invariant violations:   {len(self.violations)}",
            *(f"    {v}" for v in self.violations[:50]),
            f"  longest wait for reboot: {self.longest_wait:.1f} s (mean {self.mean_wait:.1f} s)",
            f"  converged after the last fault: {converged}",
            f"  peak lock holders {self.peak_holders}, peak cordoned by pykured {self.peak_cordoned}",
            f"  slowest exit after SIGTERM: {self.sigterm_exit_max:.1f} s (grace 30 s)",
            f"  window closed (UTC): {self.window}",
            f"  observed events {self.events}, watch re-lists {self.relists}",
            f"  result: {'OK' if self.ok else 'FAILED'}"
            f"  (replay: --seed {self.seed} --lock-backend {self.backend}"
            f"{f' --fault-every {self.fault_every:g}' if self.fault_every != Options.fault_every else ''}"
            f"{''.join(f' --agent-arg={a}' for a in self.extra_args)})",
        ]
        return "\n".join(lines)


def _hhmm(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime("%H:%M")


def closed_window(start: float, minutes: float) -> tuple[float, float]:
    """A minute-aligned stretch in the first half of the run (at least a minute) when the window is shut."""
    first = start + max(45.0, minutes * 60 * 0.3)
    close = (int(first) // 60 + 1) * 60
    length = max(1, int(minutes * 0.1)) * 60
    return float(close), float(close + length)


class Soak:
    """One run; see the module docstring."""

    def __init__(self, opts: Options, *, out: TextIO | None = None) -> None:
        self.opts = opts
        self.seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(1 << 32)
        self.rng = random.Random(self.seed)  # noqa: S311 - a replayable scenario, not a secret
        self.out = out
        self.workdir = Path(tempfile.mkdtemp(prefix="pykured-soak-"))
        self.cluster = Cluster()
        self.names = [f"node-{i + 1:02d}" for i in range(opts.nodes)]
        self.proxies: dict[str, FaultProxy] = {}
        self.needs: collections.Counter[str] = collections.Counter()
        self.deleted: set[str] = set()
        self.ever_deleted: set[str] = set()
        self.admin: dict[str, float] = {}
        self.last_request: dict[str, str] = {}
        self.blockers: dict[str, float] = {}
        self._ids = 0
        self._stop = threading.Event()
        self.lock = threading.RLock()

    def say(self, text: str) -> None:
        if self.out is not None:
            stamp = time.strftime("%H:%M:%S")
            print(f"[{stamp}] {text}", file=self.out, flush=True)

    def uid(self, prefix: str) -> str:
        with self.lock:
            self._ids += 1
            return f"{prefix}-{self._ids}"

    # -- set-up --------------------------------------------------------------------------------------------

    def _kubeconfig(self, node: str) -> str:
        """The admin kubeconfig with the server replaced by ``node``'s proxy."""
        proxy = FaultProxy((self.cluster.host, self.cluster.port)).start()
        self.proxies[node] = proxy
        config = json.loads(Path(self.cluster.admin_kubeconfig).read_text())
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
        path = self.workdir / f"kubeconfig-{node}.json"
        path.write_text(json.dumps(config))
        path.chmod(0o600)
        return str(path)

    def agent_args(self, window: tuple[float, float]) -> list[str]:
        opts = self.opts
        return [
            f"--concurrency={opts.concurrency}",
            f"--lock-backend={opts.backend}",
            f"--period={opts.period}",
            f"--drain-timeout={opts.drain_timeout}",
            f"--blocking-pod-selector={BLOCKER_LABEL}=true",
            # open from the end of the closed stretch round to its start (kured's overnight form)
            f"--start-time={_hhmm(window[1])}",
            f"--end-time={_hhmm(window[0])}",
            "--time-zone=UTC",
            *opts.extra_args,
        ]

    def setup(self) -> None:
        self.cluster.start()
        cluster = self.cluster
        cluster.ensure_namespace("kube-system")
        cluster.create_daemonset("kube-system", "kured")
        cluster.ensure_namespace(NAMESPACE)
        cluster.add_nodes(*self.names)
        cluster.create_pdb(NAMESPACE, "soak-web", WEB_LABELS, max_unavailable=1)
        self.refresh_web_pdb()
        for node in self.names:
            self.create_web_pod(node)

    # -- the workload --------------------------------------------------------------------------------------

    def create_web_pod(self, node: str) -> None:
        with contextlib.suppress(errors.KubeError):
            self.cluster.create_pod(NAMESPACE, self.uid(f"web-{node}"), node=node, labels=WEB_LABELS, grace=1)

    def refresh_web_pdb(self) -> None:
        """Act as the disruption controller for the web PDB: one disruption allowed at a time."""
        with contextlib.suppress(errors.KubeError):
            self.cluster.set_pdb_status(NAMESPACE, "soak-web", disruptions_allowed=1, healthy=len(self.names))

    def remove_stuck_budgets(self) -> None:
        """Delete every budget but the web one (a fault's own delete may have met a restarting API server)."""
        path = f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets"
        with contextlib.suppress(errors.KubeError):
            for pdb in self.cluster.kube().get(path).get("items", []):
                name = pdb["metadata"]["name"]
                if name != "soak-web":
                    with contextlib.suppress(errors.NotFoundError):
                        self.cluster.kube().request("DELETE", f"{path}/{name}")

    def pods_on(self, node: str) -> list[dict[str, object]]:
        items = self.cluster.kube().list_pods(field_selector=f"spec.nodeName={node}").get("items", [])
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    # -- needs ---------------------------------------------------------------------------------------------

    def add_need(self, observer: Observer, fleet: Fleet) -> None:
        candidates = [n for n in self.names if n not in self.deleted and observer.at_rest(n)]
        if not candidates:
            return
        node = self.rng.choice(candidates)
        kind = "request" if self.opts.requests and self.rng.random() < 0.5 else "sentinel"
        observer.add_need(node, kind)
        if kind == "sentinel":
            fleet.touch(node)
        else:
            try:
                self.request_reboot(node)
            except errors.KubeError:
                # Not written (the API server restarts, or the node changed) -- or written with the answer
                # lost: only the Node itself can say which.
                if not self.request_landed(node):
                    observer.drop_needs(node)
                    return
        self.needs[kind] += 1

    def request_landed(self, node: str) -> bool:
        """Whether the soak's reboot request is on ``node`` (asked again until the API server answers)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                annotations = self.cluster.kube().get_node(node)["metadata"].get("annotations") or {}
            except errors.NotFoundError:
                return False
            except errors.KubeError:
                if time.monotonic() >= deadline:
                    return True  # unknowable: keep the need; a reboot may answer it
                time.sleep(0.5)
                continue
            wanted = self.last_request.get(node)
            return wanted is not None and annotations.get(REQUEST_ANNOTATION) == wanted

    def request_reboot(self, node: str) -> None:
        """A reboot request as ``pykured request-reboot`` writes it: bound to the node's current bootID."""
        self.last_request.pop(node, None)  # until it is sent, nothing of this request can be on the Node
        state = self.cluster.kube().get_node(node)
        boot_id = state["status"]["nodeInfo"]["bootID"]
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        value = json.dumps(
            {"bootID": boot_id, "reason": "soak", "requestedAt": stamp, "requestedBy": "soak"},
            separators=(",", ":"),
            sort_keys=True,
        )
        self.last_request[node] = value
        self.cluster.kube().patch_node(
            node,
            {
                "metadata": {
                    "resourceVersion": state["metadata"]["resourceVersion"],
                    "annotations": {REQUEST_ANNOTATION: value},
                }
            },
            patch_type=MERGE_PATCH,
        )

    # -- obstacles -----------------------------------------------------------------------------------------

    def add_blocker(self) -> None:
        node = self.rng.choice(self.names)
        if node in self.deleted:
            return
        name = self.uid(f"blocker-{node}")
        # recorded first: a create that fails ambiguously (the API server restarting) may still have happened
        self.blockers[name] = time.monotonic() + self.rng.uniform(10, 40)
        with contextlib.suppress(errors.KubeError):
            self.cluster.create_pod(NAMESPACE, name, node=node, labels={BLOCKER_LABEL: "true"}, grace=1)

    def expire_blockers(self, *, everything: bool = False) -> None:
        now = time.monotonic()
        for name, until in list(self.blockers.items()):
            if everything or now >= until:
                try:
                    self.cluster.kube().delete_pod(NAMESPACE, name, grace_period_seconds=0)
                except errors.NotFoundError:
                    pass
                except errors.KubeError:
                    continue  # the API server may be restarting: delete it next time
                del self.blockers[name]

    def admin_cordon(self, observer: Observer) -> None:
        if len(self.admin) >= 2:
            return
        candidates = [
            n for n in self.names if n not in self.deleted and n not in self.admin and observer.at_rest(n)
        ]
        node = self.rng.choice(candidates) if candidates else None
        state = observer.node(node) if node else None
        if node is None or state is None or state.unschedulable:
            return
        current = self.cluster.kube().get_node(node)
        ignored = ("pykured.dev/simulated", "pykured.dev/backoff-until")
        annotations = current["metadata"].get("annotations", {})
        if current["spec"].get("unschedulable") or any(
            k.startswith("pykured.dev/") and k not in ignored for k in annotations
        ):
            return
        observer.admin_cordon(node)
        try:
            self.cluster.kube().patch_node(
                node,
                {
                    "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                    "spec": {"unschedulable": True},
                },
                patch_type=MERGE_PATCH,
            )
        except errors.KubeError:
            observer.admin_uncordon(node)
            return
        self.admin[node] = time.monotonic() + self.rng.uniform(20, 90)
        self.say(f"admin cordons {node}")

    def admin_uncordon(self, observer: Observer, *, everything: bool = False) -> None:
        now = time.monotonic()
        for node, until in list(self.admin.items()):
            if not everything and now < until:
                continue
            state = observer.node(node)
            if not everything and (state is None or state.in_cycle or node in observer.holders()):
                continue  # the administrator waits for pykured to finish with the node
            observer.admin_uncordon(node)
            with contextlib.suppress(errors.KubeError):
                self.cluster.kube().patch_node(
                    node, {"spec": {"unschedulable": False}}, patch_type=MERGE_PATCH
                )
            del self.admin[node]
            self.say(f"admin uncordons {node}")

    # -- the run -------------------------------------------------------------------------------------------

    def run(self) -> Report:
        opts = self.opts
        self.say(
            f"soak: backend {opts.backend}, seed {self.seed}, {opts.minutes:g} min, {opts.nodes} nodes, "
            f"concurrency {opts.concurrency}{''.join(' ' + a for a in opts.extra_args)}"
        )
        try:
            self.setup()
            start = time.time()
            window = closed_window(start, opts.minutes)
            observer = Observer(self.cluster.kube(), limit=opts.concurrency).start()
            observer.window_closed(*window)
            self.say(f"window closed {_hhmm(window[0])}–{_hhmm(window[1])} UTC")
            fleet = Fleet(
                self.cluster,
                workdir=self.workdir / "fleet",
                args=self.agent_args(window),
                kubeconfig=self._kubeconfig,
                down_seconds=2.0,
            )
            with fleet:
                for node in self.names:
                    fleet.add(node)
                faults = Faults(self, observer, fleet)
                self._drive(observer, fleet, faults)
                self.say("faults stop; removing obstacles and waiting for convergence")
                faults.finish()
                last_fault = faults.last_fault_end or time.monotonic()
                self.expire_blockers(everything=True)
                for name in faults.failing_pdbs():
                    with contextlib.suppress(errors.KubeError):
                        self.cluster.kube().request(
                            "DELETE", f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets/{name}"
                        )
                converged = self._converge(observer, fleet, last_fault)
                faults.close()
                reboots = {n: s.reboots for n, s in fleet.slots.items() if n not in self.ever_deleted}
                observer.final_check(reboots)
                self.admin_uncordon(observer, everything=True)
                observer.stop()
                waits = observer.waits
                return Report(
                    seed=self.seed,
                    backend=opts.backend,
                    minutes=opts.minutes,
                    faults=dict(faults.counts),
                    needs=dict(self.needs),
                    reboots=observer.reboots_seen,
                    violations=list(observer.violations),
                    longest_wait=max(waits, default=0.0),
                    mean_wait=sum(waits) / len(waits) if waits else 0.0,
                    converged_after=converged,
                    peak_holders=observer.peak_holders,
                    peak_cordoned=observer.peak_cordoned,
                    relists=observer.relists,
                    events=observer.events,
                    sigterm_exit_max=faults.sigterm_exit_max,
                    window=f"{_hhmm(window[0])}–{_hhmm(window[1])}",
                    extra_args=opts.extra_args,
                    fault_every=opts.fault_every,
                )
        finally:
            for proxy in self.proxies.values():
                proxy.close()
            self.cluster.stop()
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _drive(self, observer: Observer, fleet: Fleet, faults: Faults) -> None:
        opts = self.opts
        end = time.monotonic() + opts.minutes * 60
        faults.ends_at = end
        next_need = time.monotonic() + self.rng.expovariate(1 / opts.need_every)
        next_fault = time.monotonic() + self.rng.expovariate(1 / opts.fault_every)
        next_status = time.monotonic() + 30
        while time.monotonic() < end:
            now = time.monotonic()
            self.refresh_web_pdb()
            if now >= next_need and now < end - opts.quiet_seconds:
                self.add_need(observer, fleet)
                next_need = now + self.rng.expovariate(1 / opts.need_every)
            if now >= next_fault:
                faults.inject()
                next_fault = now + self.rng.expovariate(1 / opts.fault_every)
            try:
                self._obstacles(observer)
            except errors.KubeError as exc:  # the API server restarts now and then: try again later
                self.say(f"scenario step failed: {exc}")
            if now >= next_status:
                next_status = now + 30
                self.say(
                    f"needs pending {sum(len(v) for v in observer.pending().values())}, holders "
                    f"{sorted(observer.holders())}, cordoned {observer.pykured_cordoned()}, faults "
                    f"{sum(faults.counts.values())}, violations {len(observer.violations)}"
                )
            time.sleep(0.5)

    def _obstacles(self, observer: Observer) -> None:
        roll = self.rng.random()
        if roll < 0.03:
            self.add_blocker()
        elif roll < 0.04:
            self.admin_cordon(observer)
        elif roll < 0.10:
            node = self.rng.choice(self.names)
            if node not in self.deleted and observer.at_rest(node) and not self.pods_on(node):
                self.create_web_pod(node)
        self.expire_blockers()
        self.admin_uncordon(observer)

    def _converge(self, observer: Observer, fleet: Fleet, last_fault: float) -> float | None:
        deadline = time.monotonic() + self.opts.converge_timeout
        steady_since: float | None = None
        next_status = time.monotonic() + 30
        while time.monotonic() < deadline:
            self.refresh_web_pdb()
            self.expire_blockers(everything=True)
            self.remove_stuck_budgets()
            for node in self.names:
                fleet.replace(node, None)  # any agent that is not running gets a new pod
            if observer.converged():
                steady_since = steady_since or time.monotonic()
                if time.monotonic() - steady_since >= 3.0:
                    return steady_since - last_fault
            else:
                steady_since = None
            if time.monotonic() >= next_status:
                next_status = time.monotonic() + 30
                self.say(
                    f"converging: pending {sorted(observer.pending())}, "
                    f"holders {sorted(observer.holders())}, "
                    f"cordoned {observer.pykured_cordoned()}"
                )
            time.sleep(0.5)
        self.say(
            f"not converged: pending {observer.pending()}, holders {sorted(observer.holders())}, "
            f"cordoned {observer.pykured_cordoned()}"
        )
        for node in observer.pending():  # what the Node says and what its agent last logged
            with contextlib.suppress(errors.KubeError):
                obj = self.cluster.kube().get_node(node)
                annotations = obj["metadata"].get("annotations") or {}
                boot = obj["status"]["nodeInfo"]["bootID"]
                self.say(f"  {node}: bootID {boot}, annotations {annotations}")
            self.say(f"  {node}'s agent, last lines:\n" + "\n".join(fleet.log_text(node).splitlines()[-25:]))
        return None


def run(opts: Options, *, out: TextIO | None = None) -> Report:
    """One soak run; the report says whether every invariant held."""
    return Soak(opts, out=out).run()
