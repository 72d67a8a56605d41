"""A DaemonSet's pod, as a kubelet would run it on a simulated node, in a :mod:`~pykured_dev.testenv.sandbox`.

From the pod template (as the API server stores it) this takes the first container's ``command`` and
``args``, resolves its ``env`` for the node (``value`` with ``$(VAR)`` references, ``fieldRef`` such as
``spec.nodeName``, ``secretKeyRef``, ``configMapKeyRef``, and ``envFrom``), mounts ``hostPath`` volumes from
the simulated host's directory (never this machine's), and authenticates as the template's
``serviceAccountName`` with a real token. The container image selects what ``/usr/bin/kured`` is: the real
kured binary for ``ghcr.io/kubereboot/kured``, pykured's console script for ``ghcr.io/pykured/pykured``.
"""

from __future__ import annotations

import base64
import dataclasses
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pykured
from pykured.core import errors
from pykured.kube.client import Kube, Obj
from pykured_dev.testenv.procs import TestEnvError
from pykured_dev.testenv.sandbox import SandboxSpec

KURED_IMAGE = "ghcr.io/kubereboot/kured"
PYKURED_IMAGE = "ghcr.io/pykured/pykured"
PYKURED_NSENTER_SHIM = "/usr/bin/nsenter-simulated"


@dataclasses.dataclass(frozen=True)
class Image:
    """What a container image puts in the sandbox."""

    files: Mapping[str, str]
    """``/usr/bin/NAME`` → a file on this machine."""
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The image's ``ENV`` (the container's ``env`` overrides it)."""
    nsenter_shim: str = "/usr/bin/nsenter"


def kured_image(binary: Path) -> Image:
    """kured's image: the binary at ``/usr/bin/kured``; its rebooter's ``/usr/bin/nsenter`` is the shim."""
    return Image(files={"/usr/bin/kured": str(binary)})


def pykured_image(console_script: Path | None = None) -> Image:
    """pykured's image (the Dockerfile): ``/usr/bin/kured`` is pykured's console script.

    Tests keep pykured's safe mode on, so it refuses the system ``/usr/bin/nsenter`` and the shim is named by
    ``PYKURED_NSENTER``; those two variables are the only ones the image adds for the tests.
    """
    script = console_script or Path(sys.executable).parent / "kured"
    return Image(
        files={"/usr/bin/kured": str(script)},
        env={
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYKURED_SAFE_MODE": "1",
            "PYKURED_NSENTER": PYKURED_NSENTER_SHIM,
            # the pykured under test, the one this process imported (not whichever checkout the console
            # script's environment installed)
            "PYTHONPATH": str(Path(pykured.__file__).resolve().parent.parent),
        },
        nsenter_shim=PYKURED_NSENTER_SHIM,
    )


def image_console_script(directory: Path) -> Path:
    """A console script that starts pykured as the image does: the interpreter, then the installed packages on
    its path, without the development install's ``.pth`` files (the editable finder's import hook, the
    ``pykured_dev`` path) that the image has none of. For benchmarks of an agent's own start-up and memory:
    the virtualenv's console script pays about 10 ms and 1 MiB for that hook, in every pod."""
    import sysconfig  # only the benchmarks call this

    script = directory / "kured"
    site = sysconfig.get_paths()["purelib"]
    script.write_text(
        f"#!{sys.executable} -S\n"
        "import sys\n"
        f"sys.path.append({site!r})\n"
        "from pykured.__main__ import kured\n"
        "sys.exit(kured())\n"
    )
    script.chmod(0o755)
    return script


