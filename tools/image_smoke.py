"""tools/image-build smoke: the built image run the way kured's chart runs it, on every platform of its index.

The build platform's image runs natively (read-only root, no network, no tmpfs) and is checked for: kured's
``--help``, ``--dump-config`` keeping the chart's default arguments and kured's defaults, time zones (an
unknown one refused), the agent alone (no development kit), nsenter, bytecode for every module, CA
certificates and compiled extensions of its platform, its user (root for the DaemonSet; the central FleetLock
Deployment's uid runs it too), nothing of a distribution it does not need (shell, apt, dpkg, coreutils,
pip, aiohttp), the Kubernetes client's kubeconfig and in-cluster loaders, and that nothing is written at
run time (``podman diff``).

Every other platform's image gets the same checks under explicit user-mode emulation: qemu-user-static's
emulator, unpacked from Debian's package with dpkg-deb under the cache and named on each run as the
container's entry point, with the program it runs as its argument. Nothing is registered in binfmt_misc:
that is machine-wide (it would make every foreign binary on this machine run emulated), so the package is
never installed (its maintainer scripts register its handlers), no path below binfmt_misc is ever used
(:func:`refuse_binfmt_path`), and the emulated smoke test fails if binfmt_misc's entries change during it
(:func:`binfmt_guard`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from image_build import ref
from image_store import (
    CACHE,
    PLATFORMS,
    ROOT,
    Step,
    arch_of,
    build_platform,
    container,
    fail,
    machine_of,
    output,
    run,
)

CHART_ARGS = (
    "--ds-name=kured",
    "--ds-namespace=kube-system",
    "--metrics-port=8080",
    "--reboot-sentinel=/sentinel/reboot-required",
    "--reboot-command=/bin/systemctl reboot",
    "--log-format=text",
    "--concurrency=1",
)
"""kured's Helm chart 6.1.0, default values, release "kured" in kube-system (templates/daemonset.yaml)."""

CHART_CONFIG = {
    "ds-name": "kured",
    "ds-namespace": "kube-system",
    "metrics-port": 8080,
    "reboot-sentinel": "/sentinel/reboot-required",
    "reboot-command": "/bin/systemctl reboot",
    "log-format": "text",
    "concurrency": 1,
    "time-zone": "Europe/Berlin",
    "node-id": "node-1",
    "lock-backend": "daemonset",
    "period": "1h0m0s",
}
"""What ``--dump-config`` must say with the chart's arguments: the chart's values and kured's defaults."""

IMAGE_CHECK = """
import importlib, importlib.util, os, platform, sys, zoneinfo
for module in ("pydantic_core._pydantic_core", "yaml._yaml", "re2", "charset_normalizer.md", "pydantic",
               "yaml", "dateutil.tz", "oauthlib.oauth2", "email.message", "asyncio"):
    importlib.import_module(module)
roots = ("/usr/lib/python3.11", "/usr/local/lib/python3.11/dist-packages")
missing = [os.path.join(top, name) for root in roots
           for top, dirs, files in os.walk(root) for name in files
           if name.endswith(".py")
           and not os.path.exists(importlib.util.cache_from_source(os.path.join(top, name)))]
assert not missing, f"{len(missing)} modules without bytecode: {missing[:5]}"
sourceless = [m.__name__ for m in (importlib.import_module("json"), zoneinfo, sys.modules["pydantic"],
                                   sys.modules["yaml"])
              if not m.__file__.endswith(".pyc")]
assert not sourceless, f"modules with their sources in the image: {sourceless}"
import apprise
assert apprise.Apprise.instantiate("json://localhost") is not None, "apprise finds its plugins"
assert os.path.getsize("/etc/ssl/certs/ca-certificates.crt") > 0, "CA certificates"
zoneinfo.ZoneInfo("Europe/Berlin")
print(platform.machine())"""
"""What the image holds beyond the entry point, checked in it by its own Python (for every platform): the
compiled dependencies of its platform load, every module is bytecode (read-only root: nothing is compiled
at run time): the standard library and the dependencies as bytecode alone, apprise's plugins beside their
sources (apprise finds a URL's plugin by its file name), CA certificates and time zones are there."""

