"""The environment that makes a command launched once per node start torchrun for a multi-node
run (`llamafactory-cli train` reads it): rendezvous address, node rank, log folder. It lives
with the cluster, which knows the allocation; engines read it from here."""

from __future__ import annotations


def torchrun_env(
    nnodes: int,
    node_rank: int,
    master_addr: str,
    master_port: int,
    nproc_per_node: int | None = None,
    log_dir: str | None = None,
) -> dict[str, str]:
    """Environment that makes `llamafactory-cli train` launch torchrun for one node of a
    multi-node run (run it once per node, e.g. with `srun --ntasks-per-node=1`). `log_dir` is
    torchrun's `--log-dir` (`PET_LOG_DIR`); without it torchrun leaves a `torchelastic_*`
    folder in the node's /tmp on every run."""
    if nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError(f"need 0 <= node_rank < nnodes, got {node_rank} / {nnodes}")
    env = {
        "FORCE_TORCHRUN": "1",
        "NNODES": str(nnodes),
        "NODE_RANK": str(node_rank),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
    }
    if nproc_per_node is not None:
        env["NPROC_PER_NODE"] = str(nproc_per_node)
    if log_dir is not None:
        env["PET_LOG_DIR"] = log_dir
    return env
