"""A real node's network namespace, and the relay that lets the node reach the test API server.

Run as ``python -m pykured_dev.testenv.noderelay --index N --target-port PORT --ready FILE``: the process
makes a new network namespace (``unshare(CLONE_NEWNET)``) and sets it up as the node's network: ``lo`` with
the ``kubernetes`` Service's address (10.0.0.1), and a veth pair whose ``eth0`` end carries the node's
address (172.30.0.10+N/24; the kubelet refuses a loopback node IP). It listens on 10.0.0.1:443 *inside* that
namespace, then returns to the machine's network namespace and forwards every connection to the API server on
the machine's 127.0.0.1:PORT. Kubelets and pods (through the node's bridge) reach the API server at the
Service address, whose certificate carries 10.0.0.1. Nothing is changed outside the new namespace.

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


def _serve(conn: socket.socket, port: int) -> None:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="noderelay")
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--target-port", type=int, required=True)
    parser.add_argument("--ready", required=True)
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
    node_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
    _libc_call("setns", machine, CLONE_NEWNET)  # connections upstream leave from the machine's namespace
    os.close(machine)
    tmp = f"{args.ready}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()} {node_ns}\n")
    os.replace(tmp, args.ready)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve, args=(conn, args.target_port), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
