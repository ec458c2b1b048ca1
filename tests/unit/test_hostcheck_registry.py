"""The host check's floors are the owner registry's, and reading them keeps the check standard-library only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from eks_hybrid_gpu.hostcheck import floors
from policy.gpu_allocation.vocab import owners

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_every_mode_of_every_owner_kind_is_an_owner_choice_with_its_registry_floor() -> None:
    modes = [mode for kind in owners.OWNER_KINDS.values() for mode in kind.modes]
    assert sorted(floors.OWNERS) == sorted(mode.hostcheck_key for mode in modes)
    for mode in modes:
        assert floors.FLOORS[mode.hostcheck_key] is mode.host


def test_the_default_cohort_value_is_the_modes_owner_kind() -> None:
    for kind in owners.OWNER_KINDS.values():
        for mode in kind.modes:
            assert floors.COHORT_VALUES[mode.hostcheck_key] == kind.owner


def test_the_host_check_runs_without_site_packages(tmp_path: Path) -> None:
    """`python3 -S`: no pip package is importable, as on a GPU host before anything is installed."""
    argv = [sys.executable, "-S", "-m", "eks_hybrid_gpu.hostcheck", "--owner", "dra"]
    argv += ["--nvidia-smi", "/nonexistent/nvidia-smi", "--root", str(tmp_path)]
    completed = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT)
    assert completed.stderr == ""
    assert completed.returncode == 2
    assert "cannot inspect the GPUs: no executable at /nonexistent/nvidia-smi" in completed.stdout
