"""Two Slurm jobs start Ray clusters on the same node at the same time (real Slurm, real Ray).

Each job's driver waits until the other job's driver is up too, then checks that it sees only
its own cluster: one node, its own CPUs and per-rank resource, its own temp dir, and that work
it submits runs there. The ports the two clusters use must not overlap.
"""

from __future__ import annotations

import sys
import textwrap
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from judgeflow.cluster import JobSpec, submit, watch
from judgeflow.config import ClusterConfig

if TYPE_CHECKING:
    from conftest import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(300)]

DRIVER = textwrap.dedent(
    """
    import json, os, pathlib, sys, time
    import ray

    ray.init()
    mine, other = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    mine.touch()  # this cluster is up; wait until the other one is up as well
    deadline = time.monotonic() + 150
    while not other.exists():
        assert time.monotonic() < deadline, "the other job's cluster never came up"
        time.sleep(0.2)

    @ray.remote(num_cpus=1)
    def where():
        return ray.get_runtime_context().get_node_id()

    alive = [n for n in ray.nodes() if n["Alive"]]
    result = {
        "alive": len(alive),
        "node_id": alive[0]["NodeID"],
        "ran_on": ray.get(where.remote()),
        "resources": {k: v for k, v in ray.cluster_resources().items()
                      if not k.startswith(("node:", "memory", "object_store"))},
        "gcs": ray.get_runtime_context().gcs_address,
        "ports": [alive[0][k] for k in ("NodeManagerPort", "ObjectManagerPort",
                                         "MetricsExportPort", "RuntimeEnvAgentPort")],
        "socket": alive[0]["ObjectStoreSocketName"],
    }
    mine.with_suffix(".checked").touch()  # stay up until the other job has checked too
    while not other.with_suffix(".checked").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    path = pathlib.Path(os.environ["JUDGEFLOW_STAGE_DIR"], "result.json")
    path.write_text(json.dumps(result))
    """
)


def _cluster() -> ClusterConfig:
    return ClusterConfig(
        backend="slurm", partition="debug", nodes=1, gpus_per_node=0, timeout_min=10,
        ray_num_cpus=1, ray_object_store_mb=80, poll_s=1.0, extra_sbatch=["--nodelist=node1"],
    )  # fmt: skip


def test_two_jobs_on_one_node_each_see_only_their_own_ray_cluster(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    marks = [tmp_path / "a.up", tmp_path / "b.up"]
    specs = [
        JobSpec(
            name=f"ray-{name}-{uuid.uuid4().hex[:6]}",
            command=[sys.executable, str(script), str(mine), str(other)],
            workdir=str(tmp_path / name),
            ray_num_cpus=1,
            ray_object_store_mb=80,
        )
        for name, mine, other in (("a", *marks), ("b", *reversed(marks)))
    ]
    handles = [submit(spec, _cluster()) for spec in specs]
    results: dict[int, Any] = {}

    def follow(i: int) -> None:
        try:
            results[i] = watch(handles[i], on_log=lambda _line: None, poll_s=1.0)
        except BaseException as exc:  # reported below
            results[i] = exc

    threads = [threading.Thread(target=follow, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=280)
    assert not any(isinstance(r, BaseException) for r in results.values()), results
    a, b = results[0], results[1]

    for handle in handles:
        assert handle.final_state().value == "COMPLETED"
        nodes = slurm_cluster.run("sacct", "-X", "-n", "-P", "-j", handle.job_id, "-o", "NodeList")
        assert nodes.strip() == "node1"
    for result, handle in ((a, handles[0]), (b, handles[1])):
        assert result["alive"] == 1  # not the other job's node
        assert result["ran_on"] == result["node_id"]
        assert result["resources"] == {"CPU": 1.0, "jf_node_0": 1.0}
        assert f"/jf-ray-{handle.job_id}-0-" in result["socket"]  # its own temp dir
    assert a["node_id"] != b["node_id"] and a["gcs"] != b["gcs"]
    ports_a = {int(a["gcs"].rsplit(":", 1)[1]), *a["ports"]}
    ports_b = {int(b["gcs"].rsplit(":", 1)[1]), *b["ports"]}
    assert len(ports_a) == len(ports_b) == 5 and not ports_a & ports_b