AGENT_ONLY = """
import importlib.util, os, pykured
here = os.path.dirname(pykured.__file__)
extra = [m for m in ("pykured_dev", "pykured.testenv", "pykured.demo") if importlib.util.find_spec(m)]
print(extra or "ok", here)"""

DISTROLESS = """
import importlib.util, os
found = [p for p in ("/bin/sh", "/bin/bash", "/bin/dash", "/usr/bin/apt-get", "/usr/bin/dpkg", "/bin/ls",
                     "/usr/bin/env", "/usr/local/bin/pip") if os.path.lexists(p)]
found += [m for m in ("aiohttp", "yarl", "multidict", "pip") if importlib.util.find_spec(m)]
print(found or "ok")"""
"""No shell, package manager or coreutils: nothing a flag needs (the commands run through nsenter on the
host). aiohttp (the Kubernetes client's asyncio twin needs it) is left out."""

DISTROLESS_EMULATED = """
import importlib.util, os
found = [p for p in ("/bin/sh", "/bin/bash", "/bin/dash", "/usr/bin/apt-get", "/usr/bin/dpkg", "/bin/ls",
                     "/usr/bin/env", "/usr/local/bin/pip") if os.path.lexists(p)]
found += [m for m in ("aiohttp", "yarl", "multidict", "pip", "pykured_dev", "pykured.testenv",
                      "pykured.demo")
          if importlib.util.find_spec(m)]
print(found or "ok")"""

KUBECONFIG_CHECK = """
import sys
from pykured.kube.client import Kube
Kube.from_kubeconfig("/kc/config")
loaded = "kubernetes.config.kube_config" in sys.modules
Kube.in_cluster(token_dir="/kc", host="10.0.0.1", port="443")
print("ok" if loaded and "aiohttp" not in sys.modules else sorted(sys.modules))"""
"""--kubeconfig loads the Kubernetes client's kubeconfig loader (it imports pydantic, not aiohttp); a pod's
in-cluster client needs neither. Both are made (no network: nothing is contacted)."""

KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n"
    '  cluster: {server: "https://10.0.0.1:6443", insecure-skip-tls-verify: true}\n'
    "users:\n- name: u\n  user: {token: secret}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
    "current-context: x\n"
)
GETUID = "import os; print(os.getuid())"
PLATFORM_WARNING = re.compile(r"^WARNING: image platform \(.*\) does not match the expected platform")
BINFMT = Path("/proc/sys/fs/binfmt_misc")


def attempt(*args: str) -> tuple[bool, str]:
    """Run a program; whether it succeeded and what it printed (its standard output and error)."""
    done = run(*args, check=False, merge=True)
    return done.returncode == 0, done.stdout.decode(errors="replace").rstrip("\n")


def chart_config_kept(dump: str) -> bool:
    """--dump-config's JSON keeps the chart's values and kured's defaults."""
    try:
        got = json.loads(dump)
    except ValueError:
        print(f"--dump-config is not JSON: {dump}", file=sys.stderr)
        return False
    wrong = {k: (got.get(k), v) for k, v in CHART_CONFIG.items() if got.get(k) != v}
    if wrong:
        print(f"--dump-config (got, want): {wrong}", file=sys.stderr)
    return not wrong


def central_uid() -> str:
    """The uid the central FleetLock Deployment runs as (kustomize/overlays/fleetlock-central)."""
    for path in sorted((ROOT / "kustomize/overlays/fleetlock-central").glob("*.yaml")):
        for line in path.read_text().splitlines():
            if match := re.match(r" *runAsUser: *([0-9]*)", line):
                return match.group(1)
    return ""


@contextlib.contextmanager
def kubeconfig_dir() -> Iterator[Path]:
    """A kubeconfig, a service account token and a CA bundle, to be mounted at /kc."""
    (CACHE / "tmp").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kubeconfig.", dir=CACHE / "tmp") as name:
        kc = Path(name)
        (kc / "config").write_text(KUBECONFIG)
        (kc / "token").write_text("token\n")
        shutil.copy("/etc/ssl/certs/ca-certificates.crt", kc / "ca.crt")
        kc.chmod(0o700)
        yield kc


