"""The program run's report on the lent H200 (tests/fixtures/hardware/h200-program-run-report.json, written by
scripts/hardware/program_run.py): the program's own `pulumi up`, against a control plane and a real kubelet of
Kubernetes 1.37.2, installed the device-plugin cohort as the chart's DaemonSet from the built image; its smoke Job got
`nvidia.com/gpu` and the CUDA probe passed on the H200; a pod then held the GPU through the device plugin.

The run stopped there: `migrate --to dra` reached its install phase and the DRA driver's DaemonSet never became ready
on that machine (docs/host-validation.md says why), so the report holds no owner change. These tests fail if the
committed report says a step failed, the cohort was not installed by the program's `pulumi up`, or the probe did not
pass on the card the report names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REPORT = Path(__file__).resolve().parents[1] / "fixtures" / "hardware" / "h200-program-run-report.json"
UP_STEP = "pulumi up: the program installs the device-plugin cohort"
SMOKE_STEP = "the program's smoke Job gets nvidia.com/gpu; the probe runs"
HOLDER_STEP = "a pod holds the GPU through the device plugin"
KUBELET_STEP = "kubelet registers the node with the labels the cohort's DaemonSets select"

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(REPORT.read_text())
    return document


def steps(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["name"]: step for step in report["steps"]}


def test_every_recorded_step_passed_in_order_through_the_programs_own_up(report: dict[str, Any]) -> None:
    names = [step["name"] for step in report["steps"]]
    assert all(step["ok"] for step in report["steps"])
    assert names.index(KUBELET_STEP) < names.index(UP_STEP) < names.index(SMOKE_STEP) < names.index(HOLDER_STEP)
    assert steps(report)["the program's stack for this cluster (source kubeconfig) and its Pulumi stack"]["ok"]


def test_the_node_ran_a_real_137_kubelet_on_the_h200(report: dict[str, Any]) -> None:
    kubelet = steps(report)[KUBELET_STEP]["detail"]
    assert report["card"] == "NVIDIA H200"
    assert kubelet["kubeletVersion"] == "v1.37.2"
    assert kubelet["labels"]["workload.example.com/gpu-allocation"] == "device-plugin"


def test_the_smoke_job_got_the_plugins_gpu_and_the_probe_passed(report: dict[str, Any]) -> None:
    smoke = steps(report)[SMOKE_STEP]["detail"]
    assert smoke["requests"] == {"nvidia.com/gpu": "1"}
    assert smoke["claims"] in ([], None, {})
    assert smoke["pod"]["phase"] == "Succeeded"
    probe = report["probes"]["default"]
    assert (probe["status"], probe["exitCode"], probe["device"]["name"]) == ("pass", 0, "NVIDIA H200")
    bandwidth = probe["bandwidth"]
    assert bandwidth["medianTBps"] >= probe["minBandwidthRatio"] * bandwidth["publishedTBps"]


def test_the_holder_got_the_same_gpu_through_the_device_plugin(report: dict[str, Any]) -> None:
    holder = steps(report)[HOLDER_STEP]["detail"]
    assert holder["holder"]["requests"] == {"nvidia.com/gpu": "1"}
    uuid = report["probes"]["default"]["device"]["uuid"]
    assert holder["runtimeDevices"] == [f"nvidia.com/gpu={uuid}"]
