"""Real nodes: a real kubelet and containerd per node, each node in namespaces of its own.

``RealNodes(cluster, count).start()`` makes N nodes on this machine against the test control plane (with
kube-scheduler and kube-controller-manager, which it starts). Each node has:

* its own **network namespace** (``noderelay``): a node address, the ``kubernetes`` Service's address
  10.0.0.1:443 relayed to the API server, and a bridge CNI for its pods;
* its own **directories**: ``/var/lib`` (containerd's root, the kubelet's root; kept across reboots),
  ``/var/log``, and a fresh, empty ``/run`` per boot, bind-mounted in the node's mount namespace only;
* its own **cgroup root** (``/pykured-realnode-<id>/<node>`` in every hierarchy) for the kubelet's pods;
* its own **boot**: containerd and the kubelet run under a PID 1 of their own (``unshare --pid --fork
  --mount --mount-proc``), with a boot id bind-mounted over ``/proc/sys/kernel/random/boot_id`` and a time
  namespace whose boot-time clock starts with the boot (``/proc/stat``'s ``btime`` is the node's boot). A
  hostPID pod's ``/proc/1`` is that PID 1: ``nsenter -m/proc/1/ns/mnt -- /bin/systemctl reboot`` enters the
  node's mount namespace, where ``/usr/bin/systemctl`` is the node's own script: it ends PID 1, the kernel
  ends every process of the node, containers included. The helper then boots the node again with a new boot
  id and an empty ``/run`` (unless told to keep it down: a node that never comes back).

The kernel tunables the kubelet sets (``kernel.panic``, ``vm.overcommit_memory``, …) are private files
bind-mounted in the node's mount namespace: this machine's settings, network and PID 1 are never touched.
Every process is ended by :meth:`RealNodes.stop`, and dies with the test run anyway (``PR_SET_PDEATHSIG``,
``unshare --kill-child``).

:func:`missing` lists what the machine lacks for real nodes (one line each); :func:`require` raises one
:class:`RealNodeError` line naming all of it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pykured.core import errors
from pykured_dev.testenv import images
from pykured_dev.testenv.noderelay import REGISTRY_IP, SERVICE_IP, SERVICE_PORT, node_ip
from pykured_dev.testenv.procs import Proc, TestEnvError, find_binaries, free_port

if TYPE_CHECKING:
    from pykured_dev.testenv.cluster import Cluster

CGROUP = Path("/sys/fs/cgroup")
CGROUP_V1 = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids")
SYSCTLS = (
    "kernel/panic",
    "kernel/panic_on_oops",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
"""The kernel tunables the kubelet writes: private copies per node."""
CONTROLLERS = (
    "daemonset-controller,deployment-controller,replicaset-controller,disruption-controller,"
    "garbage-collector-controller,namespace-controller,serviceaccount-controller,"
    "root-ca-certificate-publisher-controller,node-lifecycle-controller"
)
"""What real nodes need of kube-controller-manager: DaemonSets, Deployments, PodDisruptionBudget status,
ServiceAccounts and their CA, and a node that stops reporting marked ``Unknown`` (as users see it)."""
COMMANDS = {
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "mount": "mount",
    "ip": "iproute2",
}
CNI_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
BOOT_TIMEOUT = 180.0


class RealNodeError(TestEnvError):
    """Real nodes cannot run on this machine, or one did not come up."""


def _cgroup_version() -> int:
    return 2 if (CGROUP / "cgroup.controllers").exists() else 1


def missing() -> list[str]:
    """What this machine lacks for real nodes, one short phrase each (empty: nothing)."""
    out: list[str] = []
    if os.geteuid() != 0:
        out.append("root (namespaces, mounts and cgroups need it)")
    for cmd, package in COMMANDS.items():
        if shutil.which(cmd) is None:
            out.append(f"{cmd} (Debian package {package})")
    for plugin in CNI_PLUGINS:
        if not (CNI_DIR / plugin).exists():
            out.append(f"CNI plugin {CNI_DIR / plugin} (Debian package containernetworking-plugins)")
    busybox = Path(images.BUSYBOX)
    if not busybox.exists():
        out.append(f"{busybox} (Debian package busybox-static)")
    elif b"ld-linux" in busybox.read_bytes()[:8192]:
        out.append(f"a static {busybox} (Debian package busybox-static)")
    if _cgroup_version() == 1:
        mounted = _v1_hierarchies()
        out += [f"cgroup v1 hierarchy {h} (/sys/fs/cgroup/{h})" for h in CGROUP_V1 if h not in mounted]
    return out


INOTIFY_PER_NODE = 6
"""inotify instances a node takes (the kubelet's cAdvisor and config watches, containerd's CNI watch, ...)."""


INOTIFY_WAIT = 600.0
"""How long a fleet of real nodes waits for free inotify instances before it fails. The limit is per user and
the machine's: other test runs' agents hold one each (their file watch) and other real-node fleets six a
node, and what frees them is those tests ending, each within its own timeout (at most 600 s outside this
tier). The real-node tests' timeouts include this wait."""