def written(runs: list[str], baseline_run: str) -> tuple[list[str], str]:
    """What the runs wrote (podman diff) beyond the runtime's own mount points, which a run that does
    nothing (``baseline_run``) shows too; the containers are removed."""
    baseline = output("podman", "diff", baseline_run)
    changed = "\n".join(output("podman", "diff", name) for name in runs)
    run("podman", "rm", "-f", baseline_run, *runs, capture=True)
    ignored = set(baseline.splitlines())
    return sorted({line for line in changed.splitlines() if line} - ignored), baseline


def native_help(image: str) -> str:
    ok, out = attempt(*container("--entrypoint", "/usr/bin/kured", image, "--help"))
    if not ok:
        fail(f"kured --help: {out}")
    if "--reboot-sentinel" not in out:
        fail(f"kured --help lacks --reboot-sentinel: {out}")
    return ""


def native_dump_config(image: str) -> str:
    env = ("-e", "KURED_NODE_ID=node-1")
    ok, out = attempt(*container(*env, image, *CHART_ARGS, "--time-zone=Europe/Berlin", "--dump-config"))
    if not ok:
        fail(f"--dump-config: {out}")
    if not chart_config_kept(out):
        fail("--dump-config: chart defaults not kept")
    return f"{sum(1 for line in out.splitlines() if line)} lines of JSON, kured's defaults"


def python_in(image: str) -> tuple[str, ...]:
    """The arguments of a container that runs the image's Python (``-c`` and the code follow)."""
    return ("--entrypoint", "/usr/bin/python3.11", image, "-c")


def native_time_zones(image: str) -> str:
    ok, out = attempt(*container(image, "--time-zone=Nowhere/Atlantis", "--dump-config"))
    if ok:
        fail(f"a bogus time zone was accepted: {out}")
    zones = (
        'import zoneinfo; print(zoneinfo.ZoneInfo("Europe/Berlin").key, len(zoneinfo.available_timezones()))'
    )
    done = run(*container(*python_in(image), zones), check=False, capture=True)
    found = done.stdout.decode().rstrip("\n")
    if done.returncode != 0:
        fail(f"zoneinfo: {found}")
    return f"{found} zones"


def native_agent_only(image: str) -> str:
    ok, out = attempt(*container(*python_in(image), AGENT_ONLY))
    if not ok:
        fail(f"agent-only check: {out}")
    if out.split(" ", 1)[0] != "ok":
        fail(f"the image holds more than the agent: {out}")
    return "no pykured_dev, test control plane or demo"


def native_nsenter(image: str) -> str:
    done = run(*container("--entrypoint", "/usr/bin/nsenter", image, "--version"), check=False, capture=True)
    out = done.stdout.decode().rstrip("\n")
    if done.returncode != 0:
        fail(f"nsenter: {out}")
    return out


def native_image_check(image: str) -> str:
    ok, out = attempt(*container(*python_in(image), IMAGE_CHECK))
    if not ok:
        fail(f"image check: {out}")
    machine = os.uname().machine
    if out != machine:
        fail(f"the image's Python runs on {out}, not {machine}")
    return f"every module compiled, the {out} wheels load"


def native_user(image: str) -> str:
    """kustomize/base's DaemonSet sets no runAsUser: the image's own user runs it, and it must be root
    (nsenter into PID 1's mount namespace). The central FleetLock Deployment runs as 65534."""
    user = output(*container(*python_in(image), GETUID))
    if user != "0":
        fail(f"the image runs as uid {user}, the DaemonSet needs root")
    if any("runAsUser" in path.read_text() for path in (ROOT / "kustomize/base").glob("*.yaml")):
        fail("kustomize/base sets runAsUser: update this check")
    central = central_uid()
    ok, out = attempt(
        *container("--user", f"{central}:{central}", "--entrypoint", "/usr/bin/kured", image, "--help")
    )
    if not ok:
        fail(f"kured --help as uid {central}: {out}")
    return f"DaemonSet uid {user}, FleetLock Deployment uid {central}"


def native_distroless(image: str) -> str:
    ok, out = attempt(*container(*python_in(image), DISTROLESS))
    if not ok:
        fail(f"distroless check: {out}")
    if out != "ok":
        fail(f"the image holds what the agent does not need: {out}")
    return "no shell, apt, dpkg, coreutils, pip or aiohttp"