def kured_daemonset(namespace: str, name: str, *, image: str, args: Sequence[str]) -> Obj:
    """A DaemonSet shaped like kured 1.23's ``kured-ds.yaml`` (hostPID, ``/var/run`` at ``/sentinel``).

    ``image`` picks the agent (:data:`KURED_IMAGE` or :data:`PYKURED_IMAGE`, with a tag); ``args`` follow
    the manifest's sentinel, ``--ds-namespace`` and ``--ds-name``.
    """
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"name": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"name": name}},
                "spec": {
                    "serviceAccountName": "kured",
                    "hostPID": True,
                    "restartPolicy": "Always",
                    "volumes": [{"name": "sentinel", "hostPath": {"path": "/var/run", "type": "Directory"}}],
                    "containers": [
                        {
                            "name": "kured",
                            "image": image,
                            "securityContext": {"privileged": True, "readOnlyRootFilesystem": True},
                            "ports": [{"containerPort": 8080, "name": "metrics"}],
                            "env": [
                                {
                                    "name": "KURED_NODE_ID",
                                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                }
                            ],
                            "volumeMounts": [
                                {"mountPath": "/sentinel", "name": "sentinel", "readOnly": True}
                            ],
                            "command": [
                                "/usr/bin/kured",
                                "--reboot-sentinel=/sentinel/reboot-required",
                                f"--ds-namespace={namespace}",
                                f"--ds-name={name}",
                                *args,
                            ],
                        }
                    ],
                },
            },
        },
    }


def repository(image: str) -> str:
    """``registry/name`` without the tag or digest."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


@dataclasses.dataclass(frozen=True)
class PodTemplate:
    """A DaemonSet's pod template and where it lives."""

    namespace: str
    owner: str
    spec: Obj
    """``spec.template.spec``."""

    @classmethod
    def of(cls, daemonset: Obj) -> PodTemplate:
        """The template of a DaemonSet as read from the API server."""
        meta = daemonset["metadata"]
        return cls(
            namespace=meta["namespace"], owner=meta["name"], spec=daemonset["spec"]["template"]["spec"]
        )

    @property
    def container(self) -> Obj:
        """The first container (kured's manifests have exactly one)."""
        return dict(self.spec["containers"][0])

    @property
    def image(self) -> str:
        """The first container's image."""
        return str(self.container["image"])

    def with_image(self, image: str) -> PodTemplate:
        """The same template with another image (what a DaemonSet rollout changes)."""
        spec = dict(self.spec)
        containers = [dict(c) for c in spec["containers"]]
        containers[0]["image"] = image
        spec["containers"] = containers
        return dataclasses.replace(self, spec=spec)


_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