def inotify_in_use() -> int:
    """inotify instances open on this machine (every user's; the limit is per user, and tests run as root)."""
    count = 0
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        with contextlib.suppress(OSError):
            for fd in os.scandir(fd_dir):
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) == "anon_inode:inotify":
                        count += 1
    return count


def short_of(nodes: int) -> str:
    """What the machine is short of right now for ``nodes`` nodes (shared limits), or ``""``."""
    try:
        limit = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    except (OSError, ValueError):
        return ""
    used = inotify_in_use()
    if limit - used < INOTIFY_PER_NODE * nodes:
        return (
            f"free inotify instances: {limit - used} of fs.inotify.max_user_instances={limit} "
            f"({used} held by other processes), {INOTIFY_PER_NODE * nodes} needed for {nodes} nodes"
        )
    return ""


def require(nodes: int = 0) -> None:
    """Raise one :class:`RealNodeError` line naming everything missing for real nodes."""
    lacking = missing()
    if nodes and (short := short_of(nodes)):
        lacking.append(short)
    if lacking:
        raise RealNodeError("real nodes cannot run here; missing: " + "; ".join(lacking))


def _v1_hierarchies() -> dict[str, Path]:
    """cgroup v1 controller (or ``name=``) → its mount point."""
    found: dict[str, Path] = {}
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            fields = right.split()
            if len(fields) < 3 or fields[0] != "cgroup":
                continue
            mount_point = Path(left.split()[4])
            for opt in fields[2].split(","):
                if opt in CGROUP_V1 or opt.startswith("name="):
                    found[opt] = mount_point
    return found


# -- the node's scripts ------------------------------------------------------------------------------------

