"""CUDA probe: the pure parts (bandwidth table, verdict, budget, JSON shape) and its failure paths, without a GPU."""

from __future__ import annotations

import ast
import io
import json
import math
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from payloads import cuda_probe as probe
from payloads import probe_script_path

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200"
GIB = 1 << 30


def run_probe(*argv: str) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = probe.run(list(argv), stream=out)
    return code, out.getvalue().splitlines()


# ----------------------------------------------------------------------------- published bandwidth


@pytest.mark.unit
@pytest.mark.parametrize(
    ("name", "tbps"),
    [
        ("NVIDIA H200", 4.8),
        ("NVIDIA H200 NVL", 4.8),
        ("NVIDIA H100 80GB HBM3", 3.35),
        ("NVIDIA H100 PCIe", 2.0),
        ("NVIDIA H100 NVL", 3.9),
        ("NVIDIA A100-SXM4-80GB", 2.039),
        ("NVIDIA A100-SXM4-40GB", 1.555),
        ("NVIDIA A100 80GB PCIe", 1.935),
        ("NVIDIA A100-PCIE-40GB", 1.555),
        ("NVIDIA L40S", 0.864),
        ("NVIDIA L40", 0.864),
        ("NVIDIA A10G", 0.6),
        ("NVIDIA A10", 0.6),
        ("NVIDIA L4", 0.3),
        ("Tesla T4", 0.32),
    ],
)
def test_published_bandwidth_by_model(name: str, tbps: float) -> None:
    found = probe.published_bandwidth(name)
    assert found is not None
    assert found[0] == tbps


@pytest.mark.unit
@pytest.mark.parametrize("name", ["NVIDIA GH200 480GB", "NVIDIA H100", "NVIDIA RTX 6000 Ada Generation", ""])
def test_unknown_or_ambiguous_models_have_no_published_figure(name: str) -> None:
    """A plain "H100" could be SXM, PCIe or NVL; guessing would judge the device against the wrong figure."""
    assert probe.published_bandwidth(name) is None


@pytest.mark.unit
def test_seed_figures_for_h100_and_h200_sxm() -> None:
    assert probe.published_bandwidth("NVIDIA H200") == (4.8, "H200 SXM / H200 NVL (141 GB HBM3e)")
    assert probe.published_bandwidth("NVIDIA H100 80GB HBM3") == (3.35, "H100 SXM (80 GB HBM3)")


# ----------------------------------------------------------------------------- arithmetic and verdict


@pytest.mark.unit
def test_bandwidth_counts_read_and_write() -> None:
    """2 GiB copied in 1.0105 ms moves 4 GiB through memory: 4.25 TB/s, as measured on the H200."""
    assert round(probe.bandwidth_tbps(2 * GIB, 1.0105), 4) == 4.2503


@pytest.mark.unit
def test_summary_of_copy_times() -> None:
    summary = probe.summarise_copies(2 * GIB, [1.02, 1.0105, 1.012, 1.5])
    assert summary == {
        "bestMs": 1.0105,
        "medianMs": 1.016,
        "bestTBps": 4.2503,
        "medianTBps": 4.2273,
        "meanTBps": 3.782,
    }


@pytest.mark.unit
def test_h200_median_passes_the_default_ratio() -> None:
    fields, failure = probe.bandwidth_verdict(4.245, probe.published_bandwidth("NVIDIA H200"), 0.5)
    assert failure is None
    assert fields == {
        "publishedTBps": 4.8,
        "publishedModel": "H200 SXM / H200 NVL (141 GB HBM3e)",
        "ratioToPublished": 0.8844,
    }


@pytest.mark.unit
def test_slow_median_fails_with_the_figures() -> None:
    fields, failure = probe.bandwidth_verdict(1.9, (4.8, "H200 SXM / H200 NVL (141 GB HBM3e)"), 0.5)
    assert fields["ratioToPublished"] == 0.3958
    assert failure == (
        "median device-to-device bandwidth 1.900 TB/s is 0.40 of the published 4.8 TB/s for H200 SXM / H200 NVL "
        "(141 GB HBM3e), below --min-bandwidth-ratio 0.5"
    )


@pytest.mark.unit
def test_unknown_model_is_measured_but_not_judged() -> None:
    fields, failure = probe.bandwidth_verdict(1.0, None, 0.5)
    assert failure is None
    assert fields == {"publishedTBps": None, "publishedModel": None, "ratioToPublished": None}