def native_kubeconfig(image: str) -> str:
    with kubeconfig_dir() as kc:
        ok, out = attempt(*container("-v", f"{kc}:/kc:ro", *python_in(image), KUBECONFIG_CHECK))
    if not ok or out != "ok":
        fail(f"kubeconfig: {out}")
    return "Kube.from_kubeconfig and Kube.in_cluster, without aiohttp"


def native_nothing_written(image: str) -> str:
    """The same starts without --read-only: podman diff lists every path a run created or changed. The
    runtime's own mount points (/etc/hosts, /etc/hostname, ...) show in a run of /bin/true too."""
    name = f"pykured-smoke-{os.getpid()}"
    run("podman", "run", "--name", f"{name}-true", "--network", "none", *python_in(image), "pass")
    env = ("-e", "KURED_NODE_ID=node-1")
    run(
        "podman",
        "run",
        "--name",
        name,
        "--network",
        "none",
        *env,
        image,
        *CHART_ARGS,
        "--dump-config",
        capture=True,
    )
    help_run = (
        "--name",
        f"{name}-help",
        "--network",
        "none",
        "--entrypoint",
        "/usr/bin/kured",
        image,
        "--help",
    )
    run("podman", "run", *help_run, quiet=True)
    diff, baseline = written([name, f"{name}-help"], f"{name}-true")
    if diff:
        fail(f"the run wrote to the image: {chr(10).join(diff)}")
    return f"podman diff: only the runtime's {baseline.replace(chr(10), ', ')}"


NATIVE_CHECKS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("smoke: kured --help", native_help),
    ("smoke: --dump-config (chart)", native_dump_config),
    ("smoke: time zones", native_time_zones),
    ("smoke: agent only", native_agent_only),
    ("smoke: nsenter", native_nsenter),
    ("smoke: bytecode, CA, extensions", native_image_check),
    ("smoke: user", native_user),
    ("smoke: distroless", native_distroless),
    ("smoke: kubeconfig and in-cluster", native_kubeconfig),
    ("smoke: nothing written", native_nothing_written),
)
"""The build platform's checks, in order: a step each, given the index (run natively)."""


def smoke() -> None:
    """Every check on the build platform's image, then on every other platform's under emulation."""
    image = ref()
    for name, check in NATIVE_CHECKS:
        step = Step(name)
        step.done(check(image))
    for platform in PLATFORMS:
        if platform != build_platform():
            smoke_emulated(platform)


# ---- the other platforms, under explicit user-mode emulation --------------------------------------------
def binfmt_state() -> str:
    """binfmt_misc's entries, sorted, space-separated ("" when it is not mounted)."""
    try:
        names = sorted((entry.name for entry in BINFMT.iterdir()), key=os.fsencode)
    except OSError:
        return ""
    return "".join(f"{name} " for name in names)


def binfmt_guard(before: str) -> None:
    """Fail when binfmt_misc's entries differ from ``before``: something in this run registered or removed
    a handler."""
    now = binfmt_state()
    if now != before:
        fail(
            "binfmt_misc changed during the emulated smoke test"
            f" (before: {before or 'empty'}, now: {now or 'empty'})"
        )


def refuse_binfmt_path(path: Path) -> None:
    """Never let a path below binfmt_misc be used (as the emulator, or anything else)."""
    real = Path(os.path.realpath(path))
    if real == BINFMT or BINFMT in real.parents:
        fail(f"refusing to use {path}: binfmt_misc is machine-wide")