def expand(value: str, defined: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined variables are replaced, ``$$`` is a literal ``$``."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return defined.get(name, match.group(0))

    return _REF.sub(one, value)


class PodEnv:
    """Resolves a container's environment for one node, reading Secrets and ConfigMaps as admin."""

    def __init__(self, kube: Kube, *, namespace: str, node: str, pod_name: str, spec: Obj) -> None:
        self.kube = kube
        self.namespace = namespace
        self.node = node
        self.pod_name = pod_name
        self.spec = spec

    def field(self, path: str) -> str:
        """A ``fieldRef`` of the pod this node's DaemonSet controller would create."""
        fields = {
            "spec.nodeName": self.node,
            "metadata.name": self.pod_name,
            "metadata.namespace": self.namespace,
            "spec.serviceAccountName": str(self.spec.get("serviceAccountName") or "default"),
            "status.hostIP": "10.0.0.1",
            "status.hostIPs": "10.0.0.1",
            "status.podIP": "127.0.0.1",
            "status.podIPs": "127.0.0.1",
        }
        if path not in fields:
            raise TestEnvError(f"fieldRef {path} is not simulated")
        return fields[path]

    def _data(self, kind: str, name: str) -> dict[str, str] | None:
        collection = "secrets" if kind == "secret" else "configmaps"
        try:
            obj = self.kube.get(f"/api/v1/namespaces/{self.namespace}/{collection}/{name}")
        except errors.NotFoundError:
            return None
        data: dict[str, Any] = obj.get("data") or {}
        if kind == "secret":
            return {k: base64.b64decode(v).decode() for k, v in data.items()}
        return {str(k): str(v) for k, v in data.items()}

    def _ref(self, kind: str, ref: Obj) -> str | None:
        data = self._data(kind, ref["name"])
        if data is None or ref["key"] not in data:
            if ref.get("optional"):
                return None
            raise TestEnvError(f"{kind} {ref['name']} key {ref['key']} not found for the container's env")
        return data[ref["key"]]

    def resolve(self, container: Obj) -> dict[str, str]:
        """The container's environment in the kubelet's order (``envFrom``, then ``env``)."""
        env: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            prefix = source.get("prefix", "")
            kind, ref = (
                ("secret", source["secretRef"])
                if "secretRef" in source
                else (
                    "configmap",
                    source["configMapRef"],
                )
            )
            data = self._data(kind, ref["name"])
            if data is None and not ref.get("optional"):
                raise TestEnvError(f"{kind} {ref['name']} not found for the container's envFrom")
            env.update({prefix + k: v for k, v in (data or {}).items()})
        for var in container.get("env") or []:
            name = var["name"]
            source = var.get("valueFrom")
            if source is None:
                env[name] = expand(str(var.get("value", "")), env)
            elif "fieldRef" in source:
                env[name] = self.field(source["fieldRef"]["fieldPath"])
            elif "secretKeyRef" in source or "configMapKeyRef" in source:
                kind = "secret" if "secretKeyRef" in source else "configmap"
                value = self._ref(kind, source.get("secretKeyRef") or source["configMapKeyRef"])
                if value is not None:
                    env[name] = value
            else:
                raise TestEnvError(f"env {name}: {sorted(source)} is not simulated")
        return env


def service_account_files(cluster_ca: bytes, token: str, namespace: str) -> dict[str, bytes]:
    """The projected service-account volume's files."""
    return {"token": token.encode(), "ca.crt": cluster_ca, "namespace": namespace.encode()}


def host_path(host_root: Path, path: str) -> Path:
    """Where the simulated host keeps ``path`` (``/var/run`` is ``/run``, as on the host)."""
    clean = "/" + path.strip("/")
    if clean == "/var/run" or clean.startswith("/var/run/"):
        clean = "/run" + clean[len("/var/run") :]
    return host_root / clean.lstrip("/")


def sandbox_spec(
    template: PodTemplate,
    *,
    node: str,
    kube: Kube,
    images: Mapping[str, Image],
    token: str,
    ca_pem: bytes,
    api_host: str,
    api_port: int,
    host_root: Path,
    forward: Sequence[int] = (),
) -> SandboxSpec:
    """What a kubelet would start for ``template`` on ``node``, as a sandbox."""
    container = template.container
    image = images.get(repository(template.image))
    if image is None:
        raise TestEnvError(f"no simulated image for {template.image}")
    pod_name = f"{template.owner}-{node}"[:63]
    env = {
        "HOSTNAME": pod_name,
        **image.env,
        **PodEnv(
            kube, namespace=template.namespace, node=node, pod_name=pod_name, spec=template.spec
        ).resolve(container),
        "KUBERNETES_SERVICE_HOST": api_host,
        "KUBERNETES_SERVICE_PORT": str(api_port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(api_port),
    }
    command = [expand(str(a), env) for a in container.get("command") or []]
    args = [expand(str(a), env) for a in container.get("args") or []]
    if not command:
        raise TestEnvError("the container has no command (an image ENTRYPOINT is not simulated)")
    volumes = {v["name"]: v for v in template.spec.get("volumes") or []}
    mounts = []
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount["name"], {})
        if "hostPath" not in volume:
            raise TestEnvError(f"volume {mount['name']}: only hostPath volumes are simulated")
        source = host_path(host_root, volume["hostPath"]["path"])
        source.mkdir(parents=True, exist_ok=True)
        target = str(host_path(Path("/"), mount["mountPath"]))
        mounts.append((str(source), target, bool(mount.get("readOnly"))))
    return SandboxSpec(
        argv=[*command, *args],
        env=env,
        service_account=service_account_files(ca_pem, token, template.namespace),
        files=image.files,
        mounts=mounts,
        forward=[api_port, *forward],
        nsenter_shim=image.nsenter_shim,
    )
