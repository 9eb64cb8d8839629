"""The docs' pictures, made from real runs: none is drawn by hand, and each says where it is from.

    .venv/bin/python scripts/docs_pictures.py --home DIR

DIR is a JUDGEFLOW_HOME in which these ran, in this order (about 10 minutes on 2 cores):

    judgeflow run grpo-pointwise --profile tiny                    # becomes champion
    judgeflow run grpo-pairwise --profile tiny
    judgeflow run grpo-pointwise --profile tiny --set data.seed=1  # kept as challenger

From the newest seed-0 run of each mode it copies the MLflow run's plots (training curves,
before → after, the pointwise confusion matrix) and draws the pairwise swap outcomes from the
evaluation's details; then it starts a Prefect server and an MLflow server on that home and
takes two screenshots in headless Chromium (`apt-get install chromium`): the pointwise flow run
with its artifacts, and the registry page of `judge-grpo-pointwise` with champion and
challenger. Every picture gets a footer with the run, commit and date, and
`docs/assets/pictures.json` records them with the sha256 of the inputs that decide what the
pictures show (the recipes, the tiny profile, the demo's sample data):
tests/test_docs.py fails when one of those changes and the pictures were not made again.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "docs" / "assets"
MANIFEST = ASSETS / "pictures.json"
#: What decides the demo's pictures: change one and they are stale.
INPUTS = (
    "src/judgeflow/recipes/grpo-pointwise.yaml",
    "src/judgeflow/recipes/grpo-pairwise.yaml",
    "src/judgeflow/recipes/profiles/tiny.yaml",
    "src/judgeflow/samples/tinyjudge_pointwise.jsonl",
    "src/judgeflow/samples/tinyjudge_pointwise_sft.jsonl",
    "src/judgeflow/samples/tinyjudge_pointwise_val.jsonl",
    "src/judgeflow/samples/tinyjudge_pairwise.jsonl",
    "src/judgeflow/samples/tinyjudge_pairwise_sft.jsonl",
    "src/judgeflow/samples/tinyjudge_pairwise_val.jsonl",
)
_SWAP_OUTCOMES = {
    "correct_both": "right in both orders",
    "wrong_both": "wrong in both orders",
    "always_A": "A in both orders",
    "always_B": "B in both orders",
    "format_failure": "a format failure",
}


def input_hashes(root: Path = REPO) -> dict[str, str]:
    """sha256 of each file in INPUTS."""
    return {p: hashlib.sha256((root / p).read_bytes()).hexdigest() for p in INPUTS}


def _runs(client: Any) -> list[Any]:
    experiment = client.get_experiment_by_name("judge-grpo")
    if experiment is None:
        raise SystemExit("no judge-grpo experiment in this home: run the demos first (--help)")
    return client.search_runs(
        [experiment.experiment_id],
        "attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
    )


def _seed(client: Any, run: Any) -> int:
    params = run.data.params
    return int(params.get("data.seed", "0"))


def _stamp(src: Path, dest: Path, caption: str) -> None:
    """`src` with a footer line of small grey text naming where it comes from."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.open(src).convert("RGB")
    font = ImageFont.load_default(size=13)
    footer = 24
    out = Image.new("RGB", (image.width, image.height + footer), "white")
    out.paste(image, (0, 0))
    ImageDraw.Draw(out).text((8, image.height + 5), caption, fill=(110, 110, 110), font=font)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp.png")
    out.save(tmp, optimize=True)
    tmp.replace(dest)


