"""The layers import one way: bench -> eks_hybrid_gpu -> components -> cluster -> the pack's leaf vocabulary.

Inside the cluster layer too: judge -> records -> client. The house's picture is docs/house.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ABOVE_CLUSTER = (
    *("components", "eks_hybrid_gpu", "bench", "tests", "testkit", "payloads", "pulumi", "pulumi_kubernetes"),
)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # The cluster layer reads and records the live cluster: no Pulumi, nothing of the program or the CLI.
    "cluster": ABOVE_CLUSTER,
    "cluster/client": (*ABOVE_CLUSTER, "cluster.records", "cluster.judge", "cluster.findings"),
    "cluster/records": (*ABOVE_CLUSTER, "cluster.judge", "cluster.findings"),
    # The CUDA probe runs alone inside the GPU container.
    "payloads": ("cluster", "components", "eks_hybrid_gpu", "bench", "tests", "policy"),
    "components": ("eks_hybrid_gpu", "bench", "tests", "testkit"),
    "eks_hybrid_gpu": ("bench", "tests", "testkit"),
    # Benchmarks measure the program; the in-memory API they count requests on is testkit's, not the suite's.
    "bench": ("tests",),
    # The doubles of the API server: beside the tests and benchmarks, below neither.
    "testkit": ("bench", "tests", "eks_hybrid_gpu", "components", "payloads"),
    # The pack is published alone: nothing outside policy/, and inside it only relative imports.
    "policy": ("cluster", "components", "eks_hybrid_gpu", "bench", "tests", "payloads", "policy"),
    "policy/gpu_allocation/vocab": (
        *("cluster", "components", "eks_hybrid_gpu", "bench", "tests", "payloads", "pulumi", "pulumi_policy"),
    ),
}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every absolute module a file imports, with its line number (relative imports stay inside a package)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def violations(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    """`file:line imports module` for each import under `layer` of a forbidden package or module (and below)."""
    result = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for line, module in imported_modules(path):
            if any(module == f or module.startswith(f"{f}.") for f in forbidden):
                result.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return result


@pytest.mark.parametrize(("layer", "forbidden"), FORBIDDEN.items())
def test_layer_imports_point_one_way(layer: str, forbidden: tuple[str, ...]) -> None:
    assert violations(layer, forbidden) == []


def test_the_check_sees_an_import_from_a_floor_above_inside_one_package(tmp_path: Path) -> None:
    layer = tmp_path / "layer"
    layer.mkdir()
    (layer / "m.py").write_text("from cluster.judge.live import connect\nfrom cluster.client import names\n")
    found = [
        module
        for _, module in imported_modules(layer / "m.py")
        if any(module == f or module.startswith(f"{f}.") for f in ("cluster.judge",))
    ]
    assert found == ["cluster.judge.live"]


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\nfrom eks_hybrid_gpu.cli import main\nfrom . import sibling\n")
    assert imported_modules(module) == [(1, "os"), (2, "eks_hybrid_gpu.cli")]


def conftest_imports(path: Path) -> list[int]:
    """Lines of `path` that import from a conftest module, absolutely or relatively."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").rsplit(".", 1)[-1] == "conftest"
    ]


def test_no_test_imports_from_a_conftest() -> None:
    """Shared builders live in tests/support/; a conftest only holds fixtures."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for line in conftest_imports(path)
    ]
    assert offenders == []


def test_the_check_sees_a_conftest_import(tmp_path: Path) -> None:
    module = tmp_path / "t.py"
    module.write_text("from .conftest import Harness\nfrom tests.unit.conftest import x\nfrom tests.support import y\n")
    assert conftest_imports(module) == [1, 2]