BOOT_SCRIPT = r"""#!/bin/sh
# PID 1 of a real node: private mounts, then containerd and the kubelet. SIGTERM (the node's own
# systemctl reboot) ends PID 1, and with it every process of the node; so does SIGRTMIN+5 (39), which
# systemd takes as "reboot" (--reboot-method=signal).
trap 'exit 0' TERM INT
trap 'echo "$(date +%s) signal" >> /var/log/reboots.log; exit 0' 39
N=@NODE@
set -e
mount --bind "$N/boot_id" /proc/sys/kernel/random/boot_id
for f in @SYSCTLS@; do
  mount --bind "$N/sysctl/$(echo "$f" | tr / .)" "/proc/sys/$f"
done
mount --bind "$N/run-$BOOT" /run
mount --bind "$N/var-lib" /var/lib
mount --bind "$N/log" /var/log
mount --bind "$N/bin" /usr/local/bin
if [ -e /usr/bin/systemctl ]; then  # kured's reboot command, /bin/systemctl reboot, is the node's own
  mount --bind "$N/bin/systemctl" /usr/bin/systemctl
else
  mount -t overlay overlay -o "lowerdir=$N/usr-bin:/usr/bin" /usr/bin
fi
set +e
echo "$BOOT" > /run/pykured-realnode
# containerd and the kubelet are restarted when they end, as their systemd units do (Restart=always): a
# limit shared with the machine (inotify instances) may be short for a moment
(
  while :; do
    containerd --config "$N/etc/containerd.toml" >> /var/log/containerd.log 2>&1 &
    echo $! > /run/containerd.pid
    wait $!
    sleep 1
  done
) &
while [ ! -S /run/containerd/containerd.sock ]; do sleep 0.1; done
for img in "$N"/images/*.tar; do
  [ -e "$img" ] || continue
  stamp="/var/lib/pykured-images/$(basename "$img")"
  [ -e "$stamp" ] && continue
  ctr -a /run/containerd/containerd.sock -n k8s.io images import "$img" >> /var/log/images.log 2>&1 \
    && mkdir -p /var/lib/pykured-images && touch "$stamp"
done
(
  while :; do
    @KUBELET@ --config="$N/etc/kubelet.json" --kubeconfig="$N/etc/kubeconfig.json" \
      --hostname-override=@NAME@ --node-ip=@IP@ --v=1 >> /var/log/kubelet.log 2>&1
    echo "kubelet exited ($?); restarting" >> /var/log/kubelet.log
    # containerd without its CRI plugin (it failed to load) is no runtime: restart it too
    ctr -a /run/containerd/containerd.sock plugins ls 2>/dev/null |
      grep -q 'io.containerd.grpc.v1 *cri .*ok' || kill "$(cat /run/containerd.pid)"
    sleep 2
  done
) &
/usr/local/bin/zincati-stub >> /var/log/zincati.log 2>&1 &
echo up > /run/pykured-booted
while :; do wait; done
"""

SYSTEMCTL = r"""#!/bin/sh
# The node's systemctl: "reboot" ends the node's PID 1 (only inside a real node's mount namespace).
[ -e /run/pykured-realnode ] || { echo "systemctl: not inside a pykured real node" >&2; exit 1; }
case "$1" in
  reboot) echo "$(date +%s) reboot" >> /var/log/reboots.log; kill -TERM 1 ;;
  *) echo "systemctl: only reboot is supported on a real test node" >&2; exit 1 ;;
esac
"""

RPM_OSTREE = r"""#!/bin/sh
# The node's rpm-ostree: "status --pending-exit-77" exits 77 while an update is staged.
[ -e /var/lib/pykured-staged-update ] && exit 77
exit 0
"""

ZINCATI_STUB = r"""#!/bin/sh
# The node's Zincati (marker_file strategy): with an update staged and allowfinalize.json allowing it,
# finalize (the staged update becomes the booted one) and reboot.
M=/var/lib/zincati/admin/strategy/marker_file/allowfinalize.json
while :; do
  if [ -e /var/lib/pykured-staged-update ] && [ -e "$M" ]; then
    until=$(sed -n 's/.*"allowUntil":\([0-9]*\).*/\1/p' "$M")
    if [ -n "$until" ] && [ "$until" -gt "$(date +%s)" ]; then
      mv /var/lib/pykured-staged-update /var/lib/pykured-finalized-update
      echo "$(date +%s) finalize" >> /var/log/reboots.log
      kill -TERM 1
    fi
  fi
  sleep 1
done
"""


