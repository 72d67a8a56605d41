#!/usr/bin/env python3
"""The Go programs the tests and the release run, each built from its Go module under tools/ by gobuild.

    tools/testenv-build [name ...]     the test control plane: etcd kube-apiserver kube-controller-manager
                                       kubectl kube-scheduler kubelet, and alertmanager (the default: all)
    tools/kured-build [name ...]       what pykured is judged against: kured timewindow goregexp helm chart
                                       krew (the default: all six), and npd (Node Problem Detector, on
                                       demand only)
    tools/prometheus-build             Prometheus and promtool (one go build)
    tools/release-build [name ...]     the release tools: registry cosign (the default: both)
    tools/karpenter-build              Karpenter's kwok provider and its CRDs (tools/dev setup builds it)

Each prints the bin directory (``<cache>/bin/current``) on the last line of standard output. Versions are
in tools/versions.env. Every program is cached by gobuild.cached under a key made of what it is built from;
the keys below are the ones these tools have always used, so a warm cache stays warm.

The test control plane: the demo needs only etcd and kube-apiserver; the tests also use
kube-controller-manager (PodDisruptionBudget status, the DaemonSet controller), kubectl (kustomize), and
kube-scheduler and kubelet (real nodes, tests/e2e/realnode). kubelet needs a few go.sum entries the others
do not; they live in tools/k8s/kubelet.sum and are added to a private copy of go.sum (go build -modfile), so
the other components' keys do not change. alertmanager (tools/alertmanager) is not part of the control plane
but is built the same way: the tests put alerts and silences into a real one.

The reference: kured 1.23.0 (the real binary), the timewindow oracle (tools/timewindow: kured's own
pkg/timewindow behind a stdin protocol), the goregexp oracle (tools/goregexp: Go's regexp package, which
kured compiles --alert-filter-regexp with), helm v3 and kured's Helm chart 6.1.0 (unpacked beside the bin
directory: <bin>/../chart/kured), and krew (kubectl's plugin manager, which installs the single-file
kubectl-pykured from plugins/pykured.yaml). kured comes from ../shared/kured/kured-1.23.0-src.tar.gz when it
is there (PYKURED_SHARED elsewhere), otherwise the Go module proxy at the release commit; the chart from
../shared/kured/kured-chart-6.1.0.tar.gz, otherwise ``helm pull`` from kured's chart repository.

Prometheus and promtool come from the github.com/prometheus/prometheus module (its v0.3xx.y is Prometheus
3.xx.y). Build tags: remove_all_sd leaves out every service-discovery plugin but file and http (the tests use
static targets); builtinassets is left off, so the web UI's assets are not compiled in (the HTTP API, all the
tests use, is).

The release tools: the CNCF distribution registry (tools/registry: the registry's root command with the local
storage drivers only), which the tests push the release to, and cosign (tools/cosign: cosign's command tree
without the cloud KMS signers), which tools/release signs and attests with.

Karpenter (tools/karpenter: the sigs.k8s.io/karpenter module's kwok provider, sigs.k8s.io/karpenter/kwok, its
controller with a simulated cloud that creates the Nodes itself) is built as karpenter-kwok, with the
CustomResourceDefinitions it ships (NodePool, NodeClaim, NodeOverlay, CapacityBuffer, KWOKNodeClass) copied
from the module's source beside it (<bin>/../karpenter-<version>-<key>/crds). The module asks for a newer Go
than the machine's: KARPENTER_GO in versions.env names the toolchain the go command fetches (GOTOOLCHAIN).
tools/dev setup builds it; tests/e2e/test_karpenter.py fails, saying so, without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import gobuild
from gobuild import BIN, CACHE, CURRENT, HERE, BuildError, Usage, cached, go, go_version, hash16, read

ENTRY_TOOLS = ("testenv-build", "kured-build", "prometheus-build", "release-build", "karpenter-build")


# ---- the test control plane (tools/testenv-build) ------------------------------------------------------
CONTROL_PLANE = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kubectl",
    "kube-scheduler",
    "kubelet",
    "alertmanager",
)
ESTIMATES = {
    "etcd": "about 1 min",
    "kube-apiserver": "about 4-5 min",
    "kube-controller-manager": "about 2 min",
    "kubectl": "under 1 min",
    "kube-scheduler": "about 1 min",
    "kubelet": "about 4-5 min",
    "alertmanager": "about 3-4 min",
}
"""Rough cold-build times on 2 cores (module download included; docs/testing.md, "The test control plane")."""
K8S_TAGS = "-tags=selinux,notest,grpcnotrace"


def k8s_ldflags(version: str) -> str:
    major, minor = version.removeprefix("v").split(".")[:2]
    flags = "-s -w"
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += (
            f" -X {package}.gitVersion={version} -X {package}.gitMajor={major} -X {package}.gitMinor={minor}"
            f" -X {package}.gitTreeState=clean -X {package}.buildDate=1970-01-01T00:00:00Z"
        )
    return flags


def control_plane_component(name: str, v: dict[str, str]) -> None:
    """One component, keyed by its module's go.sum and go.mod, its version, Go's and its link flags (and
    kubelet's extra go.sum entries)."""
    modfile: Path | None = None
    tags = ""
    if name == "etcd":
        module, package, version = "etcd", "go.etcd.io/etcd/server/v3", v["ETCD"]
        ldflags = f"-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA={version}"
    elif name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet"):
        module, package, version = "k8s", f"k8s.io/kubernetes/cmd/{name}", v["K8S"]
        ldflags, tags = k8s_ldflags(version), K8S_TAGS
        modfile = HERE / "k8s/kubelet.sum" if name == "kubelet" else None
    elif name == "alertmanager":
        module, package, version = (
            "alertmanager",
            "github.com/prometheus/alertmanager/cmd/alertmanager",
            v["ALERTMANAGER"],
        )
        ldflags = f"-s -w -X github.com/prometheus/common/version.Version={version.removeprefix('v')}"
    else:
        raise BuildError(f"unknown component {name}")
    here = HERE / module
    extra = f"{ldflags} {hash16(modfile.read_bytes())}" if modfile else ldflags
    key = hash16(read(here / "go.sum", here / "go.mod"), f"{version} {go_version()} {extra}\n".encode())

    def build(scratch: Path, log: Path) -> Usage | None:
        flags: list[str] = []
        if modfile:  # go.mod as is, go.sum plus the component's own entries
            shutil.copy(here / "go.mod", scratch / "build.mod")
            (scratch / "build.sum").write_bytes(read(here / "go.sum", modfile))
            flags.append(f"-modfile={scratch}/build.mod")
        if name == "alertmanager":
            flags.append(alertmanager_source(here, version, scratch, log))
        usage = go(
            [
                "build",
                *flags,
                "-trimpath",
                *([tags] if tags else []),
                "-ldflags",
                ldflags,
                "-o",
                str(scratch / name),
                package,
            ],
            cwd=here,
            log=log,
            what=name,
            tool="testenv-build",
        )
        for leftover in ("build.mod", "build.sum", "src"):
            path = scratch / leftover
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        return usage

    cached(
        tool="testenv-build",
        stem=f"{name}-{version}",
        key=key,
        binaries=[name],
        what=f"{name} {version}",
        build=build,
        estimate=ESTIMATES[name],
    )


def alertmanager_source(here: Path, version: str, scratch: Path, log: Path) -> str:
    """Alertmanager's module has no web UI in it (ui/app/dist is built by npm in its release process, and its
    //go:embed needs it): a scratch copy of the module gets a one-page placeholder, and a replace in a private
    go.mod points the build at it. The API the tests use is all Go. The -modfile flag of the build."""
    source = gobuild.module_source(
        "github.com/prometheus/alertmanager", version, cwd=here, log=log, what="Alertmanager"
    )
    shutil.copytree(source, scratch / "src", symlinks=True)
    subprocess.run(["chmod", "-R", "u+w", str(scratch / "src")], check=True)
    for ui in ("elm", "mantine"):
        (scratch / "src/ui/app/dist" / ui).mkdir(parents=True, exist_ok=True)
        (scratch / "src/ui/app/dist" / ui / "index.html").write_text(
            "<!doctype html><title>Alertmanager</title><p>Built without its web UI; the API is at /api/v2/.\n"
        )
    shutil.copy(here / "go.mod", scratch / "build.mod")
    shutil.copy(here / "go.sum", scratch / "build.sum")
    go(
        [
            "mod",
            "edit",
            f"-modfile={scratch}/build.mod",
            f"-replace=github.com/prometheus/alertmanager={scratch}/src",
        ],
        cwd=here,
        log=log,
        what="alertmanager",
        tool="testenv-build",
    )
    return f"-modfile={scratch}/build.mod"


def testenv_build(names: Sequence[str]) -> None:
    gobuild.go_environment("-mod=readonly -buildvcs=false")
    v = gobuild.versions()
    with gobuild.locked(
        ".lock", busy="testenv-build: another build of the control plane is running; waiting for it ..."
    ):
        for name in names or CONTROL_PLANE:
            control_plane_component(name, v)


# ---- the reference (tools/kured-build) -----------------------------------------------------------------
def shared() -> Path:
    return Path(os.environ.get("PYKURED_SHARED") or HERE / "../../shared/kured")


def unpack(tarball: Path, into: Path) -> None:
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(into)], check=True)


