"""Real pykured agents on simulated nodes, with "reboots" that never touch this machine.

Each agent is a separate ``python -m pykured`` process (as the DaemonSet runs one per node), in safe mode,
forked from a warm interpreter (:mod:`~pykured_dev.testenv.agentfork`; ``spawn="exec"`` or
``PYKURED_TEST_AGENTS=exec`` exec each one instead), with its own sentinel directory and a shim ``nsenter``
that runs the command after ``--`` in place. The reboot methods end in a file or a fake PID 1:

* ``command``: the reboot command is ``touch <dir>/reboot-requested``;
* ``signal``: ``PYKURED_SIGNAL_PID`` points at a ``sleep`` process that stands in for the host's PID 1;
* ``zincati``: the hand-off marker file appears.

A supervisor thread sees the request and reboots the node the way a host does: the agent process dies
(SIGKILL), the sentinel (on tmpfs ``/run``) is gone, the Node goes NotReady and comes back with a new
bootID, and a fresh agent starts, told the simulated boot's time (``PYKURED_BOOT_TIME``, as the kernel's
``btime`` tells a real one).

:meth:`Fleet.add_pod` runs a DaemonSet's pod template instead, as a kubelet would: the container's own
command, arguments and environment, in a :mod:`~pykured_dev.testenv.sandbox` with the in-cluster configuration
of the template's ServiceAccount. That is how the real kured binary runs here (``ghcr.io/kubereboot/kured``
images), and pykured the same way (``ghcr.io/pykured/pykured``); :meth:`Fleet.replace_pod` is one step of a
DaemonSet rollout. A pod's simulated host keeps its directories under ``<node>/host`` (``/var/run`` is
``host/run``, emptied by each reboot).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pykured.core.times import format_rfc3339
from pykured.host.boot import BOOT_TIME_ENV
from pykured_dev.eventually import eventually
from pykured_dev.testenv import agentfork
from pykured_dev.testenv.cluster import Cluster
from pykured_dev.testenv.pods import Image, PodTemplate, sandbox_spec
from pykured_dev.testenv.procs import TestEnvError, _die_with_parent, free_port
from pykured_dev.testenv.sandbox import Sandbox


def _second(moment: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(int(moment), datetime.UTC)


SHIM = """#!/bin/sh
# A stand-in for /usr/bin/nsenter: drop nsenter's options up to "--" and run the rest in place.
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
[ "$#" -gt 0 ] && shift
exec "$@"
"""


@dataclasses.dataclass
class AgentSlot:
    """One node's agent and its files."""

    node: str
    dir: Path
    proc: subprocess.Popen[bytes] | agentfork.AgentProcess | None = None
    fake_pid1: subprocess.Popen[bytes] | None = None
    relay: subprocess.Popen[bytes] | None = None
    """With ``--reboot-signal-relay``: the pod's signal relay (``pykured signal-relay``) for ``fake_pid1``."""
    reboots: int = 0
    starts: int = 0
    log: Path | None = None
    last_reboot: float = 0.0
    pod: PodTemplate | None = None
    """For :meth:`Fleet.add_pod`: the template this node's pod runs."""
    sandbox: Sandbox | None = None
    bound_token: bool = False
    """For :meth:`Fleet.add_pod`: this pod gets the kubelet's kind of token whatever the fleet's
    ``bound_tokens`` (one scenario under admission policies on a fleet shared with others)."""
    metrics_port: int = 0
    """The agent's ``--metrics-port`` on 127.0.0.1, the same across its restarts and reboots (as a pod's
    port); 0: a port of the agent's choosing, unknown to the test (:class:`Fleet`'s ``metrics``)."""
    booted: datetime.datetime = dataclasses.field(default_factory=lambda: _second(time.time()))
    """When the simulated host last booted (its agent's ``PYKURED_BOOT_TIME``): when it was added, then when
    its reboot brought the new bootID; at a whole second, as the kernel's ``btime``."""

    @property
    def metrics_address(self) -> str:
        """``127.0.0.1:<port>`` of the agent's ``/metrics`` (with :class:`Fleet`'s ``metrics``)."""
        if not self.metrics_port:
            raise ValueError(f"{self.node}: the fleet gives its agents no known metrics port")
        return f"127.0.0.1:{self.metrics_port}"

    @property
    def host(self) -> Path:
        """The simulated host's file system (hostPath volumes of pods)."""
        return self.dir / "host"

    @property
    def sentinel(self) -> Path:
        if self.pod is not None:
            return self.host / "run" / "reboot-required"
        return self.dir / "run" / "reboot-required"

    @property
    def relay_fifo(self) -> Path:
        """The signal relay's FIFO (the pod's ``emptyDir``)."""
        return self.dir / "relay" / "reboot"

    @property
    def request(self) -> Path:
        if self.pod is not None:
            return self.dir / "sandbox" / "reboot-requested"
        return self.dir / "reboot-requested"

    @property
    def kind(self) -> str:
        """``kured`` or ``pykured``: which agent runs on the node."""
        if self.pod is not None and "kubereboot/kured" in self.pod.image:
            return "kured"
        return "pykured"

    @property
    def marker(self) -> Path:
        return self.dir / "zincati" / "allowfinalize.json"


