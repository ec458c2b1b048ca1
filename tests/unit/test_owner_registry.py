"""What an owner kind is lives in one place: vocab/owners.py. No other module spells its chart, image or app label.

A fourth owner kind (another vendor, the next DRA chart name) is then one registry entry and one component; a
module that wrote `"dra-driver-nvidia-gpu"` itself would silently miss the entry's old names (the DRA feature-gate
rule once did). Docstrings may name the charts; code may not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from components.owner_builders import OWNER_BUILDERS
from policy.gpu_allocation.vocab import allocators, owners
from policy.gpu_allocation.vocab.labels import OWNERS

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("components", "eks_hybrid_gpu", "policy", "bench", "__main__.py")
REGISTRY = ROOT / "policy" / "gpu_allocation" / "vocab" / "owners.py"
OWNER_KEYS_HOME = ROOT / "policy" / "gpu_allocation" / "vocab" / "labels.py"
"""Where the owner keys themselves (`device-plugin`, `dra`, `gpu-operator`) are defined: it may spell those."""
_TOKEN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constants that are docstrings (of a module, class or function) or bare string statements."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for statement in body:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                found.add(id(statement.value))
    return found


def spelled_literals(source: str, literals: frozenset[str], owner_keys: frozenset[str]) -> list[tuple[int, str]]:
    """(line, literal) for each registry literal a module's code spells.

    A string equal to a literal is one; so is a literal standing as a word inside a longer string (a URL, a
    message), except the owner keys themselves (`gpu-operator` is also the Operator's owner key, which messages
    name: code uses the GPU_OPERATOR constant, so an exact match still counts).
    """
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
            continue
        text = node.value
        if text in literals:
            found.append((node.lineno, text))
            continue
        words = set(_TOKEN.findall(text)) & (literals - owner_keys)
        found.extend((node.lineno, word) for word in sorted(words))
    return sorted(found)


def _modules() -> list[Path]:
    paths: list[Path] = []
    for name in SCANNED:
        target = ROOT / name
        paths.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target])
    return [path for path in paths if path != REGISTRY]


def test_no_module_outside_the_registry_spells_an_owner_literal() -> None:
    literals = owners.registered_literals()
    keys = frozenset(OWNERS)
    offenders = [
        f"{path.relative_to(ROOT)}:{line} spells {literal!r}: read it from policy/gpu_allocation/vocab/owners.py"
        for path in _modules()
        for line, literal in spelled_literals(
            path.read_text(), literals - keys if path == OWNER_KEYS_HOME else literals, keys
        )
    ]
    assert offenders == []


def test_the_scan_sees_code_and_skips_docstrings() -> None:
    source = (
        '"""The nvidia-device-plugin chart."""\n'
        'CHART = "nvidia-device-plugin"\n'
        'URL = f"https://github.com/NVIDIA/k8s-device-plugin#{1}"\n'
        'OWNER = "gpu-operator"\n'
        'MESSAGE = "set owner gpu-operator"\n'
        "def f() -> None:\n"
        '    """Runs dra-driver-nvidia-gpu."""\n'
    )
    found = spelled_literals(source, owners.registered_literals(), frozenset(OWNERS))
    assert found == [(2, "nvidia-device-plugin"), (3, "k8s-device-plugin"), (4, "gpu-operator")]


def test_every_owner_has_one_registry_entry_and_one_builder() -> None:
    assert tuple(owners.OWNER_KINDS) == OWNERS
    assert set(OWNER_BUILDERS) == set(OWNERS)


def test_every_chart_name_of_an_entry_maps_back_to_its_owner() -> None:
    for kind in owners.OWNER_KINDS.values():
        for name in kind.chart.names:
            for reference in (name, f"oci://mirror.example/charts/{name}", f"{name}-1.2.3.tgz", f"repo/{name}@1.0.0"):
                assert owners.owner_of_chart(reference) == kind.owner, reference
        for label in kind.app_labels:
            assert owners.owner_of_app_label(label) == kind.owner
        for image in kind.images:
            assert owners.owner_of_image(image) == kind.owner


@pytest.mark.parametrize("kind", owners.OWNER_KINDS.values(), ids=lambda kind: kind.owner)
def test_every_registered_image_is_recognised_in_a_pod(kind: owners.OwnerKind) -> None:
    for image in kind.images:
        container = {"name": kind.allocator_container or "main", "image": f"registry.example/{image}:v1"}
        recognised = allocators.container_owner(container)
        assert recognised is not None, image
        assert recognised[0] == kind.owner, image


def test_a_mode_is_chosen_by_the_operator_mode_only_where_there_are_two() -> None:
    assert owners.allocates_through_dra("dra", None)
    assert owners.allocates_through_dra("dra", "cluster-policy")
    assert not owners.allocates_through_dra("device-plugin", "gpu-cluster")
    assert owners.allocates_through_dra("gpu-operator", "gpu-cluster")
    assert not owners.allocates_through_dra("gpu-operator", "cluster-policy")
    assert not owners.allocates_through_dra("nvidia", None)
