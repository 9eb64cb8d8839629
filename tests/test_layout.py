"""The layout docs/development/layout.md promises: a short package root, no import cycles, a
cluster layer that knows no engine, and a wheel that installs `judgeflow` alone."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
PACKAGE = SRC / "judgeflow"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module → judgeflow modules it imports: every import, at the top, in a function or under
    TYPE_CHECKING (a cycle through any of them is a cycle a reader has to untangle)."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(r for a in node.names if (r := resolve(a.name)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, *([base] if base else [])])
                for alias in node.names:
                    target = resolve(f"{base}.{alias.name}")
                    found.add(target if target and target != name else resolve(base) or "")
        graph[name] = {t for t in found if t and t != name and t.startswith("judgeflow")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_the_graph_sees_a_cycle_and_a_function_level_import(tmp_path: Path) -> None:
    graph = {"judgeflow.a": {"judgeflow.b"}, "judgeflow.b": {"judgeflow.a"}, "judgeflow.c": set()}
    assert cycles(graph) == [["judgeflow.a", "judgeflow.b"]]
    # the real graph holds a lazy import (stage.py reads the queue inside a function)
    assert "judgeflow.cluster.queue" in import_graph()["judgeflow.cluster.job"]


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_at_most_nine_modules_loose_at_the_package_root() -> None:
    loose = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert len(loose) <= 9, loose


def test_every_package_says_what_it_holds() -> None:
    for init in PACKAGE.rglob("__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} has no docstring"


#: The core's layers, lowest first: a module imports from its own layer or one below, never above.
LAYERS = [
    {"judgeflow", "home", "log_setup", "modes", "parent_death", "rewards"},
    {"data"},
    {"config"},
    {"storage", "cluster"},
    {"retries", "caching", "tracking"},
    {"engines", "evaluation", "inference"},
    {"registry", "console"},
    {"stages", "dev", "samples"},
    {"cli", "__main__"},
]


def test_imports_go_down_the_layers() -> None:
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}

    def group(module: str) -> str:
        return module.split(".")[1] if "." in module else module

    graph = import_graph()
    groups = {group(m) for m in graph}
    assert groups <= set(layer), f"not in LAYERS: {sorted(groups - set(layer))}"
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if layer[group(target)] > layer[group(module)]
    )
    assert upward == []


def test_the_cluster_layer_imports_no_engine() -> None:
    """cluster/ runs any command; the engines build on it, never the other way round."""
    reached = {
        (module, target)
        for module, targets in import_graph().items()
        if module.startswith("judgeflow.cluster")
        for target in targets
        if target.startswith(("judgeflow.engines", "judgeflow.stages"))
    }
    assert reached == set()


def test_the_core_imports_no_prefect_and_no_flows_or_tasks() -> None:
    """Only `judgeflow run` (cli/recipes.py) starts a flow: it imports flows/ by name."""
    for path in PACKAGE.rglob("*.py"):
        allowed = ("flows",) if path == PACKAGE / "cli" / "recipes.py" else ()
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in names:
                top = name.split(".")[0]
                assert top in allowed or top not in ("prefect", "prefect_ray", "flows", "tasks"), (
                    f"{path.relative_to(REPO)} imports {name}"
                )


@pytest.mark.slow
def test_the_wheel_installs_judgeflow_alone(tmp_path: Path) -> None:
    """flows/ and tasks/ stay in the checkout: generic top-level names in site-packages would
    clash with any other project's."""
    uv = Path(sys.executable).parent / "uv"
    subprocess.run(
        [str(uv), "build", "--wheel", "--out-dir", str(tmp_path), "--quiet", str(REPO)],
        check=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("judgeflow-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist()}
    assert {t for t in top if not t.endswith(".dist-info")} == {"judgeflow"}
    assert any(name.startswith("judgeflow/recipes/") for name in archive.namelist())


def test_cluster_speaks_of_jobs_and_stages_of_the_pipeline() -> None:
    """A *job* is a stage running as a process (judgeflow.cluster); a *stage* is a pipeline step
    (judgeflow.stages). The cluster's public names say job, and the layout page defines both."""
    import judgeflow.cluster as cluster

    assert not [name for name in cluster.__all__ if name.startswith("Stage")]
    assert "judgeflow.cluster.stage" not in import_graph()
    readme = (REPO / "docs/development/layout.md").read_text()
    assert "**Words, one meaning each.** A *stage* is one step of the pipeline" in readme
