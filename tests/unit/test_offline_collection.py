"""A clone with no ../shared, no mirror and no internet: one line at collection, the chart-free tests still pass.

The repository's files are copied into a temporary folder with no `shared/` beside it; pytest runs there in a
subprocess with an empty cache and the upstream pointed at a loopback port nothing listens on.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from eks_hybrid_gpu import chartfetch, chartmirror
from eks_hybrid_gpu.mocks import ROOT
from tests.support import charts

pytestmark = pytest.mark.unit

CHART_FREE = "tests/unit/test_vocab_grammar.py"
NEEDS_CHARTS = "tests/unit/test_config.py::test_archive_matching_its_pin_is_valid"


def _copy_of_the_repository(target: Path) -> Path:
    """The checkout's files (tracked, and new ones not ignored) under target/repo, as a clone would have them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    repo = target / "repo"
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            destination = repo / os.fsdecode(name)
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(source.read_bytes())
    return repo


def test_collection_offline_says_one_line_and_chart_free_tests_pass(tmp_path: Path) -> None:
    repo = _copy_of_the_repository(tmp_path)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in (chartmirror.CHART_MIRROR_ENV, "PYTEST_ADDOPTS")}
    env.update(
        {
            "PYTHONPATH": str(repo),
            "EKS_HYBRID_GPU_CACHE": str(tmp_path / "cache"),
            chartfetch.UPSTREAM_ENV: f"http://127.0.0.1:{dead}",
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", CHART_FREE, NEEDS_CHARTS],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    lines = out.splitlines()
    said = [line for line in lines if line.startswith(charts.PREFIX)]
    shared = tmp_path / "shared" / "charts"
    assert set(said) == {
        f"{charts.PREFIX}no chart source for nvidia-device-plugin-0.20.0.tgz, dra-driver-nvidia-gpu-0.5.0.tgz and "
        f"gpu-operator-v26.7.0.tgz: {chartmirror.CHART_MIRROR_ENV} is not set, {shared} does not exist, and upstream "
        f"failed (http://127.0.0.1:{dead} cannot be reached (Connection refused)); put them in a folder and set "
        f"{chartmirror.CHART_MIRROR_ENV}=DIR, or in {shared}"
    }, out
    # Said once before any result; the failing test's own report repeats it.
    assert lines.index(said[0]) < min(i for i, line in enumerate(lines) if line.startswith(("PASSED", ".", "E")))
    assert done.returncode == 1, out
    summary = lines[-1]
    assert " passed" in summary, out
    assert "1 error" in summary, out
    assert "failed" not in summary, out
    assert "skipped" not in summary, out
    assert any(line.startswith(f"ERROR {NEEDS_CHARTS} - ") for line in lines), out
    assert not any(line.startswith("ERROR") and CHART_FREE in line for line in lines), out
