"""Tests for pykured.alerts.client: what a query's target holds and shows, Go's float text (the requests on
the wire: ``tests/blockers/test_prometheus.py``, ``tests/alertmanager/test_api.py``)."""

from __future__ import annotations

import pytest

from pykured.alerts.client import go_float, query_endpoint, shown_url
from tests.blockers.test_prometheus import basic


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://alice:pw@prom:9090/prometheus?x=1", "http://prom:9090/prometheus"),
        ("http://prom:9090", "http://prom:9090"),
        ("https://a:b@c@prom", "https://prom"),
        ("http://[::1", "<invalid URL>"),
    ],
    ids=["userinfo-and-query-dropped", "plain", "at-in-password", "invalid"],
)
def test_shown_url(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_the_query_target_holds_no_userinfo_and_does_not_show_the_auth() -> None:
    target = query_endpoint("http://alice:pw@prom:9090/p/")
    assert target.endpoint == "http://prom:9090/p/api/v1/query"
    assert target.authorization == basic("alice:pw")
    assert "pw" not in repr(target)
    assert "cHc" not in repr(target)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1767225600.0, "1767225600"),
        (1767225600.5, "1767225600.5"),
        (1.5, "1.5"),
        (1e-7, "0.0000001"),
        (0.0, "0"),
    ],
    ids=["whole", "half", "small", "tiny-no-exponent", "zero"],
)
def test_go_float(value: float, text: str) -> None:
    assert go_float(value) == text