@pytest.mark.unit
def test_finish_sets_status_from_failures() -> None:
    passed = probe.finish(probe.new_result(20.0, False, 0.5))
    assert (passed["status"], passed["exitCode"], passed["phase"]) == ("pass", 0, "done")
    result = probe.new_result(20.0, False, 0.5)
    result["failures"].append("saxpy produced 1 wrong element(s) out of 4194304")
    failed = probe.finish(result)
    assert (failed["status"], failed["exitCode"]) == ("fail", 1)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("status", "code"), [("pass", 0), ("fail", 1), ("error", 2), ("timeout", 3), ("terminated", 143)]
)
def test_exit_codes(status: str, code: int) -> None:
    assert probe.exit_code_for(status) == code


# ----------------------------------------------------------------------------- budget and sizing


@pytest.mark.unit
def test_budget_default_and_cap() -> None:
    assert probe.DEFAULT_BUDGET_SECONDS == 20.0
    assert probe.effective_budget(20.0) == (20.0, False)
    assert probe.effective_budget(100.0) == (100.0, False)
    assert probe.effective_budget(600.0) == (100.0, True)


@pytest.mark.unit
@pytest.mark.parametrize("budget", [0.0, -5.0, math.nan])
def test_budget_must_be_positive(budget: float) -> None:
    with pytest.raises(ValueError, match=r"^--budget-seconds must be positive, got"):
        probe.effective_budget(budget)


@pytest.mark.unit
def test_iterations_fit_the_remaining_budget() -> None:
    assert probe.plan_iterations(20, copy_ms=1.0, remaining_s=18.0) == 20
    assert probe.plan_iterations(20, copy_ms=200.0, remaining_s=10.0) == 15
    assert probe.plan_iterations(20, copy_ms=1000.0, remaining_s=1.0) == probe.MIN_ITERATIONS


@pytest.mark.unit
def test_buffers_take_at_most_80_percent_of_free_memory() -> None:
    assert probe.buffer_bytes(2048, free_bytes=140 * GIB) == 2 * GIB
    assert probe.buffer_bytes(2048, free_bytes=4 * GIB) == 1638 << 20
    assert probe.buffer_bytes(2048, free_bytes=0) == 1 << 20


# ----------------------------------------------------------------------------- output and failure paths


@pytest.mark.unit
def test_bad_arguments_print_one_json_line_and_exit_2() -> None:
    code, lines = run_probe("--budget-seconds", "0")
    assert code == 2
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert (result["status"], result["exitCode"], result["phase"]) == ("error", 2, "arguments")
    assert result["failures"] == ["bad arguments: --budget-seconds must be positive, got 0.0"]


@pytest.mark.unit
def test_unknown_flag_is_reported_as_json() -> None:
    code, lines = run_probe("--bogus")
    assert code == 2
    assert json.loads(lines[0])["failures"] == ["bad arguments: unrecognized arguments: --bogus"]


@pytest.mark.unit
def test_missing_driver_library_cannot_run_and_says_how_to_get_it() -> None:
    before = signal.getsignal(signal.SIGTERM)
    code, lines = run_probe("--libcuda", "/nonexistent/libcuda.so.1", "--budget-seconds", "500")
    assert code == 2
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert (result["status"], result["phase"], result["budgetSeconds"], result["budgetCapped"]) == (
        "error",
        "load-driver",
        100.0,
        True,
    )
    (failure,) = result["failures"]
    assert failure.startswith("/nonexistent/libcuda.so.1 could not be loaded (")
    assert failure.endswith(
        "): the container has no NVIDIA driver libraries; run it with the nvidia RuntimeClass (device plugin) or a "
        "DRA claim so the container toolkit injects them"
    )
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.unit
def test_reporter_prints_exactly_once() -> None:
    out = io.StringIO()
    reporter = probe.Reporter(probe.new_result(20.0, False, 0.5), out)
    assert reporter.emit("timeout", "time budget of 20.0 s ran out during bandwidth") is True
    assert reporter.emit("pass") is False
    (line,) = out.getvalue().splitlines()
    assert json.loads(line)["status"] == "timeout"


