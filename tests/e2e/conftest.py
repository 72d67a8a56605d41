"""The fixture of the tests that run on both API servers: ``api`` (tests/apis.py)."""

from __future__ import annotations

import pytest

from tests.apis import Api, FakeApi, RealApi


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.k8s)])
def api(request: pytest.FixtureRequest) -> Api:
    """``[fake]``: an in-memory API server of the test's own; ``[real]``: the session's kube-apiserver
    (``k8s``, started only for this param)."""
    if request.param == "fake":
        return FakeApi()
    return RealApi(request.getfixturevalue("k8s"))