def kured_source_key(v: dict[str, str]) -> tuple[Path | None, str]:
    """kured's release source: the tarball in ../shared (keyed by its bytes), else the module proxy at the
    release commit."""
    tarball = shared() / f"kured-{v['KURED']}-src.tar.gz"
    if tarball.is_file():
        return tarball, hash16(tarball.read_bytes())
    return None, f"proxy-{v['KURED_COMMIT']}"


def build_kured(v: dict[str, str]) -> None:
    kured = v["KURED"]
    tarball, source = kured_source_key(v)
    ldflags = f"-s -w -X main.version={kured}"

    def build(scratch: Path, log: Path) -> Usage | None:
        if tarball:
            unpack(tarball, scratch)
            usage = go(
                [
                    "build",
                    "-mod=readonly",
                    "-trimpath",
                    "-ldflags",
                    ldflags,
                    "-o",
                    str(scratch / "kured"),
                    "./cmd/kured",
                ],
                cwd=scratch / f"kured-{kured}",
                log=log,
                what="kured",
                tool="kured-build",
            )
            shutil.rmtree(scratch / f"kured-{kured}")
            return usage
        return go(
            [
                "install",
                "-trimpath",
                "-ldflags",
                ldflags,
                f"github.com/kubereboot/kured/cmd/kured@{v['KURED_COMMIT']}",
            ],
            cwd=scratch,
            log=log,
            what="kured",
            tool="kured-build",
            env={"GOBIN": str(scratch)},
        )

    origin = f"from {tarball}" if tarball else f"from the Go module proxy at {v['KURED_COMMIT']}"
    cached(
        tool="kured-build",
        stem=f"kured-{kured}",
        key=hash16(f"{source} {go_version()}\n".encode()),
        binaries=["kured"],
        what=f"kured {kured} {origin}",
        build=build,
        estimate="about 4 min",
    )