def _swap_outcomes(details: dict[str, dict[str, Any]], path: Path) -> None:
    """Pairwise: how each pair judged in both orders came out, per evaluated model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(details)
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    left = [0.0] * len(labels)
    colours = ["#2e7d32", "#c62828", "#1565c0", "#6a1b9a", "#9e9e9e"]
    for (key, name), colour in zip(_SWAP_OUTCOMES.items(), colours, strict=True):
        shares = [d["swaps"].get(key, 0) / max(d["swaps"]["pairs"], 1) for d in details.values()]
        ax.barh(labels, shares, left=left, color=colour, label=name)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("share of validation pairs, each judged in both A/B orders")
    ax.set_title("Pairwise judge: what each pair's two verdicts were")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=3, frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _server(command: list[str], url: str, env: dict[str, str], log: Path) -> Iterator[None]:
    """A server process until the block ends; waits until `url` answers."""
    with log.open("w") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            for _ in range(240):
                if proc.poll() is not None:
                    raise SystemExit(f"{command[0]} exited; see {log}")
                try:
                    urllib.request.urlopen(url, timeout=2)
                    break
                except OSError:
                    time.sleep(0.5)
            else:
                raise SystemExit(f"{url} did not answer in 2 minutes; see {log}")
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _screenshot(url: str, dest: Path, *, wait_ms: int = 12000, height: int = 960) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("no Chromium: apt-get install chromium")
    with tempfile.TemporaryDirectory(dir=dest.parent) as profile:
        subprocess.run(
            [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={profile}", f"--window-size=1440,{height}",
             f"--virtual-time-budget={wait_ms}", f"--screenshot={dest}", url],
            check=True, capture_output=True, timeout=180,
        )  # fmt: skip


def _artifact_id(api: str, flow_run: str, key: str) -> str:
    """The id of the flow run's newest artifact named `key` (Prefect's REST API)."""
    query = {"artifacts": {"key": {"any_": [key]}, "flow_run_id": {"any_": [flow_run]}},
             "sort": "CREATED_DESC", "limit": 1}  # fmt: skip
    request = urllib.request.Request(
        f"{api}/api/artifacts/filter",
        data=json.dumps(query).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        found = json.load(response)
    if not found:
        raise SystemExit(f"flow run {flow_run} has no {key!r} artifact")
    return str(found[0]["id"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="the JUDGEFLOW_HOME of the runs")
    parser.add_argument("--no-screenshots", action="store_true", help="only the plots")
    args = parser.parse_args(argv)
    home = args.home.resolve()
    tracking = f"sqlite:///{home / 'mlflow.db'}"

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracking)
    runs = _runs(client)
    newest: dict[str, Any] = {}
    for run in runs:
        mode = run.data.tags.get("judgeflow.mode")
        if mode in ("pointwise", "pairwise") and _seed(client, run) == 0 and mode not in newest:
            newest[mode] = run
    if set(newest) != {"pointwise", "pairwise"}:
        raise SystemExit(f"need a seed-0 run of each mode in {home}; found {sorted(newest)}")

    today = dt.date.today().isoformat()
    pictures: dict[str, dict[str, Any]] = {}

    def record(name: str, run: Any, what: str, made: Path) -> None:
        commit = run.data.tags.get("judgeflow.git_commit", "unknown")[:10]
        mode = run.data.tags["judgeflow.mode"]
        caption = (f"judgeflow run grpo-{mode} --profile tiny · MLflow run {run.info.run_id[:8]}"
                   f" · commit {commit} · {today}")  # fmt: skip
        _stamp(made, ASSETS / name, caption)
        pictures[name] = {"what": what, "run_id": run.info.run_id, "mode": mode,
                          "commit": commit, "date": today}  # fmt: skip
        print(f"{ASSETS / name}: {what}")

    with tempfile.TemporaryDirectory() as work:
        tmp = Path(work)
        for mode, run in newest.items():
            plots = {"training_curves.png": "training curves (SFT loss, GRPO reward, format failures)",
                     "before_after.png": "the judge before and after, per metric"}  # fmt: skip
            if mode == "pointwise":
                plots["after_confusion.png"] = "confusion matrix and calibration after GRPO"
            for plot, what in plots.items():
                local = Path(client.download_artifacts(run.info.run_id, f"plots/{plot}", work))
                record(f"{mode}_{plot}", run, what, local)
            if mode == "pairwise":
                details = {}
                for label in ("before", "sft", "after"):
                    path = client.download_artifacts(
                        run.info.run_id, f"eval/{label}_details.json", work
                    )
                    details[label] = json.loads(Path(path).read_text())
                _swap_outcomes(details, tmp / "swaps.png")
                record(
                    "pairwise_swap_outcomes.png", run, "pairwise swap outcomes", tmp / "swaps.png"
                )

        if not args.no_screenshots:
            env = {**os.environ, "PREFECT_HOME": str(home / "prefect"), "JUDGEFLOW_HOME": str(home)}
            env.pop("PREFECT_API_URL", None)
            bin_dir = Path(sys.executable).parent
            prefect_port, mlflow_port = _free_port(), _free_port()
            run = newest["pointwise"]
            flow_run = run.data.tags["prefect.flow_run_id"]
            prefect = [str(bin_dir / "prefect"), "server", "start", "--host", "127.0.0.1",
                       "--port", str(prefect_port)]  # fmt: skip
            # The UI asks the API at the URL it is given, 127.0.0.1:4200 by default.
            env["PREFECT_UI_API_URL"] = f"http://127.0.0.1:{prefect_port}/api"
            with _server(
                prefect, f"http://127.0.0.1:{prefect_port}/api/health", env, tmp / "prefect.log"
            ):
                api = f"http://127.0.0.1:{prefect_port}"
                _screenshot(f"{api}/runs/flow-run/{flow_run}", tmp / "prefect.png", wait_ms=25000)
                summary = _artifact_id(api, flow_run, "run-summary")
                _screenshot(f"{api}/artifacts/artifact/{summary}", tmp / "summary.png",
                            wait_ms=25000, height=760)  # fmt: skip
            record(
                "prefect_flow_run.png",
                run,
                "the flow run in Prefect's UI, its artifacts",
                tmp / "prefect.png",
            )
            record(
                "prefect_run_summary.png",
                run,
                "the flow run's run-summary artifact in Prefect's UI",
                tmp / "summary.png",
            )
            server = [str(bin_dir / "mlflow"), "server", "--backend-store-uri", tracking,
                      "--host", "127.0.0.1", "--port", str(mlflow_port)]  # fmt: skip
            with _server(server, f"http://127.0.0.1:{mlflow_port}/health", env, tmp / "mlflow.log"):
                _screenshot(f"http://127.0.0.1:{mlflow_port}/#/models/judge-grpo-pointwise",
                            tmp / "mlflow.png", height=1800)  # fmt: skip
            record(
                "mlflow_registry.png",
                run,
                "the registry: champion and challenger",
                tmp / "mlflow.png",
            )

    old = json.loads(MANIFEST.read_text())["pictures"] if MANIFEST.exists() else {}
    manifest = {
        "made_by": "scripts/docs_pictures.py",
        "inputs_sha256": input_hashes(),
        "pictures": {**old, **pictures},
    }
    MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    print(f"{MANIFEST}: {len(manifest['pictures'])} pictures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
