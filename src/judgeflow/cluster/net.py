"""This node's address and free ports: what a job publishes for the others to connect to."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path


def node_ip() -> str:
    """Address this node advertises: ``JUDGEFLOW_RAY_NODE_IP``, else the routable one.

    Ray replaces a loopback ``--node-ip-address`` with its own guess, so we make the same guess
    (the source address of a route to the outside; nothing is sent) and publish what Ray uses.
    """
    override = os.environ.get("JUDGEFLOW_RAY_NODE_IP")
    if override:
        return override
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("8.8.8.8", 80))
        ip: str = s.getsockname()[0]
        if not ip.startswith("127."):
            return ip
    with contextlib.suppress(OSError):
        ip = socket.gethostbyname(socket.gethostname())
        if not ip.startswith("127."):
            return ip
    return "127.0.0.1"


#: How long a port handed out by `free_ports` stays reserved on this host: long enough for the
#: program it is for (`ray start`, torchrun) to bind it.
PORT_HOLD_S = 120.0
# Reservations this process holds: (expiry, socket). Process-wide by nature, like the ports.
_reserved: list[tuple[float, socket.socket]] = []
_reserved_lock = threading.Lock()
_ABSTRACT_SOCKETS = sys.platform.startswith("linux")  # elsewhere: picks are not reserved


def free_ports(n: int, *, hold_s: float = PORT_HOLD_S) -> list[int]:
    """``n`` distinct ports free now, reserved on this host for ``hold_s``: below the kernel's
    ephemeral range where there is room (`_candidate`), so no outgoing connection takes one.

    A port is only picked here; the program it is for binds it later, and in between another
    pick could return it again: a second Ray cluster starting on the same node, or this job's
    own next call (the Ray head picks its ports in two calls). So each port handed out is also
    reserved: an abstract unix socket named after it is held for ``hold_s`` seconds (Linux; it
    disappears with the process, so nothing is left behind), and a pick whose name is taken is
    thrown back. Programs other than judgeflow's do not see the reservation; a collision with
    one of them is still possible (the Ray bootstrap retries a worker's `ray start`).
    """
    with _reserved_lock:
        _drop_expired()
        ports: list[int] = []
        low = _ephemeral_start()
        held: list[socket.socket] = []  # keep picks bound until done: distinct within the call
        try:
            while len(ports) < n:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(s)
                try:
                    s.bind(("", _candidate(low)))
                except OSError:
                    continue  # in use now
                port = s.getsockname()[1]
                if _ABSTRACT_SOCKETS:
                    reservation = _reserve(port)
                    if reservation is None:
                        continue  # another judgeflow process (or this one) holds it
                    _reserved.append((time.monotonic() + hold_s, reservation))
                ports.append(port)
        finally:
            for s in held:
                s.close()
        return ports


#: Where picks come from: above Ray's default worker ports (10002-19999, which its raylet hands
#: to workers) and below the kernel's ephemeral range, whose ports any outgoing connection may
#: take as its source port between our pick and the bind (a raylet failed that way: "Address
#: already in use"). 0 (the kernel's choice) where no such range is left.
PICK_FROM = 20000


def _candidate(low: int) -> int:
    """A port to try: random in [PICK_FROM, `low`, the ephemeral range's start), else 0."""
    return random.randrange(PICK_FROM, low) if low - PICK_FROM >= 1024 else 0


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _reserve(port: int) -> socket.socket | None:
    """The host-wide reservation of ``port``, or None when someone already holds it."""
    reservation = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        reservation.bind(f"\0judgeflow-port-{port}")
    except OSError:
        reservation.close()
        return None
    return reservation


def _drop_expired() -> None:
    now = time.monotonic()
    for entry in [e for e in _reserved if e[0] <= now]:
        entry[1].close()
        _reserved.remove(entry)


# --------------------------------------------------------------------------- processes
