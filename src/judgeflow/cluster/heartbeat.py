"""Which nodes of an allocation are still there: worker ranks beat, rank 0 watches.

A node that dies or hangs in the middle of a multi-node stage must not leave the stage waiting
until the time limit with the whole allocation held (NeMo-RL #1019). Every worker rank rewrites
`<rendezvous>/alive-rank<r>` every few seconds while it serves the Ray cluster; rank 0 watches
those files and, when one has not changed for `lost_after_s` (by rank 0's own clock, so clock
skew between nodes does not matter), stops the driver: the stage fails in seconds, retryably,
and the job ends, which releases the allocation.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["NODE_LOST_EXIT", "READINESS_PROBE", "Heartbeat", "Watchdog", "beat_file"]

#: The stage command's exit code when a node was lost (EX_TEMPFAIL: try again).
NODE_LOST_EXIT = 75
BEAT_EVERY_S = 2.0

#: Rank 0's check that all nodes joined: `python -c READINESS_PROBE ADDRESS N TIMEOUT`. It runs
#: in a short-lived interpreter so the bootstrap process never loads Ray's auth config.
READINESS_PROBE = """
import socket, sys, time
from ray._raylet import GcsClient
from ray.core.generated.gcs_pb2 import GcsNodeInfo
address, want, deadline = sys.argv[1], int(sys.argv[2]), time.time() + float(sys.argv[3])
host, port = address.rsplit(":", 1)
client, alive, error = None, 0, "no answer"
while time.time() < deadline:
    try:
        if client is None:  # GcsClient blocks for seconds if GCS is not listening yet
            socket.create_connection((host, int(port)), timeout=1).close()
            client = GcsClient(address=address)
        nodes = client.get_all_node_info(timeout=5).values()
        alive = sum(n.state == GcsNodeInfo.GcsNodeState.ALIVE for n in nodes)
        error = "none"
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    if alive >= want:
        sys.exit(0)
    time.sleep(0.2)
print(f"probe: {alive}/{want} nodes alive; last error: {error}", file=sys.stderr, flush=True)
sys.exit(3)
"""


def beat_file(rendezvous_dir: Path, rank: int) -> Path:
    return rendezvous_dir / f"alive-rank{rank}"


class Heartbeat:
    """A worker rank's proof of life: call `beat()` often; it writes at most every few seconds."""

    def __init__(self, rendezvous_dir: Path, rank: int) -> None:
        self.path = beat_file(rendezvous_dir, rank)
        self._count = 0
        self._next = 0.0

    def beat(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._count += 1
        self._next = now + BEAT_EVERY_S
        with contextlib.suppress(OSError):  # a shared filesystem hiccup is not a lost node
            self.path.write_text(str(self._count))


class Watchdog(threading.Thread):
    """Watches heartbeat files (by key: the other ranks, or the flow following a job) and calls
    `on_lost(key, silent_s)` once, for the first that stays unchanged `lost_after_s`."""

    def __init__(
        self,
        rendezvous_dir: Path,
        ranks: range,
        *,
        lost_after_s: float,
        on_lost: Callable[[int, float], None],
        poll_s: float = 1.0,
        files: dict[int, Path] | None = None,
    ) -> None:
        super().__init__(name="heartbeat-watchdog", daemon=True)
        self.files = (
            files if files is not None else {r: beat_file(rendezvous_dir, r) for r in ranks}
        )
        self.lost_after_s, self.on_lost, self.poll_s = lost_after_s, on_lost, poll_s
        self.lost: int | None = None
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        start = time.monotonic()
        seen: dict[int, tuple[str, float]] = {key: ("", start) for key in self.files}
        while not self._halt.wait(self.poll_s):
            now = time.monotonic()
            for key, (last, since) in seen.items():
                try:
                    current = self.files[key].read_text()
                except OSError:
                    current = last
                if current != last:
                    seen[key] = (current, now)
                elif now - since > self.lost_after_s:
                    self.lost = key
                    self.on_lost(key, now - since)
                    return