class Node:
    """One real node: its directories, network namespace and boots."""

    def __init__(self, fleet: RealNodes, index: int, name: str) -> None:
        self.fleet = fleet
        self.index = index
        self.name = name
        self.ip = node_ip(index)
        self.dir = fleet.workdir / name
        self.boots: list[str] = []
        """The boot id of every boot, in order."""
        self.stay_down = False
        """When set, the node is not booted again after its PID 1 ends (a node that never comes back)."""
        self.relay: Proc | None = None
        self.netns = ""
        self.proc: Proc | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._watching = False
        self.failed = False
        """The node's boot script ended before it started the kubelet (see its boot log)."""
        self.powered_off = threading.Event()

    # paths
    @property
    def run_dir(self) -> Path:
        """The current boot's ``/run`` (``/var/run`` too) as seen from this machine."""
        return self.dir / f"run-{len(self.boots)}"

    @property
    def var_lib(self) -> Path:
        return self.dir / "var-lib"

    @property
    def log_dir(self) -> Path:
        return self.dir / "log"

    @property
    def reboots(self) -> int:
        """How many times the node ended its own PID 1 (``systemctl reboot``, Zincati, the reboot signal)."""
        path = self.log_dir / "reboots.log"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def tail(self, lines: int = 15) -> str:
        out = []
        for name in ("kubelet.log", "containerd.log", "images.log"):
            path = self.log_dir / name
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {self.name} {name} ---\n" + "\n".join(text))
        if self.proc:
            out.append(f"--- {self.name} boot ---\n{self.proc.tail(lines)}")
        return "\n".join(out)

    def prepare(self, bindir: Path, image_archives: Sequence[Path]) -> None:
        d = self.dir
        for sub in ("var-lib", "log", "bin", "etc/cni", "sysctl", "images"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        for archive in image_archives:
            link = d / "images" / archive.name
            if not link.exists():
                link.symlink_to(archive)
        for f in SYSCTLS:
            (d / "sysctl" / f.replace("/", ".")).write_text(Path("/proc/sys", f).read_text())
        for name, text in (
            ("systemctl", SYSTEMCTL),
            ("rpm-ostree", RPM_OSTREE),
            ("zincati-stub", ZINCATI_STUB),
        ):
            (d / "bin" / name).write_text(text)
            (d / "bin" / name).chmod(0o755)
        (d / "usr-bin").mkdir(exist_ok=True)
        shutil.copy(d / "bin" / "systemctl", d / "usr-bin" / "systemctl")
        script = (
            BOOT_SCRIPT.replace("@NODE@", str(d))
            .replace("@SYSCTLS@", " ".join(SYSCTLS))
            .replace("@KUBELET@", str(bindir / "kubelet"))
            .replace("@NAME@", self.name)
            .replace("@IP@", self.ip)
        )
        (d / "boot.sh").write_text(script)
        (d / "etc" / "containerd.toml").write_text(_containerd_config(d))
        (d / "etc" / "cni" / "10-pods.conflist").write_text(json.dumps(_cni_config(self.index)))
        (d / "etc" / "kubelet.json").write_text(json.dumps(_kubelet_config(self.fleet.cgroup_path(self))))
        (d / "etc" / "kubeconfig.json").write_text(json.dumps(self.fleet.node_kubeconfig(self.name)))

    def start_network(self, api_port: int) -> None:
        ready = self.dir / "netns.ready"
        ready.unlink(missing_ok=True)
        self.relay = Proc(
            f"{self.name}-net",
            [
                sys.executable,
                "-m",
                "pykured_dev.testenv.noderelay",
                f"--index={self.index}",
                f"--target-port={api_port}",
                f"--ready={ready}",
                f"--registry-port-file={self.fleet.registry_port_file}",
            ],
            log_dir=self.dir,
        )
        _wait(lambda: ready.exists() or not self.relay_alive(), 30, f"{self.name}: network namespace")
        if not ready.exists():
            raise RealNodeError(f"{self.name}: network namespace failed: {self.relay.tail(5)}")
        pid, fd = ready.read_text().split()
        self.netns = f"/proc/{pid}/fd/{fd}"

    def relay_alive(self) -> bool:
        return self.relay is not None and self.relay.alive()

    def boot(self) -> None:
        """Power on and keep the node running: a new boot each time its PID 1 ends (see :meth:`_watch`)."""
        with self._lock:
            if self._stopping or self._watching:
                return
            self.stay_down = False
            self._boot_locked()
            self._watching = True
        threading.Thread(target=self._watch, daemon=True, name=f"{self.name}-power").start()

    def _boot_locked(self) -> None:
        """A new boot id, an empty ``/run``, a new PID 1."""
        boot_id = str(uuid.uuid4())
        self.boots.append(boot_id)
        (self.dir / "boot_id").write_text(boot_id + "\n")
        old = self.dir / f"run-{len(self.boots) - 1}"
        if old.exists() and not _mounted_under(old):
            shutil.rmtree(old, ignore_errors=True)
        self.run_dir.mkdir()
        self.powered_off.clear()
        self.proc = Proc(
            f"{self.name}-boot-{len(self.boots)}",
            [
                "nsenter",
                f"--net={self.netns}",
                "--",
                "unshare",
                "--pid",
                "--fork",
                "--kill-child=SIGKILL",
                "--mount",
                "--mount-proc",
                "--propagation=slave",
                # a boot-time clock that starts with this boot: the kernel's btime in /proc/stat, which every
                # process of the node and its containers read, is the node's boot
                "--time",
                f"--boottime=-{int(time.clock_gettime(time.CLOCK_BOOTTIME))}",
                "--",
                "/bin/sh",
                str(self.dir / "boot.sh"),
            ],
            log_dir=self.dir,
            env={**_clean_env(), "BOOT": str(len(self.boots))},
        )

    def pid1(self) -> int:
        """The node's PID 1 as this machine sees it (``unshare``'s child), while the node is up."""
        proc = self.proc
        if proc is None or not proc.alive():
            raise RealNodeError(f"{self.name} is down")
        pid = proc.popen.pid  # nsenter, which became unshare
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if not children:
            raise RealNodeError(f"{self.name}: no PID 1 yet")
        return int(children[0])

    def start_daemon(self, name: str, argv: Sequence[str]) -> Proc:
        """Start ``argv`` as a host daemon of the node's current boot, as its init starts a unit: in the
        node's PID, mount, network and time namespaces (its ``/run``, ``/var/lib``, address and boot). It ends
        with the boot (the kernel ends every process of the node's PID namespace); its log is ``NAME.log`` in
        the node's directory."""
        return Proc(
            name,
            ["nsenter", f"--target={self.pid1()}", "--pid", "--mount", "--net", "--time", "--", *argv],
            log_dir=self.dir,
            env=_clean_env(),
        )

    def _watch(self) -> None:
        """Boot the node again each time its PID 1 ends, until stopped or told to stay down."""
        while True:
            proc = self.proc
            assert proc is not None
            proc.popen.wait()
            proc.stop(timeout=1)  # already ended: reaps it and closes its log
            with self._lock:
                self.powered_off.set()
                if not (self.run_dir / "pykured-booted").exists():  # the boot itself failed: no boot loop
                    self.failed = True
                if self._stopping or self.stay_down or self.failed:
                    self._watching = False
                    return
                self._boot_locked()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.popen.pid, signal.SIGKILL)
            self.proc.stop(timeout=5)
        if self.relay is not None:
            self.relay.stop(timeout=5)


