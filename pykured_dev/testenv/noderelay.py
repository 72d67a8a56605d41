"""A real node's network namespace, and the relay that lets the node reach the test API server.

Run as ``python -m pykured_dev.testenv.noderelay --index N --target-port PORT --ready FILE``: the process
makes a new network namespace (``unshare(CLONE_NEWNET)``) and sets it up as the node's network: ``lo`` with
the ``kubernetes`` Service's address (10.0.0.1), and a veth pair whose ``eth0`` end carries the node's
address (172.30.0.10+N/24; the kubelet refuses a loopback node IP). It listens on 10.0.0.1:443 *inside* that
namespace, then returns to the machine's network namespace and forwards every connection to the API server on
the machine's 127.0.0.1:PORT. Kubelets and pods (through the node's bridge) reach the API server at the
Service address, whose certificate carries 10.0.0.1. Nothing is changed outside the new namespace.

With ``--registry-port-file FILE`` it also listens on the registry's address 10.0.0.2:443 inside the
namespace (on ``lo``) and forwards each connection to the machine's 127.0.0.1:<the port FILE holds when the
connection comes> (none: the connection is closed), so a registry started after the nodes
(:class:`~pykured_dev.testenv.registry.Registry`) is reachable from their containerd at one fixed address.

The node's processes enter the namespace through ``/proc/<pid>/fd/<fd>`` (written to the ready file as
``<pid> <fd>``), which stays valid while this process runs; the namespace ends with its last process.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import socket
import subprocess
import sys
import threading

CLONE_NEWNET = 0x40000000
SERVICE_IP = "10.0.0.1"
SERVICE_PORT = 443
REGISTRY_IP = "10.0.0.2"
"""Where a node reaches the test registry (``--registry-port-file``), at port 443."""
NODE_SUBNET = "172.30.0"


def node_ip(index: int) -> str:
    """The node's address in its own network namespace."""
    return f"{NODE_SUBNET}.{10 + index}"


def _libc_call(name: str, *args: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _registry_port(path: str) -> int:
    """The registry's port on the machine, from ``path`` (0 when absent or not a port)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(16).strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else 0


def _serve(conn: socket.socket, port: int) -> None:
    if port == 0:
        conn.close()
        return
    try:
        upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        conn.close()
        return
    upstream.settimeout(None)
    back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
    back.start()
    _pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def _accept_registry(listener: socket.socket, port_file: str) -> None:
    while True:
        conn, _ = listener.accept()
        port = _registry_port(port_file)
        threading.Thread(target=_serve, args=(conn, port), daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="noderelay")
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--target-port", type=int, required=True)
    parser.add_argument("--ready", required=True)
    parser.add_argument("--registry-port-file", default="")
    args = parser.parse_args(argv)
    machine = os.open("/proc/self/ns/net", os.O_RDONLY)
    _libc_call("unshare", CLONE_NEWNET)
    _ip("link", "set", "lo", "up")
    _ip("addr", "add", f"{SERVICE_IP}/32", "dev", "lo")
    _ip("link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
    _ip("addr", "add", f"{node_ip(args.index)}/24", "dev", "eth0")
    _ip("link", "set", "eth1", "up")
    _ip("link", "set", "eth0", "up")
    _ip("route", "add", "default", "dev", "eth0")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((SERVICE_IP, SERVICE_PORT))
    listener.listen(64)
    registry: socket.socket | None = None
    if args.registry_port_file:
        _ip("addr", "add", f"{REGISTRY_IP}/32", "dev", "lo")
        registry = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        registry.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        registry.bind((REGISTRY_IP, SERVICE_PORT))
        registry.listen(64)
    node_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
    _libc_call("setns", machine, CLONE_NEWNET)  # connections upstream leave from the machine's namespace
    os.close(machine)
    tmp = f"{args.ready}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()} {node_ns}\n")
    os.replace(tmp, args.ready)
    if registry is not None:
        threading.Thread(
            target=_accept_registry, args=(registry, args.registry_port_file), daemon=True
        ).start()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve, args=(conn, args.target_port), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