@pytest.mark.unit
def test_watchdog_ends_a_stuck_run_within_the_budget() -> None:
    """A driver call that never returns is cut off by the watchdog thread with a timeout result and exit 3."""
    script = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(probe_script_path().parent)!r})\n"
        "import cuda_probe as p\n"
        "class Stub:\n"
        "    def __init__(self, library): pass\n"
        "def stuck(self):\n"
        "    self.phase('init')\n"
        "    time.sleep(30)\n"
        "p.Driver = Stub\n"
        "p.Probe.open = stuck\n"
        "sys.exit(p.run(['--budget-seconds', '0.5']))\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=20, check=False)
    assert completed.returncode == 3
    (line,) = completed.stdout.splitlines()
    result = json.loads(line)
    assert (result["status"], result["exitCode"], result["phase"]) == ("timeout", 3, "init")
    assert result["failures"] == ["time budget of 0.5 s ran out during init"]
    assert result["elapsedSeconds"] < 5


@pytest.mark.unit
def test_result_document_shape() -> None:
    assert list(probe.new_result(20.0, False, 0.5)) == [
        "probe",
        "probeVersion",
        "status",
        "exitCode",
        "phase",
        "budgetSeconds",
        "budgetCapped",
        "elapsedSeconds",
        "device",
        "memoryCheck",
        "bandwidth",
        "kernel",
        "minBandwidthRatio",
        "failures",
        "note",
    ]


# ----------------------------------------------------------------------------- shipping and the H200 record


@pytest.mark.unit
def test_probe_script_path_points_at_the_shipped_file() -> None:
    path = probe_script_path()
    assert path.name == "cuda_probe.py"
    assert path.read_text().startswith("#!/usr/bin/env python3\n")


@pytest.mark.unit
def test_probe_uses_only_the_standard_library_and_python_38_syntax() -> None:
    """It runs as one file in any image with python3: no third-party or package-relative imports."""
    tree = ast.parse(probe_script_path().read_text(), feature_version=(3, 8))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    } | {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported - {"__future__"} <= sys.stdlib_module_names
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]


@pytest.mark.unit
def test_embedded_ptx_declares_the_saxpy_entry_and_its_four_parameters() -> None:
    body = probe.SAXPY_PTX_BODY
    assert ".visible .entry saxpy(" in body
    assert body.count(".param ") == 4
    assert [target for _, target in probe.PTX_HEADERS] == ["sm_50", "sm_75"]


@pytest.mark.unit
def test_h200_record_has_the_current_shape_and_consistent_figures() -> None:
    results = [json.loads(line) for line in (H200 / "probe-series.jsonl").read_text().splitlines()]
    for result in results:
        assert list(result) == list(probe.new_result(20.0, False, 0.5))
        assert (result["status"], result["exitCode"]) == ("pass", 0)
        bandwidth = result["bandwidth"]
        recomputed = probe.bandwidth_tbps(bandwidth["bufferBytes"], bandwidth["medianMs"])
        assert abs(recomputed - bandwidth["medianTBps"]) < 0.005
        assert bandwidth["ratioToPublished"] == round(bandwidth["medianTBps"] / 4.8, 4)


@pytest.mark.unit
def test_h200_probe_is_within_5_percent_of_the_pytorch_copy() -> None:
    """The recorded evidence: same buffer size, same counting, probe median / PyTorch median >= 0.95."""
    probes = [json.loads(line)["bandwidth"] for line in (H200 / "probe-series.jsonl").read_text().splitlines()]
    torches = [json.loads(line) for line in (H200 / "torch-series.jsonl").read_text().splitlines()]
    assert len(probes) == len(torches) == 4
    for mine, reference in zip(probes, torches, strict=True):
        assert mine["bufferBytes"] == reference["bufferBytes"]
        assert mine["bytesCountedPerCopy"] == reference["bytesCountedPerCopy"]
        assert mine["medianTBps"] / reference["medianTBps"] >= 0.95


@pytest.mark.unit
def test_budget_counts_from_the_run_not_from_the_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that imported the probe long before running it still gets its whole budget."""
    monkeypatch.setattr(probe, "STARTED", probe.STARTED - 3600.0)
    code, lines = run_probe("--libcuda", "/nonexistent/libcuda.so.1", "--budget-seconds", "5")
    (line,) = lines
    result = json.loads(line)
    assert code == 2
    assert result["status"] == "error"
    assert result["elapsedSeconds"] < 5