def qemu_for(arch: str) -> Path:
    """The path of the unpacked qemu-<cpu>-static for a Debian architecture (downloaded once)."""
    cpu = machine_of(arch)
    policy = run(
        "apt-cache", "policy", "qemu-user-static", check=False, capture=True, quiet=True
    ).stdout.decode()
    versions = [m.group(1) for line in policy.splitlines() if (m := re.match(r" *Candidate: (.*)", line))]
    version = "\n".join(versions)
    if not version or version == "(none)":
        fail("qemu-user-static is not in this machine's apt sources")
    directory = CACHE / "qemu" / re.sub(r"[^A-Za-z0-9.+~-]", "_", version)
    emulator = directory / f"qemu-{cpu}-static"
    if not os.access(emulator, os.X_OK):
        scratch = Path(f"{directory}.{os.getpid()}")
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        got = subprocess.run(
            ["apt-get", "download", "-qq", f"qemu-user-static={version}"],
            cwd=scratch,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        if got.returncode != 0:
            fail(f"apt-get download qemu-user-static={version} failed")
        (deb,) = scratch.glob("qemu-user-static_*.deb")
        run("dpkg-deb", "-x", deb, scratch / "root")
        directory.mkdir(parents=True, exist_ok=True)
        (scratch / "root/usr/bin" / emulator.name).rename(emulator)
        shutil.rmtree(scratch)
    refuse_binfmt_path(emulator)
    return emulator


class Emulated:
    """Runs of one platform's image in the index, each program run by the emulator (``podman run --platform
    PLATFORM`` on the index, entry point /qemu)."""

    def __init__(self, platform: str, index: str, qemu: Path, *, binfmt_before: str) -> None:
        self.arch = arch_of(platform)
        self.index = index
        self.binfmt_before = binfmt_before
        self.flags = ("--platform", platform, "-v", f"{qemu}:/qemu:ro", "--entrypoint", "/qemu")

    def attempt(self, *args: str) -> tuple[bool, str]:
        """Like :func:`attempt`; podman 4.3 warns that the index's platform (it inspects the build platform's
        instance) is not the one asked for, although it runs the asked one: that line is dropped."""
        ok, out = attempt(*container(*self.flags, *args))
        return ok, "\n".join(line for line in out.splitlines() if not PLATFORM_WARNING.match(line))

    def python(self, *args: str) -> tuple[bool, str]:
        return self.attempt(self.index, "/usr/bin/python3.11", *args)

    def kured(self, *args: str, flags: tuple[str, ...] = ()) -> tuple[bool, str]:
        """kured's entry point cannot be the container's command (the kernel would have to exec an arm64
        program: only a binfmt_misc handler makes it do that), so /usr/bin/kured is run as python3.11's
        script."""
        return self.attempt(*flags, self.index, "/usr/bin/python3.11", "/usr/bin/kured", *args)


def emulated_help(emu: Emulated) -> str:
    ok, out = emu.kured("--help")
    if not ok:
        fail(f"kured --help ({emu.arch}): {out}")
    if "--reboot-sentinel" not in out:
        fail(f"kured --help ({emu.arch}) lacks --reboot-sentinel: {out}")
    return "/usr/bin/kured through /usr/bin/python3.11"


def emulated_dump_config(emu: Emulated) -> str:
    env = ("-e", "KURED_NODE_ID=node-1")
    ok, out = emu.kured(*CHART_ARGS, "--time-zone=Europe/Berlin", "--dump-config", flags=env)
    if not ok:
        fail(f"--dump-config ({emu.arch}): {out}")
    if not chart_config_kept(out):
        fail(f"--dump-config ({emu.arch}): chart defaults not kept")
    ok, out = emu.kured("--time-zone=Nowhere/Atlantis", "--dump-config")
    if ok:
        fail(f"a bogus time zone was accepted ({emu.arch}): {out}")
    return "kured's defaults; an unknown zone refused"


def emulated_image_check(emu: Emulated) -> str:
    ok, out = emu.python("-c", IMAGE_CHECK)
    if not ok:
        fail(f"image check ({emu.arch}): {out}")
    if out != machine_of(emu.arch):
        fail(f"the {emu.arch} image's Python reports {out}")
    return f"machine {out}, every module compiled, the {emu.arch} wheels load"


def emulated_distroless(emu: Emulated) -> str:
    ok, out = emu.python("-c", DISTROLESS_EMULATED)
    if not ok:
        fail(f"distroless check ({emu.arch}): {out}")
    if out != "ok":
        fail(f"the {emu.arch} image holds what the agent does not need: {out}")
    return "no shell, apt, dpkg, coreutils, pip, aiohttp or development kit"


def emulated_nsenter_user(emu: Emulated) -> str:
    ok, nsenter = emu.attempt(emu.index, "/usr/bin/nsenter", "--version")
    if not ok:
        fail(f"nsenter ({emu.arch}): {nsenter}")
    _, user = emu.python("-c", GETUID)
    if user != "0":
        fail(f"the {emu.arch} image runs as uid {user}, the DaemonSet needs root")
    central = central_uid()
    ok, _ = emu.kured("--help", flags=("--user", f"{central}:{central}"))
    if not ok:
        fail(f"kured --help as uid {central} ({emu.arch})")
    return f"{nsenter}; uid {user}, and {central} runs it"


def emulated_kubeconfig(emu: Emulated) -> str:
    with kubeconfig_dir() as kc:
        ok, out = emu.attempt("-v", f"{kc}:/kc:ro", emu.index, "/usr/bin/python3.11", "-c", KUBECONFIG_CHECK)
    if not ok or out != "ok":
        fail(f"kubeconfig ({emu.arch}): {out}")
    return "Kube.from_kubeconfig and Kube.in_cluster"


def emulated_nothing_written(emu: Emulated) -> str:
    name = f"pykured-smoke-{emu.arch}-{os.getpid()}"
    python = (emu.index, "/usr/bin/python3.11")
    run(
        "podman",
        "run",
        "--name",
        f"{name}-true",
        "--network",
        "none",
        *emu.flags,
        *python,
        "-c",
        "pass",
        quiet=True,
    )
    dump = ("-e", "KURED_NODE_ID=node-1", *python, "/usr/bin/kured", *CHART_ARGS, "--dump-config")
    dumped = run(
        "podman", "run", "--name", name, "--network", "none", *emu.flags, *dump, check=False, quiet=True
    )
    if dumped.returncode != 0:
        fail(f"--dump-config ({emu.arch}) failed without --read-only")
    diff, _ = written([name], f"{name}-true")
    if diff:
        fail(f"the {emu.arch} run wrote to the image: {chr(10).join(diff)}")
    binfmt_guard(emu.binfmt_before)
    return "podman diff: only the runtime's; binfmt_misc untouched"


EMULATED_CHECKS: tuple[tuple[str, Callable[[Emulated], str]], ...] = (
    ("kured --help", emulated_help),
    ("--dump-config (chart)", emulated_dump_config),
    ("bytecode, CA, extensions", emulated_image_check),
    ("agent only, distroless", emulated_distroless),
    ("nsenter, user", emulated_nsenter_user),
    ("kubeconfig and in-cluster", emulated_kubeconfig),
    ("nothing written", emulated_nothing_written),
)
"""Another platform's checks, in order, after the emulator's step: a step each ("smoke <arch>: <name>")."""


def smoke_emulated(platform: str) -> None:
    """The smoke test's checks on PLATFORM's image in the index under the emulator. What cannot run so:
    whatever the agent would start as a child process (the reboot and sentinel commands through nsenter:
    qemu-user emulates one program, a child's exec goes to the kernel again), so no agent runs a reboot
    cycle here (tests/e2e/test_image.py does that on the build platform's image), and nsenter only shows its
    version (setns is not emulated here)."""
    arch = arch_of(platform)
    index = ref()
    before = binfmt_state()
    step = Step(f"smoke {arch}: emulator")
    qemu = qemu_for(arch)
    emu = Emulated(platform, index, qemu, binfmt_before=before)
    # Without the emulator the image must not start: no binfmt_misc handler runs it behind this test's back.
    ok, out = attempt(
        *container("--platform", platform, "--entrypoint", "/usr/bin/python3.11", index, "-c", "pass")
    )
    if ok:
        out = (
            f"a binfmt_misc handler for {arch} is registered on this machine (not by this script); "
            "the checks name the emulator anyway"
        )
    else:
        if "exec format error" not in out.lower():
            fail(f"the {arch} image without emulator: {out}")
        out = "without it: exec format error"
    qemu_version = " ".join(output(qemu, "--version").splitlines()[0].split(" ")[:3])
    step.done(f"{qemu_version}; {out}")
    for name, check in EMULATED_CHECKS:
        step = Step(f"smoke {arch}: {name}")
        step.done(check(emu))
