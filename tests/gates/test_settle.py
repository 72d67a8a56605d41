import pytest

from pykured.alerts.client import PromQueryError
from pykured.gates import settle
from pykured.gates.settle import covering_pdbs, selector_matches
from pykured.kube.client import Obj


def pod(ns: str, name: str, **labels: str) -> Obj:
    return {"metadata": {"namespace": ns, "name": name, "labels": labels}}


def pdb(ns: str, name: str, selector: Obj | None) -> Obj:
    return {"metadata": {"namespace": ns, "name": name}, "spec": {"selector": selector}}


def test_selector_semantics() -> None:
    labels = {"app": "web", "tier": "front"}
    assert not selector_matches(None, labels)
    assert selector_matches({}, labels)
    assert selector_matches({"matchLabels": {"app": "web"}}, labels)
    assert not selector_matches({"matchLabels": {"app": "db"}}, labels)
    assert selector_matches(
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}, labels
    )
    assert not selector_matches(
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}, labels
    )
    assert selector_matches(
        {"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["a"]}]}, labels
    )
    assert selector_matches({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, labels)
    assert not selector_matches(
        {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}, labels
    )


def test_covering_pdbs_are_per_namespace() -> None:
    pods = [pod("a", "web-1", app="web"), pod("b", "db-1", app="db")]
    pdbs = [
        pdb("a", "web", {"matchLabels": {"app": "web"}}),
        pdb("b", "web", {"matchLabels": {"app": "web"}}),
        pdb("b", "db", {"matchLabels": {"app": "db"}}),
        pdb("b", "none", None),
    ]
    assert covering_pdbs(pods, pdbs) == ["a/web", "b/db"]


@pytest.mark.parametrize(
    ("kind", "result", "count"),
    [
        ("vector", [], 0),
        ("vector", None, 0),
        ("vector", [{"metric": {}, "value": [0, "1"]}] * 3, 3),
        ("matrix", [{"metric": {}, "values": []}], 1),
        ("scalar", [0, "0"], 0),
        ("scalar", [0, "2"], 1),
        ("string", [0, ""], 0),
        ("string", [0, "x"], 1),
    ],
    ids=["empty-vector", "null-vector", "three", "matrix", "scalar-zero", "scalar", "empty-string", "string"],
)
def test_result_count(kind: str, result: object, count: int) -> None:
    assert settle.result_count(kind, result) == count


@pytest.mark.parametrize(
    ("kind", "result"),
    [
        ("vector", {"a": 1}),
        ("scalar", [0]),
        ("scalar", []),
        ("scalar", [0, 1]),
        ("string", "x"),
        ("", []),
        ("x", []),
    ],
    ids=[
        "vector-object",
        "scalar-short",
        "scalar-empty",
        "scalar-number",
        "string-not-list",
        "untyped",
        "unknown",
    ],
)
def test_malformed_results_are_query_errors(kind: str, result: object) -> None:
    with pytest.raises(PromQueryError, match="malformed"):
        settle.result_count(kind, result)