def build_timewindow(v: dict[str, str]) -> None:
    """tools/timewindow is compiled against kured's pkg/timewindow: in a scratch copy of the module, a replace
    points github.com/kubereboot/kured at the unpacked release source (its go.sum comes along), or, without
    ../shared, go get resolves the module at the release commit. Nothing of kured's enters the repository."""
    kured = v["KURED"]
    tarball, source = kured_source_key(v)
    here = HERE / "timewindow"
    key = hash16(f"{source} {go_version()}\n".encode(), read(here / "go.mod", here / "main.go"))

    def build(scratch: Path, log: Path) -> Usage | None:
        mod = scratch / "mod"
        mod.mkdir()
        shutil.copy(here / "go.mod", mod)
        shutil.copy(here / "main.go", mod)

        def step(args: list[str]) -> Usage:
            return go(args, cwd=mod, log=log, what="timewindow", tool="kured-build")

        if tarball:
            unpack(tarball, scratch)
            step(
                [
                    "mod",
                    "edit",
                    "-require=github.com/kubereboot/kured@v0.0.0-00010101000000-000000000000",
                    f"-replace=github.com/kubereboot/kured={scratch}/kured-{kured}",
                ]
            )
            shutil.copy(scratch / f"kured-{kured}/go.sum", mod / "go.sum")
        else:
            step(["get", f"github.com/kubereboot/kured@{v['KURED_COMMIT']}"])
        usage = step(
            ["build", "-mod=mod", "-trimpath", "-ldflags", "-s -w", "-o", str(scratch / "timewindow"), "."]
        )
        shutil.rmtree(mod)
        shutil.rmtree(scratch / f"kured-{kured}", ignore_errors=True)
        return usage

    cached(
        tool="kured-build",
        stem=f"timewindow-{kured}",
        key=key,
        binaries=["timewindow"],
        what=f"the timewindow oracle against kured {kured}'s pkg/timewindow",
        build=build,
        estimate="about 1 min",
    )


