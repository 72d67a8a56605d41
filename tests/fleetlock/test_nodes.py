"""Who may speak for a node: a Node's addresses, the central index's check, the node-local one."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykured.fleetlock import nodes
from tests.fakes import FakeKube

MACHINE = "0123456789abcdef0123456789abcdef"


def node_with(*addresses: object) -> dict[str, object]:
    return {"status": {"addresses": list(addresses)}}


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("10.0.0.5", "10.0.0.5"),
        ("::ffff:10.0.0.5", "10.0.0.5"),
        ("[fd00::1]", "fd00::1"),
        ("fe80::1%eth0", "fe80::1"),
        ("node-a", None),
        ("", None),
    ],
    ids=["ipv4", "ipv4-mapped", "bracketed", "zone", "name", "empty"],
)
def test_normalize_address(text: str, normal: str | None) -> None:
    address = nodes.normalize_address(text)
    assert (str(address) if address is not None else None) == normal


def test_addresses_of_keeps_the_ip_addresses_only() -> None:
    node = node_with(
        {"type": "InternalIP", "address": "10.0.0.5"},
        {"type": "ExternalIP", "address": "2001:db8::5"},
        {"type": "Hostname", "address": "node-a"},
        {"type": "InternalIP", "address": 5},
        "garbage",
        {"type": "InternalIP"},
    )
    assert {str(a) for a in nodes.addresses_of(node)} == {"10.0.0.5", "2001:db8::5"}


@pytest.mark.parametrize(
    "node",
    [{}, {"status": None}, {"status": {"addresses": "10.0.0.5"}}, {"status": []}],
    ids=["no-status", "null-status", "not-a-list", "status-not-object"],
)
def test_addresses_of_a_malformed_node_is_empty(node: dict[str, object]) -> None:
    assert nodes.addresses_of(node) == frozenset()


def test_the_central_index_admits_only_the_nodes_own_addresses() -> None:
    kube = FakeKube()
    for name, address in (("a", "10.0.0.1"), ("b", "10.0.0.2")):
        kube.add_node(name)["status"]["addresses"] = [{"type": "InternalIP", "address": address}]
    index = nodes.NodeIndex(kube, refresh_interval=3600.0)
    index.relist()
    assert index.admits("a", "10.0.0.1")
    assert index.admits("a", "::ffff:10.0.0.1")
    assert not index.admits("a", "10.0.0.2")
    assert not index.admits("gone", "10.0.0.1")
    assert not index.admits("a", "not-an-address")


def test_the_central_index_relists_once_when_an_address_is_new() -> None:
    kube = FakeKube()
    kube.add_node("a")["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.0.1"}]
    index = nodes.NodeIndex(kube, refresh_interval=0.0)
    index.relist()
    kube.nodes["a"]["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.0.9"}]
    assert index.admits("a", "10.0.0.9")
    assert not index.admits("a", "10.0.0.1")


def test_node_local_admits_loopback_callers_for_its_node_only(tmp_path: Path) -> None:
    machine = tmp_path / "machine-id"
    machine.write_text(MACHINE + "\n")
    local = nodes.LocalResolver(node="a", machine_id_file=str(machine))
    assert local.admits("a", "127.0.0.1")
    assert local.admits("a", "::1")
    assert not local.admits("a", "10.0.0.1")
    assert not local.admits("b", "127.0.0.1")
