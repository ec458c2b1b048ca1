"""The hardware run's report (tests/fixtures/hardware/h200-dra-report.json, written by scripts/hardware/dra_run.py on
the lent H200): the DRA path held for real, through the program's own objects, from slice to CUDA probe.

These tests fail if a re-run's report is committed in which the claim was not allocated through the program's
DeviceClass, the device was not the one the real driver published, or the probe did not pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.dra_objects import FULL_GPU_CLASS, LARGE_GPU_CLASS
from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN

REPORT = Path(__file__).resolve().parents[1] / "fixtures" / "hardware" / "h200-dra-report.json"


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(REPORT.read_text())
    return loaded


def test_every_step_passed_in_order(report: dict[str, Any]) -> None:
    assert report["result"] == "pass"
    names = [step["name"] for step in report["steps"]]
    assert names[0] == "host"
    assert names[-1] == "scheduler allocates, kubelet prepares, containerd injects, the probe runs"
    assert all(step["ok"] for step in report["steps"])


def test_the_claim_was_allocated_through_the_programs_device_class_to_the_published_gpu(report: dict[str, Any]) -> None:
    claim = report["claim"]
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] in (LARGE_GPU_CLASS, FULL_GPU_CLASS)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    published = report["resourceSlice"]
    assert result["driver"] == published["spec"]["driver"] == DRIVER_DOMAIN
    assert result["pool"] == published["spec"]["pool"]["name"]
    assert result["device"] in [d["name"] for d in published["spec"]["devices"]]
    (owner,) = claim["metadata"]["ownerReferences"]
    assert owner["kind"] == "Pod"
    assert owner["name"].startswith("hybrid-gpu-dra-smoke-")
    (prepared,) = report["steps"][-1]["detail"]["driverPrepared"]
    assert f"{claim['metadata']['namespace']}/{claim['metadata']['name']}" in prepared


def test_the_real_driver_published_the_h200_as_the_simulation_does(report: dict[str, Any]) -> None:
    (device,) = report["resourceSlice"]["spec"]["devices"]
    assert device["capacity"]["memory"]["value"] == "143771Mi"
    assert "index" not in device["attributes"]
    assert device["attributes"]["productName"] == {"string": "NVIDIA H200"}


def test_the_cuda_probe_passed_inside_the_container(report: dict[str, Any]) -> None:
    probe = report["probe"]
    assert probe["status"] == "pass"
    assert probe["failures"] == []
    assert probe["device"]["name"] == "NVIDIA H200"
    assert probe["kernel"]["ok"] is True
    assert probe["kernel"]["mismatches"] == 0
    bandwidth = probe["bandwidth"]
    assert bandwidth["resultVerified"] is True
    assert bandwidth["ratioToPublished"] >= probe["minBandwidthRatio"]
    assert bandwidth["medianTBps"] == pytest.approx(
        bandwidth["publishedTBps"] * bandwidth["ratioToPublished"], rel=1e-3
    )
    # The pod's container saw the GPU only through the claim: the image sets no NVIDIA_VISIBLE_DEVICES of its own.
    assert probe["device"]["visibleDevices"] == "void"


def test_what_the_run_had_to_adjust_on_the_machine_is_recorded(report: dict[str, Any]) -> None:
    runc = next(step for step in report["steps"] if step["name"] == "runc starts a container on this kernel")
    assert runc["detail"]["results"]["as written"] == "ok"
    assert runc["detail"]["adjust"] == {"oomScoreAdjFloor": runc["detail"]["oomScoreAdjFloor"]}
    assert all("oom_score_adj" in notice for notice in runc["detail"]["notices"])