def build_goregexp() -> None:
    """tools/goregexp uses the standard library only: Go's regexp, as the Go that builds kured has it."""
    here = HERE / "goregexp"

    def build(scratch: Path, log: Path) -> Usage | None:
        return go(
            [
                "build",
                "-mod=readonly",
                "-trimpath",
                "-ldflags",
                "-s -w",
                "-o",
                str(scratch / "goregexp"),
                ".",
            ],
            cwd=here,
            log=log,
            what="goregexp",
            tool="kured-build",
        )

    key = hash16(f"{go_version()}\n".encode(), read(here / "go.mod", here / "main.go"))
    cached(
        tool="kured-build",
        stem="goregexp",
        key=key,
        binaries=["goregexp"],
        what=f"the goregexp oracle (Go {go_version()}'s regexp)",
        build=build,
        estimate="under 1 min",
    )


def module_tool(
    *,
    tool: str,
    name: str,
    version: str,
    package: str,
    ldflags: str,
    estimate: str,
    key_suffix: str = "",
    tags: str = "",
) -> None:
    """A program built from tools/<name>'s Go module, keyed by its go.sum and go.mod and Go's version."""
    here = HERE / name

    def build(scratch: Path, log: Path) -> Usage | None:
        return go(
            [
                "build",
                "-mod=readonly",
                "-trimpath",
                *(["-tags", tags] if tags else []),
                "-ldflags",
                ldflags,
                "-o",
                str(scratch / name),
                package,
            ],
            cwd=here,
            log=log,
            what=name,
            tool=tool,
        )

    key = hash16(read(here / "go.sum", here / "go.mod"), f"{go_version()}{key_suffix}\n".encode())
    cached(
        tool=tool,
        stem=f"{name}-{version}",
        key=key,
        binaries=[name],
        what=f"{name} {version}",
        build=build,
        estimate=estimate,
    )


def fetch_chart(v: dict[str, str]) -> None:
    """kured's Helm chart, unpacked beside the bin directory (<bin>/../chart/kured)."""
    version = v["KURED_CHART"]
    tarball = shared() / f"kured-chart-{version}.tar.gz"
    dest = CACHE / f"chart-{version}"
    if not (dest / "kured/Chart.yaml").is_file():
        scratch = Path(f"{dest}.tmp.{os.getpid()}")
        scratch.mkdir(parents=True)
        if tarball.is_file():
            unpack(tarball, scratch)
            (unpacked,) = scratch.glob("kured-chart-*")
            (unpacked / "charts/kured").rename(scratch / "kured")
            shutil.rmtree(unpacked)
        else:
            helm(v)
            subprocess.run(
                [
                    str(CURRENT / "helm"),
                    "pull",
                    "kured",
                    "--repo",
                    "https://kubereboot.github.io/charts",
                    "--version",
                    version,
                    "--untar",
                    "--untardir",
                    str(scratch),
                ],
                check=True,
            )
        try:
            scratch.rename(dest)
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
    for where in (CACHE / "chart", BIN / "chart"):  # <bin>/../chart/kured, as documented
        fresh = where.with_name(f".{where.name}.new")
        fresh.unlink(missing_ok=True)
        fresh.symlink_to(dest)
        fresh.replace(where)


