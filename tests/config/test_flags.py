"""The flag table and the pflag-style --help text."""

from __future__ import annotations

import re

import pytest

from pykured.config.flags import BY_NAME, FLAGS, KURED_FLAGS, Kind, usage


def test_usage_lists_every_flag_sorted_with_type_and_help() -> None:
    text = usage()
    lines = text.splitlines()
    assert lines[0] == "Usage of kured:"
    names = [re.match(r"^      --([a-z-]+)", line).group(1) for line in lines[1:]]  # type: ignore[union-attr]
    assert names == sorted(spec.name for spec in FLAGS)
    help_column = {line.index(BY_NAME[name].help) for line, name in zip(lines[1:], names, strict=True)}
    assert len(help_column) == 1


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("force-reboot", "      --force-reboot   "),
        ("period", "      --period duration   "),
        ("reboot-days", "      --reboot-days strings   "),
        ("blocking-pod-selector", "      --blocking-pod-selector stringArray   "),
        ("alert-filter-regexp", "      --alert-filter-regexp regexp   "),
        ("metrics-port", "      --metrics-port int   "),
    ],
    ids=lambda v: v if "--" not in v else None,
)
def test_usage_type_names(name: str, line: str) -> None:
    assert any(row.startswith(line.rstrip()) for row in usage().splitlines())


@pytest.mark.parametrize(
    ("name", "suffix"),
    [
        ("period", "(default 1h0m0s)"),
        ("ds-name", '(default "kured")'),
        ("metrics-port", "(default 8080)"),
        ("drain-grace-period", "(default -1)"),
        ("reboot-days", "(default [su,mo,tu,we,th,fr,sa])"),
        ("events", "(default true)"),
        ("reboot-signal", "(default 39)"),
    ],
    ids=lambda v: v if "(" not in v else None,
)
def test_usage_shows_non_zero_defaults(name: str, suffix: str) -> None:
    line = next(row for row in usage().splitlines() if row.startswith(f"      --{name} "))
    assert line.endswith(suffix)


@pytest.mark.parametrize("name", ["force-reboot", "node-id", "drain-delay", "concurrency-x"], ids=str)
def test_usage_hides_zero_defaults(name: str) -> None:
    rows = [row for row in usage().splitlines() if row.startswith(f"      --{name} ")]
    assert all("(default " not in row for row in rows)
    assert bool(rows) is (name in BY_NAME)


def test_usage_prog_name() -> None:
    assert usage("/usr/bin/kured").startswith("Usage of /usr/bin/kured:\n")


def test_env_var_and_field_names() -> None:
    assert BY_NAME["lock-release-delay"].env_var == "KURED_LOCK_RELEASE_DELAY"
    assert BY_NAME["alert-filter-match-only"].field == "alert_filter_match_only"
    assert len({spec.env_var for spec in FLAGS}) == len(FLAGS)


def test_kured_flag_kinds() -> None:
    kinds = {spec.name: spec.kind for spec in KURED_FLAGS}
    assert kinds["blocking-pod-selector"] is Kind.STRING_ARRAY
    assert [n for n, k in kinds.items() if k is Kind.STRING_SLICE] == [
        "reboot-days",
        "pre-reboot-node-labels",
        "post-reboot-node-labels",
    ]
    assert not any(spec.extension for spec in KURED_FLAGS)


def test_the_lock_backend_flag_takes_its_values_default_and_help_from_the_lock_registry() -> None:
    spec = BY_NAME["lock-backend"]
    assert spec.default == "daemonset"
    assert spec.help == (
        "pykured: where the lock lives: daemonset (kured's annotation) or lease (coordination.k8s.io Leases "
        "<lease-prefix>-<slot>)"
    )
