"""The settings summary kured logs at startup, line for line and in kured's order.

kured 1.23 ``main()`` logs, in this order: ``Kubernetes Reboot Daemon: <version>``, ``Node ID: X``, a warning
when the pre- and post-reboot label keys differ, ``PreferNoSchedule taint: X``, ``Blocking Pod Selectors:
[…]`` (Go ``%v`` of a slice), ``Reboot period 1h0m0s``, ``Concurrency: N``, optionally ``Will annotate nodes
during kured reboot operations``, ``Reboot schedule: <window>``, ``Reboot method: …`` with the command or
signal, the sentinel checker, ``Lock Annotation: <ns>/<ds>:<annotation>``, and the lock TTL and release delay
lines. Operators grep these, so the text is kept. pykured adds ``Lock backend: lease`` only when the backend
is not kured's DaemonSet annotation, and a ``Zincati marker file`` line for ``--reboot-method=zincati``.
"""

from __future__ import annotations

import logging

from pykured.config.settings import Config


def go_slice(items: tuple[str, ...] | list[str]) -> str:
    """Go ``%v`` of a ``[]string``: ``[a b]``."""
    return "[" + " ".join(items) + "]"


def startup_records(cfg: Config, version: str) -> list[tuple[int, str]]:
    """``(logging level, message)`` pairs in kured's order, including the label-keys warning."""
    records: list[tuple[int, str]] = [
        (logging.INFO, f"Kubernetes Reboot Daemon: {version}"),
        (logging.INFO, f"Node ID: {cfg.node_id}"),
    ]
    if sorted(cfg.pre_reboot_labels) != sorted(cfg.post_reboot_labels):
        records.append(
            (
                logging.WARNING,
                "pre-reboot-node-labels keys and post-reboot-node-labels keys do not match, "
                "resulting in unexpected behaviour",
            )
        )
    info = [
        f"PreferNoSchedule taint: {cfg.prefer_no_schedule_taint}",
        f"Blocking Pod Selectors: {go_slice(cfg.blocking_pod_selector)}",
        f"Reboot period {cfg.period}",
        f"Concurrency: {cfg.concurrency}",
    ]
    if cfg.annotate_nodes:
        info.append("Will annotate nodes during kured reboot operations")
    info += [f"Reboot schedule: {cfg.time_window}", f"Reboot method: {cfg.reboot_method}"]
    if cfg.reboot_method == "command":
        info.append(f"Reboot command: {go_slice(cfg.reboot_command_argv)}")
    elif cfg.reboot_method == "signal":
        info.append(f"Reboot signal: {cfg.reboot_signal}")
    else:
        info.append(f"Zincati marker file: {cfg.zincati_marker_file}")
    if cfg.reboot_sentinel_command:
        info.append(f"Sentinel checker is (privileged) user provided command: {cfg.reboot_sentinel_command}")
    else:
        info.append(f"Sentinel checker is (unprivileged) testing for the presence of: {cfg.reboot_sentinel}")
    info.append(f"Lock Annotation: {cfg.ds_namespace}/{cfg.ds_name}:{cfg.lock_annotation}")
    if cfg.lock_backend != "daemonset":
        info.append(f"Lock backend: {cfg.lock_backend}")
    if cfg.lock_ttl.ns > 0:
        info.append(f"Lock TTL set, lock will expire after: {cfg.lock_ttl}")
    else:
        info.append("Lock TTL not set, lock will remain until being released")
    if cfg.lock_release_delay.ns > 0:
        info.append(f"Lock release delay set, lock release will be delayed by: {cfg.lock_release_delay}")
    else:
        info.append("Lock release delay not set, lock will be released immediately after rebooting")
    records += [(logging.INFO, line) for line in info]
    return records


def startup_lines(cfg: Config, version: str) -> list[str]:
    """The startup messages in kured's order (warnings included, without their level)."""
    return [message for _, message in startup_records(cfg, version)]