class Fleet:
    """Agents for a set of simulated nodes of ``cluster``."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        workdir: Path,
        args: Sequence[str] = (),
        method: str = "command",
        kubeconfig: Callable[[str], str] | None = None,
        env: dict[str, str] | None = None,
        down_seconds: float = 0.3,
        on_reboot: Callable[[str], None] | None = None,
        images: dict[str, Image] | None = None,
        forward: Sequence[int] = (),
        spawn: str | None = None,
        bound_tokens: bool = False,
        metrics: bool = False,
    ) -> None:
        self.cluster = cluster
        self.metrics = metrics
        """Each agent serves ``/metrics`` on a port of its own, on 127.0.0.1, known to the test
        (:attr:`AgentSlot.metrics_port`: a Prometheus scrapes it); off: on a port the agent picks."""
        self.bound_tokens = bound_tokens
        """:meth:`add_pod`'s pods get the kubelet's kind of token: a Pod object of the DaemonSet on the node
        and a token bound to it (its user carries the node's name, which admission policies read). Off: a
        plain ServiceAccount token, and no Pod object for a drain to see."""
        self.spawn = spawn or os.environ.get("PYKURED_TEST_AGENTS") or "fork"
        """``fork``: agents forked from a warm interpreter (:mod:`~pykured_dev.testenv.agentfork`); ``exec``:
        each agent is ``python -m pykured`` exec'd from scratch (what benchmarks of an agent's own cost use).
        A command line other than ``python -m pykured ...`` (:meth:`argv` overridden) is always exec'd."""
        if self.spawn not in ("fork", "exec"):
            raise ValueError(f"spawn: fork or exec, not {self.spawn!r}")
        self.workdir = workdir
        self.args = list(args)
        self.method = method
        self._kubeconfig = kubeconfig or (lambda _node: cluster.admin_kubeconfig)
        self.env = dict(env or {})
        self.down_seconds = down_seconds
        self.on_reboot = on_reboot
        self.images = dict(images or {})
        """Container images :meth:`add_pod` can run, by repository (see :mod:`pykured_dev.testenv.pods`)."""
        self.forward = list(forward)
        """Ports of this machine's loopback that pods reach at 127.0.0.1 (a notification receiver...)."""
        self.slots: dict[str, AgentSlot] = {}
        self.paused: set[str] = set()
        """Nodes whose reboot requests are ignored (a reboot command that does not reboot)."""
        self.keep_sentinel = False
        """Leave the sentinel in place across the reboot (kured #976: a sentinel command that stays true)."""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, name="fleet-supervisor", daemon=True)
        self.shim = workdir / "nsenter-shim"
        workdir.mkdir(parents=True, exist_ok=True)
        self.shim.write_text(SHIM)
        self.shim.chmod(0o755)

    # -- agents --------------------------------------------------------------------------------------------

    def add(self, node: str, *, start: bool = True) -> AgentSlot:
        """Prepare (and start) the agent of ``node``."""
        slot = AgentSlot(node=node, dir=self.workdir / node, metrics_port=free_port() if self.metrics else 0)
        (slot.dir / "run").mkdir(parents=True, exist_ok=True)
        script = slot.dir / "reboot.sh"
        script.write_text(f"#!/bin/sh\necho requested >> {slot.dir / 'requests.log'}\ntouch {slot.request}\n")
        script.chmod(0o755)
        self.slots[node] = slot
        if start:
            self.start(node)
        return slot

    def add_pod(
        self, node: str, pod: PodTemplate, *, start: bool = True, bound_token: bool = False
    ) -> AgentSlot:
        """Prepare (and start) ``pod`` on ``node``, as a DaemonSet's pod (see the module docstring);
        ``bound_token``: with a pod-bound token even when the fleet's ``bound_tokens`` is off."""
        slot = AgentSlot(node=node, dir=self.workdir / node, pod=pod, bound_token=bound_token)
        (slot.host / "run").mkdir(parents=True, exist_ok=True)
        self.slots[node] = slot
        if start:
            self.start(node)
        return slot

    def replace_pod(self, node: str, pod: PodTemplate) -> None:
        """One step of a DaemonSet rollout: the node's pod is deleted and the new template's pod starts."""
        with self._lock:
            self.kill(node)
            self.slots[node].pod = pod
            if not self._stop.is_set():
                self.start(node)

    def _start_pod(self, slot: AgentSlot) -> None:
        assert slot.pod is not None
        cluster = self.cluster
        account = str(slot.pod.spec.get("serviceAccountName") or "default")
        spec = sandbox_spec(
            slot.pod,
            node=slot.node,
            kube=cluster.kube(),
            images=self.images,
            token=(
                self._pod_bound_token(slot.pod, slot.node, account)
                if self.bound_tokens or slot.bound_token
                else cluster.sa_token(slot.pod.namespace, account, create=False)
            ),
            ca_pem=cluster.ca_pem,
            api_host=cluster.host,
            api_port=cluster.port,
            host_root=slot.host,
            forward=self.forward,
        )
        slot.log = slot.dir / "agent.log"
        with open(slot.log, "a") as log:
            log.write(f"--- {slot.pod.image} on {slot.node}: {' '.join(spec.argv)}\n")
        slot.sandbox = Sandbox(spec, ctl=slot.dir / "sandbox", log=slot.log).start()

    def _pod_bound_token(self, pod: PodTemplate, node: str, account: str) -> str:
        """A Pod of ``pod``'s DaemonSet on ``node`` (owned by it: a drain leaves it), a token bound to it."""
        kube = self.cluster.kube()
        ds = kube.get_daemonset(pod.namespace, pod.owner)
        owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": pod.owner,
                 "uid": ds["metadata"]["uid"], "controller": True}  # fmt: skip
        created = kube.create(
            f"/api/v1/namespaces/{pod.namespace}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"generateName": f"{pod.owner}-", "ownerReferences": [owner]},
                "spec": {"nodeName": node, "serviceAccountName": account,
                         "containers": [{"name": "kured", "image": pod.image}]},
            },
        )  # fmt: skip
        ref = {"apiVersion": "v1", "kind": "Pod", "name": created["metadata"]["name"],
               "uid": created["metadata"]["uid"]}  # fmt: skip
        answer = kube.create(
            f"/api/v1/namespaces/{pod.namespace}/serviceaccounts/{account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": 3600, "boundObjectRef": ref}},
        )  # fmt: skip
        return str(answer["status"]["token"])

    def argv(self, slot: AgentSlot) -> list[str]:
        """The agent's command line, as a DaemonSet pod's would be (plus the test hooks)."""
        argv = [
            sys.executable,
            "-m",
            "pykured",
            f"--node-id={slot.node}",
            f"--kubeconfig={self._kubeconfig(slot.node)}",
            f"--reboot-sentinel={slot.sentinel}",
            *(
                ("--metrics-host=127.0.0.1", f"--metrics-port={slot.metrics_port}")
                if slot.metrics_port
                else ("--metrics-port=0",)
            ),
            *self.args,
        ]
        if self.method == "command":
            argv.append(f"--reboot-command={slot.dir / 'reboot.sh'}")
        elif self.method == "signal":
            argv.append("--reboot-method=signal")
            relay = "--reboot-signal-relay="
            argv = [f"{relay}{slot.relay_fifo}" if a.startswith(relay) else a for a in argv]
        elif self.method == "zincati":
            argv += ["--reboot-method=zincati", f"--zincati-marker-file={slot.marker}"]
        return argv

    def start(self, node: str) -> None:
        """Start ``node``'s agent process."""
        slot = self.slots[node]
        if slot.pod is not None:
            self._start_pod(slot)
            slot.starts += 1
            return
        env = {**os.environ, "PYKURED_SAFE_MODE": "1", "PYKURED_NSENTER": str(self.shim),
               BOOT_TIME_ENV: format_rfc3339(slot.booted), **self.env}  # fmt: skip
        if self.method == "signal":
            slot.fake_pid1 = subprocess.Popen(
                ["sleep", "100000"],
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - exec follows at once
            )
            env["PYKURED_SIGNAL_PID"] = str(slot.fake_pid1.pid)
            if any(a.startswith("--reboot-signal-relay=") for a in self.args):
                self._start_relay(slot, env)
        slot.log = slot.dir / "agent.log"
        argv = self.argv(slot)
        if self.spawn == "fork" and argv[:3] == [sys.executable, "-m", "pykured"]:
            slot.proc = agentfork.spawn(argv[3:], env=env, log=str(slot.log))
            slot.starts += 1
            return
        with open(slot.log, "ab") as log:
            slot.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - exec follows at once
            )
        slot.starts += 1

    def _start_relay(self, slot: AgentSlot, env: dict[str, str]) -> None:
        """The pod's second container: ``pykured signal-relay`` on the slot's FIFO, for its fake PID 1."""
        if slot.relay is not None and slot.relay.poll() is None:
            slot.relay.kill()
            slot.relay.wait(timeout=10)
        slot.relay_fifo.parent.mkdir(parents=True, exist_ok=True)
        slot.relay_fifo.unlink(missing_ok=True)
        with open(slot.dir / "relay.log", "ab") as log:
            slot.relay = subprocess.Popen(
                [sys.executable, "-m", "pykured", "signal-relay", f"--relay={slot.relay_fifo}"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - exec follows at once
            )
        if not eventually(slot.relay_fifo.exists, timeout=60):  # before the agent may ask
            raise TestEnvError(f"{slot.node}: the signal relay did not start (see {slot.dir / 'relay.log'})")

    def kill(self, node: str) -> None:
        """SIGKILL ``node``'s agent (a crash, or the host going down)."""
        slot = self.slots[node]
        if slot.relay is not None and slot.relay.poll() is None:
            slot.relay.kill()
            slot.relay.wait(timeout=10)
        if slot.sandbox is not None:
            slot.sandbox.kill()
        if slot.proc and slot.proc.poll() is None:
            slot.proc.kill()
        if slot.proc:
            slot.proc.wait(timeout=10)

    def pause(self, node: str) -> None:
        """Stop simulating ``node``'s host: no reboot of it starts after this returns, and one in progress
        (its new bootID being posted, perhaps through an API server restart) has finished first, so a Node
        deleted and created again under the same name never gets the old host's late reboot."""
        with self._lock:
            self.paused.add(node)
            self.kill(node)

    def restart(self, node: str) -> None:
        """A pod restart: kill and start again (the node does not reboot). Serialised with a simulated reboot
        of the same host, so the two never both start an agent."""
        with self._lock:
            self.kill(node)
            self.start(node)

    def signal(self, node: str, signum: int) -> subprocess.Popen[bytes] | agentfork.AgentProcess | None:
        """Send ``signum`` to ``node``'s running agent (not while its host reboots); returns that process."""
        with self._lock:
            proc = self.slots[node].proc
            if proc is None or proc.poll() is not None:
                return None
            proc.send_signal(signum)
            return proc

    def replace(self, node: str, old: subprocess.Popen[bytes] | agentfork.AgentProcess | None) -> bool:
        """Start a new agent for ``node`` unless one other than ``old`` already runs (a pod recreated)."""
        with self._lock:
            slot = self.slots[node]
            if slot.proc is not None and slot.proc is not old and slot.proc.poll() is None:
                return False
            self.kill(node)
            self.start(node)
            return True

    def touch(self, node: str) -> None:
        """Create ``node``'s reboot sentinel."""
        self.slots[node].sentinel.touch()

    def requests(self, node: str) -> int:
        """How many times ``node``'s agents ran the reboot command."""
        slot = self.slots[node]
        log = slot.dir / "sandbox" / "nsenter.log" if slot.pod is not None else slot.dir / "requests.log"
        return len(log.read_text().splitlines()) if log.exists() else 0

    def probe(self, node: str, port: int, path: str = "/metrics") -> bool:
        """A kubelet's httpGet probe of ``node``'s pod: whether ``GET path`` on ``port`` answers 2xx/3xx."""
        sandbox = self.slots[node].sandbox
        if sandbox is None or not sandbox.alive():
            return False
        try:
            status, _ = sandbox.http_get(port, path, timeout=2.0)
        except OSError:
            return False
        return 200 <= status < 400

    def log_text(self, node: str) -> str:
        """Everything ``node``'s agents logged so far."""
        log = self.slots[node].log
        return log.read_text(errors="replace") if log and log.exists() else ""

    # -- the supervisor ------------------------------------------------------------------------------------

    def __enter__(self) -> Fleet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the supervisor and every agent."""
        self._stop.set()
        if self._thread.ident is not None:  # a reboot in progress finishes first: no agent starts after this
            self._thread.join(timeout=60)
        with self._lock:
            for node in list(self.slots):
                self.kill(node)
                fake = self.slots[node].fake_pid1
                if fake and fake.poll() is None:
                    fake.kill()
                    fake.wait()

    def remove(self, node: str) -> list[str]:
        """Stop ``node``'s agent for good (after any reboot in progress); returns its nsenter calls."""
        with self._lock:
            self.kill(node)
            calls = self.nsenter_calls(node)
            del self.slots[node]
        return calls

    def nsenter_calls(self, node: str) -> list[str]:
        """A pod's calls of nsenter (its arguments, space-separated), in order."""
        log = self.slots[node].dir / "sandbox" / "nsenter.log"
        return log.read_text().splitlines() if log.exists() else []

    def _requested(self, slot: AgentSlot) -> bool:
        if self.method == "command" or slot.pod is not None:
            return slot.request.exists()
        if self.method == "signal":
            return slot.fake_pid1 is not None and slot.fake_pid1.poll() is not None
        try:
            return slot.marker.stat().st_mtime > slot.last_reboot
        except FileNotFoundError:
            return False

    def _supervise(self) -> None:
        while not self._stop.wait(0.05):
            for slot in list(self.slots.values()):
                with contextlib.suppress(Exception):
                    if slot.node not in self.paused and self._requested(slot):
                        self.reboot(slot.node)

    def reboot(self, node: str) -> None:
        """Reboot a simulated host: agent dies, sentinel vanishes, bootID changes, a new agent starts."""
        slot = self.slots[node]
        with self._lock:
            if node in self.paused:  # paused while this reboot waited for the lock
                return
            self.kill(node)
            slot.last_reboot = time.time()
            for path in (slot.request, *(() if self.keep_sentinel else (slot.sentinel,))):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            if slot.pod is not None and not self.keep_sentinel:
                for leftover in (slot.host / "run").iterdir():  # /run is a tmpfs: a reboot empties it
                    if leftover.is_dir():
                        shutil.rmtree(leftover, ignore_errors=True)
                    else:
                        leftover.unlink(missing_ok=True)
            self.cluster.reboot_node(node, down_seconds=self.down_seconds)
            slot.booted = _second(time.time())
            slot.reboots += 1
            if self.on_reboot:
                self.on_reboot(node)
            if not self._stop.is_set():
                self.start(node)

    def wait_for(self, predicate: Callable[[], bool], *, timeout: float, interval: float = 0.1) -> bool:
        """Poll ``predicate`` until true or ``timeout``."""
        return eventually(predicate, timeout=timeout, every=interval)