def helm(v: dict[str, str]) -> None:
    module_tool(
        tool="kured-build",
        name="helm",
        version=v["HELM"],
        package="helm.sh/helm/v3/cmd/helm",
        ldflags=f"-s -w -X helm.sh/helm/v3/internal/version.version={v['HELM']}",
        estimate="about 2 min",
    )


def kured_build(names: Sequence[str]) -> None:
    gobuild.go_environment("-buildvcs=false")
    v = gobuild.versions()
    steps: dict[str, Callable[[], None]] = {
        "kured": lambda: build_kured(v),
        "timewindow": lambda: build_timewindow(v),
        "goregexp": build_goregexp,
        "helm": lambda: helm(v),
        "chart": lambda: fetch_chart(v),
        # krew, kubectl's plugin manager: installs the single-file kubectl-pykured as krew's users do
        "krew": lambda: module_tool(
            tool="kured-build",
            name="krew",
            version=v["KREW"],
            package="sigs.k8s.io/krew/cmd/krew",
            ldflags=f"-s -w -X sigs.k8s.io/krew/internal/version.gitTag={v['KREW']}",
            estimate="about 1 min",
        ),
        # Node Problem Detector: its own condition, from a custom plugin monitor, reboots a simulated node
        # (built on demand only: tools/kured-build npd)
        "npd": lambda: module_tool(
            tool="kured-build",
            name="npd",
            version=v["NPD"],
            package="k8s.io/node-problem-detector/cmd/nodeproblemdetector",
            ldflags=f"-s -w -X k8s.io/node-problem-detector/pkg/version.version={v['NPD']}",
            estimate="about 4-5 min",
        ),
    }
    with gobuild.locked(".lock-kured"):
        for name in names or ("kured", "timewindow", "goregexp", "helm", "chart", "krew"):
            if name not in steps:
                raise BuildError(f"unknown artifact {name}")
            steps[name]()


# ---- Prometheus and promtool (tools/prometheus-build) --------------------------------------------------
def prometheus_build(names: Sequence[str]) -> None:
    gobuild.go_environment("-mod=readonly -buildvcs=false")
    version = gobuild.versions()["PROMETHEUS"]
    tags = "remove_all_sd"
    release = "3." + version.removeprefix("v0.").removeprefix(
        "3"
    )  # the module's VERSION file: v0.316.0 is 3.16.0
    common = "github.com/prometheus/common/version"
    ldflags = (
        f"-s -w -X {common}.Version={release} -X {common}.Revision={version}"
        f" -X {common}.Branch=HEAD -X {common}.BuildDate=19700101-00:00:00"
    )
    here = HERE / "prometheus"
    key = hash16(
        read(here / "go.sum", here / "go.mod"), f"{version} {go_version()} {tags} {ldflags}\n".encode()
    )

    def build(scratch: Path, log: Path) -> Usage | None:
        return go(
            [
                "build",
                "-trimpath",
                "-tags",
                tags,
                "-ldflags",
                ldflags,
                "-o",
                f"{scratch}/",
                "github.com/prometheus/prometheus/cmd/prometheus",
                "github.com/prometheus/prometheus/cmd/promtool",
            ],
            cwd=here,
            log=log,
            what="prometheus",
            tool="prometheus-build",
        )

    with gobuild.locked(
        ".lock-prometheus",
        busy="prometheus-build: another build of Prometheus is running; waiting for it ...",
    ):
        cached(
            tool="prometheus-build",
            stem=f"prometheus-{version}",
            key=key,
            binaries=["prometheus", "promtool"],
            what=f"prometheus and promtool {version}",
            build=build,
            estimate="about 5-7 min on 2 idle cores",
        )


REGISTRY_VERSION = "github.com/distribution/distribution/v3/version.version"


