"""Nothing the program imports reads the environment: its graph and targets follow from its arguments.

Scanned: components/, cluster/ and payloads/.

The entry points read it (`__main__.py`, the CLI's `eks_hybrid_gpu.localpaths`) and pass values down. One exclusion:
payloads/cuda_probe.py is the CUDA probe script the smoke Jobs run inside the GPU container, not a
component; it reads CUDA_VISIBLE_DEVICES there, which is the container's business. (payloads/__init__.py,
which the program imports to find the script, is scanned like the rest.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from components.cluster import resolve_target
from components.config import ClusterConfig

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SCANNED = tuple(ROOT / folder for folder in ("components", "cluster", "payloads"))
EXCLUDED = ROOT / "payloads" / "cuda_probe.py"
"""The probe script runs in the GPU container, not in the program (see the module docstring)."""
READERS = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})


def environment_reads(source: str) -> list[tuple[int, str]]:
    """(line, name) of every use of os.environ/os.getenv and friends, however `os` or the name was imported."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in READERS:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found.extend((node.lineno, alias.name) for alias in node.names if alias.name in READERS)
    return sorted(found)


def _scanned() -> list[Path]:
    return sorted(path for folder in SCANNED for path in folder.rglob("*.py"))


def test_no_component_reads_the_environment() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line} reads the environment ({name}): take the value as an argument"
        for path in _scanned()
        if path != EXCLUDED
        for line, name in environment_reads(path.read_text())
    ]
    assert offenders == []


def test_the_probe_script_is_the_one_excluded_reader() -> None:
    # The exclusion is not dead: the probe does read the environment (CUDA_VISIBLE_DEVICES), and it is the only
    # scanned file that does.
    readers = [path for path in _scanned() if environment_reads(path.read_text())]
    assert readers == [EXCLUDED]


def test_the_scan_sees_every_spelling() -> None:
    source = (
        "import os\n"
        "from os import environ\n"
        "from os import getenv as g\n"
        "a = os.environ.get('X')\n"
        "b = os.getenv('Y')\n"
        "c = os.path.join('a', 'b')\n"
    )
    assert environment_reads(source) == [(2, "environ"), (3, "getenv"), (4, "environ"), (5, "getenv")]


def test_a_local_source_needs_its_kubeconfig_as_an_argument(tmp_path: Path) -> None:
    local = ClusterConfig(source="local")
    kubeconfig = tmp_path / "kubeconfig"

    assert resolve_target(local, local_kubeconfig=kubeconfig).kubeconfig_path == str(kubeconfig)
    # Render mode reaches no cluster, so it needs none.
    assert resolve_target(local, render_only=True).kubeconfig_path is None
    with pytest.raises(ValueError, match="no kubeconfig of the local API server"):
        resolve_target(local)