def _clean_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "TZ")
    return {k: v for k, v in os.environ.items() if k in keep}


def _mounted_under(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        return any(line.split()[4].startswith(target) for line in handle)


def _wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RealNodeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def _containerd_config(d: Path) -> str:
    return f"""version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "/run/containerd/containerd.sock"
[debug]
  level = "warn"
[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{images.PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_DIR}"
    conf_dir = "{d / "etc" / "cni"}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{d / "etc" / "certs.d"}"
"""


def _cni_config(index: int) -> dict[str, Any]:
    return {
        "cniVersion": "0.4.0",
        "name": "pods",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": f"10.244.{index}.0/24"}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": "/run/cni-ipam",
                },
            }
        ],
    }


def _kubelet_config(cgroup_root: str) -> dict[str, Any]:
    one_percent = "1%"
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "failSwapOn": False,
        "protectKernelDefaults": False,
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": one_percent,
            "nodefs.inodesFree": one_percent,
            "imagefs.available": one_percent,
            "imagefs.inodesFree": one_percent,
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
        "serializeImagePulls": False,
        "shutdownGracePeriod": "0s",
        "maxPods": 30,
        "containerLogMaxSize": "1Mi",
        "resolvConf": "/etc/resolv.conf",
    }


class RealNodes:
    """N real nodes against ``cluster``; also starts kube-scheduler and kube-controller-manager."""

    def __init__(self, cluster: Cluster, count: int = 3, *, prefix: str = "node") -> None:
        self.cluster = cluster
        self.count = count
        self.id = uuid.uuid4().hex[:6]
        # on disk, not beside etcd on /dev/shm: containerd's images and snapshots take a few hundred MB a node
        self.workdir = Path(tempfile.mkdtemp(prefix="pykured-realnodes-", dir="/var/tmp"))
        self.nodes = [Node(self, i, f"{prefix}-{i}") for i in range(count)]
        self.cgroup_base = f"/pykured-realnode-{self.id}"
        self.archives: list[Path] = []
        self.pykured_image = ""
        self.registry_port_file = self.workdir / "registry.port"
        """Holds the port of the registry the nodes reach at ``REGISTRY_IP``:443 (:meth:`use_registry`)."""

    def __getitem__(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def cgroup_path(self, node: Node) -> str:
        return f"{self.cgroup_base}/{node.name}"

    def node_kubeconfig(self, name: str) -> dict[str, Any]:
        import base64

        pair = self.cluster.client_ca.issue(f"system:node:{name}", orgs=("system:nodes",))

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "node",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {
                        "server": f"https://{SERVICE_IP}:{SERVICE_PORT}",
                        "certificate-authority-data": b64(self.cluster.ca_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": "node",
                    "user": {
                        "client-certificate-data": b64(pair.cert_pem),
                        "client-key-data": b64(pair.key_pem),
                    },
                }
            ],
            "contexts": [{"name": "node", "context": {"cluster": "test", "user": "node"}}],
        }

    def use_registry(self, *, port: int, ca_pem: bytes) -> str:
        """Nodes pull from the registry on the machine's 127.0.0.1:``port`` at ``REGISTRY_IP``; its host.

        Each node's containerd gets a registry host configuration for ``REGISTRY_IP``
        (``etc/certs.d/<host>/hosts.toml``, read at every pull: https://github.com/containerd/containerd/
        blob/main/docs/hosts.md) trusting ``ca_pem``; the registry's certificate must carry ``REGISTRY_IP``.
        """
        for node in self.nodes:
            certs = node.dir / "etc" / "certs.d" / REGISTRY_IP
            certs.mkdir(parents=True, exist_ok=True)
            (certs / "ca.crt").write_bytes(ca_pem)
            (certs / "hosts.toml").write_text(
                f'server = "https://{REGISTRY_IP}"\n\n'
                f'[host."https://{REGISTRY_IP}"]\n'
                '  capabilities = ["pull", "resolve"]\n'
                f'  ca = "{certs / "ca.crt"}"\n'
            )
        tmp = self.registry_port_file.with_suffix(".tmp")
        tmp.write_text(f"{port}\n")
        os.replace(tmp, self.registry_port_file)
        return REGISTRY_IP

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self, *, extra_images: Sequence[Path] = (), with_pykured: bool = True) -> RealNodes:
        """Check the machine, start the scheduler and controllers, prepare and boot every node."""
        require()
        deadline = time.monotonic() + INOTIFY_WAIT  # a shared machine: other test runs may free some
        while short_of(self.count) and time.monotonic() < deadline:
            time.sleep(2)
        require(self.count)
        bindir = find_binaries(("kubelet", "kube-scheduler", "kube-controller-manager"))
        self.archives = [*images.busybox_images(), *extra_images]
        if with_pykured:
            self.pykured_image, archive = images.pykured_image(own_id=True)
            self.archives.append(archive)
        self._rbac()
        # a node that stops reporting is Unknown after 30 s (default 50 s; the kubelets report every 5 s)
        self.cluster.start_kcm(CONTROLLERS, extra_args=("--node-monitor-grace-period=30s",))
        self._start_scheduler(bindir)
        try:
            self._make_cgroups()
            for node in self.nodes:
                node.prepare(bindir, self.archives)
                node.start_network(self.cluster.port)
                node.boot()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _rbac(self) -> None:
        # The kubelets' identity: group system:nodes bound to the system:node role (no Node authorizer here).
        self.cluster.ensure(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "pykured-realnode-kubelets"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:node",
                },
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
                ],
            },
        )

    def _start_scheduler(self, bindir: Path) -> None:
        if "kube-scheduler" in self.cluster.procs:
            return
        self.cluster.procs["kube-scheduler"] = Proc(
            "kube-scheduler",
            [
                str(bindir / "kube-scheduler"),
                f"--kubeconfig={self.cluster.admin_kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
            ],
            log_dir=self.cluster.workdir,
        )

    def _make_cgroups(self) -> None:
        if _cgroup_version() == 2:
            for node in self.nodes:
                (CGROUP / self.cgroup_path(node).lstrip("/")).mkdir(parents=True, exist_ok=True)
            return
        for mount_point in set(_v1_hierarchies().values()):
            for node in self.nodes:
                parts = self.cgroup_path(node).strip("/").split("/")
                current = mount_point
                for part in parts:
                    parent, current = current, current / part
                    current.mkdir(exist_ok=True)
                    for knob in ("cpuset.cpus", "cpuset.mems"):
                        if (current / knob).exists() and not (current / knob).read_text().strip():
                            (current / knob).write_text((parent / knob).read_text())

    def _remove_cgroups(self) -> None:
        roots = (
            [CGROUP / self.cgroup_base.lstrip("/")]
            if _cgroup_version() == 2
            # v1, and the hybrid layout's cgroup2 mount, where the kubelet's cgroupfs driver makes them too
            else [m / self.cgroup_base.lstrip("/") for m in {*_v1_hierarchies().values(), CGROUP / "unified"}]
        )
        for root in roots:
            if not root.exists():
                continue
            dirs = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            for path in [*dirs, root]:
                deadline = time.monotonic() + 10
                while path.exists():
                    try:
                        path.rmdir()
                    except OSError:
                        if time.monotonic() > deadline:
                            break
                        time.sleep(0.1)

    def stop(self) -> None:
        """End every node (PID 1 first, then its network), remove cgroups and directories."""
        for node in self.nodes:
            node.stop()
        self._remove_cgroups()
        if self.workdir.exists() and not _mounted_under(self.workdir):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> RealNodes:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- observations --------------------------------------------------------------------------------------

    def node_obj(self, name: str) -> dict[str, Any]:
        return dict(self.cluster.kube().get(f"/api/v1/nodes/{name}"))

    def is_ready(self, name: str, *, boot: str | None = None) -> bool:
        try:
            node = self.node_obj(name)
        except errors.KubeError:
            return False
        status = node.get("status", {})
        if boot is not None and status.get("nodeInfo", {}).get("bootID") != boot:
            return False
        return any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", [])
        )

    def wait_ready(self, names: Sequence[str] | None = None, timeout: float = BOOT_TIMEOUT) -> None:
        """Wait until the nodes are Ready on their current boot."""
        todo = [self[n] for n in names] if names else list(self.nodes)
        deadline = time.monotonic() + timeout
        while True:
            pending = [n for n in todo if not (n.boots and self.is_ready(n.name, boot=n.boots[-1]))]
            if not pending:
                return
            failed = [n.name for n in pending if n.failed]
            if failed or time.monotonic() > deadline:
                tails = "\n".join(n.tail() for n in pending)
                if failed:
                    raise RealNodeError(f"nodes failed to boot: {', '.join(failed)}\n{tails}")
                raise RealNodeError(
                    f"nodes not Ready after {timeout:.0f} s: {', '.join(n.name for n in pending)}\n{tails}"
                )
            time.sleep(0.5)

    def diagnostics(self) -> str:
        """The end of every node's logs (for assertion messages)."""
        return "\n".join(n.tail() for n in self.nodes)