# ---- the release tools (tools/release-build) -----------------------------------------------------------
def release_build(names: Sequence[str]) -> None:
    gobuild.go_environment("-buildvcs=false")
    v = gobuild.versions()
    with gobuild.locked(".lock-release"):
        for name in names or ("registry", "cosign"):
            if name == "registry":
                # tools/registry/main.go: upstream's root command with the filesystem and in-memory storage
                # drivers only (the module has no build tags that leave out the cloud drivers and their SDKs)
                module_tool(
                    tool="release-build",
                    name="registry",
                    version=v["REGISTRY"],
                    package=".",
                    key_suffix=" ",
                    ldflags=f"-s -w -X {REGISTRY_VERSION}={v['REGISTRY']}",
                    estimate="about 2 min",
                )
            elif name == "cosign":
                # tools/cosign/main.go: upstream's command tree without the cloud KMS signers (no build tags)
                module_tool(
                    tool="release-build",
                    name="cosign",
                    version=v["COSIGN"],
                    package=".",
                    key_suffix=" ",
                    ldflags=f"-s -w -X sigs.k8s.io/release-utils/version.gitVersion={v['COSIGN']}",
                    estimate="about 3 min",
                )
            else:
                raise BuildError(f"unknown tool {name}")


# ---- Karpenter's kwok provider (tools/karpenter-build) ---------------------------------------------------
KARPENTER_CRDS = (
    "kwok/charts/crds/karpenter.sh_nodepools.yaml",
    "kwok/charts/crds/karpenter.sh_nodeclaims.yaml",
    "kwok/charts/crds/karpenter.sh_nodeoverlays.yaml",
    "kwok/charts/crds/autoscaling.x-k8s.io_capacitybuffers.yaml",
    "kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml",
)
"""The CRDs the kwok provider's chart installs (kwok/charts/crds) and its own node class, as the module ships
them."""


def karpenter_build(names: Sequence[str]) -> None:
    if names:
        raise BuildError(f"karpenter-build takes no names (got {' '.join(names)})")
    gobuild.go_environment("-mod=readonly -buildvcs=false")
    v = gobuild.versions()
    os.environ["GOTOOLCHAIN"] = v["KARPENTER_GO"]  # the module's go.mod asks for more than the machine's Go
    version = v["KARPENTER"]
    here = HERE / "karpenter"
    ldflags = f"-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version={version}"
    key = hash16(
        read(here / "go.sum", here / "go.mod"),
        f"{version} {go_version()} {ldflags} {' '.join(KARPENTER_CRDS)}\n".encode(),
    )

    def build(scratch: Path, log: Path) -> Usage | None:
        source = gobuild.module_source("sigs.k8s.io/karpenter", version, cwd=here, log=log, what="Karpenter")
        (scratch / "crds").mkdir()
        for crd in KARPENTER_CRDS:
            shutil.copy(source / crd, scratch / "crds" / Path(crd).name)
        return go(
            [
                "build",
                "-trimpath",
                "-ldflags",
                ldflags,
                "-o",
                str(scratch / "karpenter-kwok"),
                "sigs.k8s.io/karpenter/kwok",
            ],
            cwd=here,
            log=log,
            what="karpenter-kwok",
            tool="karpenter-build",
        )

    with gobuild.locked(
        ".lock-karpenter",
        busy="karpenter-build: another build of Karpenter is running; waiting for it ...",
    ):
        cached(
            tool="karpenter-build",
            stem=f"karpenter-{version}",
            key=key,
            binaries=["karpenter-kwok"],
            what=f"Karpenter {version}'s kwok provider",
            build=build,
            estimate="about 2-3.5 min on 2 cores",
        )


TOOLS: dict[str, Callable[[Sequence[str]], None]] = {
    "testenv-build": testenv_build,
    "kured-build": kured_build,
    "prometheus-build": prometheus_build,
    "release-build": release_build,
    "karpenter-build": karpenter_build,
}


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in TOOLS:
        print(__doc__, file=sys.stderr, end="")
        return 2
    tool, names = argv[0], argv[1:]
    CURRENT.mkdir(parents=True, exist_ok=True)
    try:
        TOOLS[tool](names)
    except BuildError as error:
        print(f"{tool}: {error}", file=sys.stderr)
        return 1
    print(CURRENT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
