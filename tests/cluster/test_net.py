"""free_ports: a port handed out is not handed out again on this host until its program bound it.

Without the reservation, 400 picks of the kernel's "any free port" repeat one (a birthday
collision among the ~14k ports bind(0) draws from) nearly always, in one process as between two:
two Ray clusters starting on one node at once could be given the same port.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from judgeflow.cluster import net

PICKS = 400

HOLDER = f"""
import sys
from judgeflow.cluster.net import free_ports
print(" ".join(map(str, (free_ports(1)[0] for _ in range({PICKS})))), flush=True)
sys.stdin.read()  # hold the reservations until the test closes our stdin
"""


@pytest.fixture(autouse=True)
def released() -> Iterator[None]:
    """Give back this test's reservations (sockets of this process) when it ends."""
    yield
    with net._reserved_lock:
        for _, reservation in net._reserved:
            reservation.close()
        net._reserved.clear()


def test_picks_of_one_process_never_repeat_while_reserved() -> None:
    ports = [net.free_ports(1)[0] for _ in range(PICKS)]  # one at a time, as the bootstrap does
    assert len(set(ports)) == PICKS


def test_picks_stay_out_of_rays_worker_ports_and_the_ephemeral_range() -> None:
    low = net._ephemeral_start()
    assert low - net.PICK_FROM >= 1024, "this machine's ephemeral range starts too low"
    ports = net.free_ports(50)
    assert all(net.PICK_FROM <= port < low for port in ports), ports
    assert len(set(ports)) == 50


def test_two_processes_never_get_the_same_port_and_a_dead_ones_ports_are_free() -> None:
    other = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None
        theirs = {int(p) for p in other.stdout.readline().split()}
        mine = {net.free_ports(1)[0] for _ in range(PICKS)}
        assert len(theirs) == len(mine) == PICKS
        assert not theirs & mine
    finally:
        other.communicate(input="", timeout=30)
    # Their reservations died with them: nothing to clean up, nothing stays reserved.
    reservation = net._reserve(min(theirs))
    assert reservation is not None
    reservation.close()
