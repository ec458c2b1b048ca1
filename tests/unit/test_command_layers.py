"""Inside `eks_hybrid_gpu/`, the `local` command sits on top: `simulate` and every lower module never import it.

`local` drives `simulate` (it writes the simulated fleet); what both need (the engine's state folder, a stack
file's config) lives below them in `engine` and `stackfile`. An import back up, even one deferred into a
function, makes a circle that only import order keeps working, so the check walks every import in the tree.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
LOCAL = "eks_hybrid_gpu.local"


def module_name(path: Path) -> str:
    """`eks_hybrid_gpu/simulate/cli.py` -> `eks_hybrid_gpu.simulate.cli` (a package's `__init__` is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports, at any depth (functions included), relative imports made absolute.

    `from pkg import name` counts as an import of `pkg.name` too: `name` may be a submodule.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names)
    return found


def importers_of(target: str, files: list[Path]) -> list[str]:
    """`file:line imports TARGET` for each import statement of `target` (or of a name or module inside it)."""
    found = {
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for path in files
        for line, module in imports_of(path)
        if module == target or module.startswith(f"{target}.")
    }
    return sorted(found)


def program_files() -> list[Path]:
    """Every module of the program and the pack, except `local` itself."""
    files = [p for layer in ("eks_hybrid_gpu", "components", "policy") for p in sorted((ROOT / layer).rglob("*.py"))]
    return [p for p in files if module_name(p) != LOCAL]


def test_simulate_never_imports_local() -> None:
    assert importers_of(LOCAL, sorted((ROOT / "eks_hybrid_gpu" / "simulate").rglob("*.py"))) == []


def test_no_lower_module_imports_local() -> None:
    """The command line reaches `local` by name (`eks_hybrid_gpu.cli.COMMANDS`); no module imports it."""
    assert importers_of(LOCAL, program_files()) == []


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    from eks_hybrid_gpu.local import engine_state_dir\n",
        "def f():\n    from eks_hybrid_gpu import engine, local\n",
        "import eks_hybrid_gpu.local as local\n",
        "from .. import local\n",
    ],
)
def test_the_check_sees_a_deferred_or_relative_import(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "eks_hybrid_gpu" / "simulate" / "m.py"
    module.parent.mkdir(parents=True)
    module.write_text(source)
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert importers_of(LOCAL, [module]) == [f"eks_hybrid_gpu/simulate/m.py:{source.count(chr(10))} imports {LOCAL}"]


def test_the_check_leaves_localcluster_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "eks_hybrid_gpu" / "simulate" / "m.py"
    module.parent.mkdir(parents=True)
    module.write_text("from eks_hybrid_gpu import localcluster\nfrom eks_hybrid_gpu.localcluster import start\n")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert importers_of(LOCAL, [module]) == []
