"""The release as users install it: the chart and the image from an OCI registry onto real nodes.

``tools/release --dry-run`` pushes the checkout's image (by digest), its signature and SBOM attestation,
and the chart to a real registry (TLS from a test CA). Each node's containerd trusts that CA for the
registry's address (a registry host configuration) and pulls the image **by digest** from it. Then, in one
scenario on 3 real nodes: kured's chart 6.1.0 (``helm install``, the real kured 1.23.0) is upgraded in place
to pykured's chart from the registry (``helm upgrade kured oci://…``, the same values, the image as
``repository@digest``); pykured's agents come up from the pulled image and a node completes a reboot cycle;
then the release is removed and pykured's chart installed from the registry afresh (``helm install kured
oci://…``), and its agents come up.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from pykured_dev.testenv import images
from pykured_dev.testenv.noderelay import REGISTRY_IP
from pykured_dev.testenv.realnode import RealNodes
from pykured_dev.testenv.registry import Registry
from tests.e2e.realnode import support as s
from tests.e2e.tools.test_release import VERSION, image_ref, keypair, run_release

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.slow,
    pytest.mark.realnode,
    pytest.mark.timeout(2100),  # with INOTIFY_WAIT: the first test starts the fleet
]


def helm(fleet: RealNodes, tmp: Path, *args: str) -> str:
    home = tmp / "helm-home"
    env = {
        **os.environ,
        "KUBECONFIG": fleet.cluster.admin_kubeconfig,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
        "HELM_REGISTRY_CONFIG": str(home / "registry.json"),
    }
    done = subprocess.run(
        [str(s.built("helm")), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stderr}"
    return done.stdout


def pulled_by_digest(fleet: RealNodes, image: str) -> bool:
    """Every agent pod's container runs ``image`` (repository@digest), pulled as that digest."""
    pods = s.agent_pods(fleet)
    statuses = [c for p in pods.values() for c in (p.get("status", {}).get("containerStatuses") or [])]
    digest = image.split("@", 1)[1]
    return len(statuses) == len(fleet.nodes) and all(
        str(c.get("imageID", "")).endswith(f"@{digest}") for c in statuses
    )


def test_kured_s_chart_upgraded_to_the_registry_s_chart_and_image_by_digest(
    realnodes: RealNodes, tmp_path: Path
) -> None:
    fleet = realnodes
    s.reset(fleet)
    # What earlier scenarios applied without Helm (kustomize's and the charts' objects, by server-side apply)
    # is removed, as a user moving to a Helm release would: Helm adopts nothing it did not make.
    for docs in (
        s.kustomize_base(images.KURED_IMAGE),
        s.kustomize_base(images.KURED_IMAGE, overlay="kustomize/overlays/zincati"),
        s.chart("localhost/kured", "1.23.0"),
    ):
        s.remove(fleet, docs)
    with Registry(ips=(REGISTRY_IP,)) as registry:
        node_host = fleet.use_registry(port=registry.port, ca_pem=registry.ca.cert_pem)
        password = secrets.token_urlsafe(16)
        key, _ = keypair(tmp_path / "keys", password)
        summary = run_release(registry, tmp_path, key, password, image_ref())
        image = f"{node_host}/pykured@{summary['digest']}"
        chart = f"oci://{registry.host}/charts/pykured"
        values = tmp_path / "values.yaml"
        values.write_text(json.dumps({"configuration": {"period": "10s"}}))
        common = ["--namespace", s.NS, "-f", str(values), "--wait=false"]
        pykured = [
            f"--set=image.repository={node_host}/pykured",
            f"--set=pykured.imageDigest={summary['digest']}",
        ]
        kured_repo, kured_tag = images.KURED_IMAGE.rsplit(":", 1)
        kured_chart = str(s.built("helm").parent.parent / "chart" / "kured")

        helm(
            fleet,
            tmp_path,
            "install",
            "kured",
            kured_chart,
            *common,
            f"--set=image.repository={kured_repo}",
            f"--set=image.tag={kured_tag}",
        )
        s.wait_for("kured on every node", lambda: s.ds_rolled_out(fleet, images.KURED_IMAGE), fleet)
        uid = s.daemonset(fleet)["metadata"]["uid"]
        helm(
            fleet,
            tmp_path,
            "upgrade",
            "kured",
            chart,
            f"--version={VERSION}",
            f"--ca-file={registry.ca_file}",
            *common,
            *pykured,
        )
        s.wait_for("pykured on every node, from the registry", lambda: s.ds_rolled_out(fleet, image), fleet)
        assert s.daemonset(fleet)["metadata"]["uid"] == uid, "the same DaemonSet, upgraded in place"
        assert pulled_by_digest(fleet, image)
        pulls = [
            line
            for line in registry.log_path.read_text().splitlines()
            if f"GET /v2/pykured/manifests/{summary['digest']} " in line and '"containerd/' in line
        ]
        assert pulls, "containerd fetched the image's manifest by digest from the registry"

        node = fleet.nodes[0]
        before = s.boot_ids(fleet)
        reboots = node.reboots
        (node.run_dir / "reboot-required").touch()
        s.wait_for("the node rebooted and settled", lambda: s.settled(fleet, before, [node.name]), fleet)
        assert node.reboots == reboots + 1

        helm(fleet, tmp_path, "uninstall", "kured", "--namespace", s.NS, "--wait")
        s.wait_for("the release gone", lambda: s.daemonset_gone(fleet), fleet, timeout=180)
        helm(
            fleet,
            tmp_path,
            "install",
            "kured",
            chart,
            f"--version={VERSION}",
            f"--ca-file={registry.ca_file}",
            *common,
            *pykured,
        )
        s.wait_for("pykured installed from the registry", lambda: s.ds_rolled_out(fleet, image), fleet)
        history = json.loads(helm(fleet, tmp_path, "history", "kured", "--namespace", s.NS, "-o", "json"))
        assert [h["chart"] for h in history] == [f"pykured-{VERSION}"]
        helm(fleet, tmp_path, "uninstall", "kured", "--namespace", s.NS, "--wait")
