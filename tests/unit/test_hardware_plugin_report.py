"""The device-plugin hardware runs' reports (tests/fixtures/hardware/<card>-device-plugin-report.json, written by
scripts/hardware/plugin_run.py on a lent GPU machine): NVIDIA's device plugin, run from the chart's DaemonSet as the
program renders it, published the GPU to a real kubelet, and the program's smoke Job's probe passed on it.

These tests fail if a committed report says the owner did not run from its DaemonSet, a probe did not pass, the
sampler ever saw two GPU allocators on the node, or the simulated kubelet (eks_hybrid_gpu.simulate.devicemanager)
would publish for the same rendered pod and host anything other than what the real kubelet published.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from eks_hybrid_gpu import simulate
from eks_hybrid_gpu.simulate.devicemanager import publication, status_patch
from eks_hybrid_gpu.simulate.model import GPU_MODELS, SimNode

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"
REPORTS = sorted(FIXTURES.glob("*-device-plugin*-report.json"))
DAEMONSET_STEP = "the program's objects applied; the device plugin DaemonSet's pod publishes the GPU"
SMOKE_STEP = "smoke Job gets nvidia.com/gpu; the nvidia handler injects the GPU; the probe runs"
TIME_SLICING_SMOKE_STEP = "time-slicing: smoke Job gets the shared GPU; the probe runs"
KUBELET_STEP = "kubelet registers the node with the labels the program's DaemonSet selects"
MOVE_STEP = "owner change to DRA: cordon, drain, remove, unpublished, install, published, uncordon"
DRA_SMOKE_STEP = "the moved cohort's objects applied; the DRA smoke Job's claim allocated; the probe runs"
SLICED_DAEMONSET_STEP = "time-slicing: the program's DaemonSet (config-manager, plugin) publishes the shared GPU"
BACK_STEP = "owner change back to the plugin: cordon, drain, remove, unpublished, install, uncordon"
BACK_SMOKE_STEP = "back on the plugin: the smoke Job gets nvidia.com/gpu; the probe runs"
PLUGIN_SMOKE_STEPS = (SMOKE_STEP, TIME_SLICING_SMOKE_STEP, BACK_SMOKE_STEP)
PHASES = ["cordon", "drain", "remove", "wait-unpublished", "install+wait-published", "uncordon"]
REMOVAL_STEP = "the DaemonSet removed: its pod goes, the kubelet's allocatable falls to 0"

pytestmark = pytest.mark.unit


def test_a_device_plugin_run_is_committed() -> None:
    assert REPORTS, f"no *-device-plugin*-report.json under {FIXTURES}"


@pytest.fixture(params=REPORTS, ids=[p.name for p in REPORTS])
def report(request: pytest.FixtureRequest) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(Path(request.param).read_text())
    return loaded


def _runs_with(step: str) -> list[Path]:
    """The committed runs that took a step: a test of that step runs on each of them, never skipped on the rest."""
    return [path for path in REPORTS if any(s["name"] == step for s in json.loads(path.read_text())["steps"])]


MOVED = _runs_with(MOVE_STEP)
SLICED_FROM_DAEMONSET = _runs_with(SLICED_DAEMONSET_STEP)
MOVED_BACK = _runs_with(BACK_STEP)
SLICED = [path for path in REPORTS if "timeSlicing" in json.loads(path.read_text())["published"]]


def _on(runs: list[Path]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("report", runs, ids=[p.name for p in runs], indirect=True)


@pytest.mark.parametrize("runs", [MOVED, SLICED_FROM_DAEMONSET, MOVED_BACK, SLICED])
def test_every_kind_of_run_is_committed(runs: list[Path]) -> None:
    assert runs, "no committed hardware report took this step"


def _step(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [step for step in report["steps"] if step["name"] == name]
    assert len(found) == 1, f"step {name!r} is not in the report once"
    return found[0]


def _name(fixture: Path) -> str:
    return fixture.name.split("-", 1)[0]


def test_the_fixture_is_named_after_the_card_that_ran(report: dict[str, Any]) -> None:
    card = report["card"]
    names = [p for p in REPORTS if json.loads(p.read_text())["card"] == card]
    assert all(_name(p) in card.lower() for p in names)


def test_every_step_passed(report: dict[str, Any]) -> None:
    assert report["result"] == "pass"
    assert report["steps"][0]["name"] == "host"
    failed = [(step["name"], step.get("error")) for step in report["steps"] if not step["ok"]]
    assert failed == []


def test_the_device_plugin_ran_from_the_programs_daemonset(report: dict[str, Any]) -> None:
    detail = _step(report, DAEMONSET_STEP)["detail"]
    pod = detail["pod"]
    assert pod["ownerKind"] == "DaemonSet"
    assert pod["owner"] == ["device-plugin", "allocator"]
    assert pod["runtimeClassName"] == "nvidia"
    # Only the image differs from the render: the chart's v0.20.0 is not reachable, the v0.19.0 built here ran.
    for replaced in detail["imageReplaced"].values():
        assert replaced["rendered"].startswith("nvcr.io/nvidia/k8s-device-plugin:")
        assert replaced["ran"].startswith("localhost/nvidia/k8s-device-plugin:v0.19.0")
    assert pod["images"] == [r["ran"] for r in detail["imageReplaced"].values()]
    assert "nvidia-gpu.sock" in detail["sockets"]
    assert detail["published"]["allocatable"]["nvidia.com/gpu"] == "1"


def test_the_probes_passed_inside_containers_given_the_gpu_by_the_plugin(report: dict[str, Any]) -> None:
    assert "default" in report["probes"]
    for probe in report["probes"].values():
        assert probe["status"] == "pass"
        assert probe["failures"] == []
        assert probe["device"]["name"] == report["card"]
        assert probe["kernel"]["ok"] is True
        assert probe["kernel"]["mismatches"] == 0
        assert probe["bandwidth"]["resultVerified"] is True
        assert probe["bandwidth"]["ratioToPublished"] >= probe["minBandwidthRatio"]
        # nvidia-container-runtime (CDI mode) replaces the plugin's NVIDIA_VISIBLE_DEVICES with `void` once it has
        # injected the devices it named: the container holds no device list of its own.
        assert probe["device"]["visibleDevices"] == "void"
    smoke = _step(report, SMOKE_STEP)["detail"]
    assert smoke["requests"] == {"nvidia.com/gpu": "1"}
    assert "/dev/nvidia0" in smoke["injected"]["devices"]
    assert "NVIDIA_VISIBLE_DEVICES=void" in smoke["injected"]["env"]
    assert smoke["pod"]["phase"] == "Succeeded"
    assert smoke["pod"]["runtimeClassName"] == "nvidia"


def test_the_sampler_never_saw_two_allocators_on_the_node(report: dict[str, Any]) -> None:
    sampler = report["sampler"]
    assert sampler["samples"] >= 50
    assert sampler["meanIntervalMs"] < 500
    assert sampler["maxAllocatorOwnersOnNode"] <= 1
    assert sampler["maxAllocatorPodsOnNode"] <= 1
    assert sampler["maxAllocatorsOnNodeWithHostProcesses"] <= 1
    assert any(change["allocatorPods"] for change in sampler["changes"])


def _logged_runtime_devices(report_path: Path) -> list[str]:
    """The first run kept the runtime's debug-log lines beside its report, not in it."""
    log = report_path.with_name(report_path.name.replace("-report.json", "-runtime-cdi-devices.log"))
    return re.findall(r"Creating CDI modifier for devices: \[([^\]]*)\]", log.read_text())


@pytest.mark.parametrize("report_path", REPORTS, ids=[p.name for p in REPORTS])
def test_the_plugin_got_every_gpu_and_each_smoke_pod_the_one_it_was_allocated(report_path: Path) -> None:
    report = json.loads(report_path.read_text())
    uuid = report["probes"]["default"]["device"]["uuid"]
    mine, every = f"nvidia.com/gpu={uuid}", "nvidia.com/gpu=all"
    smokes = [step for step in report["steps"] if step["name"] in PLUGIN_SMOKE_STEPS]
    assert len(smokes) == len([key for key in report["probes"] if key != "dra"])
    if "runtimeDevices" not in smokes[0]["detail"]:
        # The plugin's own pod: the chart's NVIDIA_VISIBLE_DEVICES=all; each smoke pod: the UUID the plugin's
        # Allocate put in NVIDIA_VISIBLE_DEVICES (deviceListStrategy envvar), the GPU the probe then measured.
        assert _logged_runtime_devices(report_path) == [every, mine, mine]
        return
    for smoke in smokes:
        devices = smoke["detail"]["runtimeDevices"]
        assert devices[0] == every
        assert devices[-1] == mine
        assert set(devices) == {every, mine}


def _simulated_host(report: dict[str, Any]) -> SimNode:
    model = next(key for key, gpu in GPU_MODELS.items() if gpu.product_name == report["card"])
    node = _step(report, "host")["detail"]["node"]
    return SimNode.model_validate({"name": node, "gpus": [{"model": model, "count": 1}]})


def _ready_pod(rendered: dict[str, Any]) -> dict[str, Any]:
    template = rendered["podTemplate"]
    return {
        "metadata": {"namespace": rendered["namespace"], "labels": template["metadata"].get("labels") or {}},
        "spec": template["spec"],
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _configmaps(rendered: dict[str, Any]) -> dict[str, Any]:
    return {f"{rendered['namespace']}/{c['name']}": {"data": c["data"]} for c in rendered["configMaps"]}


def _simulated(host: SimNode, labels: dict[str, str], before: dict[str, Any], pods: list[Any], cms: Any) -> Any:
    node = {"status": before}
    patch = status_patch(node, publication(host, labels, pods, cms))
    return before if patch is None else patch["status"]


def test_the_simulated_gpu_model_is_the_card_nvidia_smi_reported(report: dict[str, Any]) -> None:
    name, memory = (field.strip() for field in _step(report, "host")["detail"]["nvidiaSmi"].split(",")[:2])
    model = next(gpu for gpu in GPU_MODELS.values() if gpu.product_name == name)
    assert memory == f"{model.memory_mib} MiB"


def test_the_simulated_kubelet_publishes_what_the_real_kubelet_published(report: dict[str, Any]) -> None:
    host = _simulated_host(report)
    labels = _step(report, KUBELET_STEP)["detail"]["labels"]
    before = _step(report, KUBELET_STEP)["detail"]["publishedBeforePlugin"]
    assert before == {"capacity": {}, "allocatable": {}}
    default = report["rendered"]["default"]
    simulated = _simulated(host, labels, before, [_ready_pod(default)], _configmaps(default))
    assert simulated == report["published"]["default"]


@_on(SLICED)
def test_the_simulation_follows_the_real_plugin_through_removal_and_time_slicing(report: dict[str, Any]) -> None:
    host = _simulated_host(report)
    labels = _step(report, KUBELET_STEP)["detail"]["labels"]
    # The DaemonSet's pod gone: the real kubelet kept the resource in capacity with allocatable 0, as simulated.
    removed = _step(report, REMOVAL_STEP)["detail"]["afterRemoval"]
    assert _simulated(host, labels, report["published"]["default"], [], {}) == removed
    # The plugin under the program's time-slicing config: what the rendered pod and ConfigMap make the simulation
    # publish is what the real plugin, given that ConfigMap's file, published.
    sliced = report["rendered"]["timeSlicing"]
    simulated = _simulated(host, labels, removed, [_ready_pod(sliced)], _configmaps(sliced))
    assert simulated == report["published"]["timeSlicing"]
    assert report["probes"]["timeSlicing"]["status"] == "pass"


@_on(MOVED)
def test_the_owner_change_released_the_plugins_gpu_before_dra_published_it(report: dict[str, Any]) -> None:
    moved = _step(report, MOVE_STEP)["detail"]
    assert list(moved["phases"]) == PHASES
    # The kubelet kept the plugin's resources in capacity with nothing allocatable; the DRA driver's slice came after.
    after = report["published"]["afterMove"]
    assert set(after["allocatable"].values()) == {"0"}
    assert after["capacity"] == _before_move(report)["capacity"]
    assert moved["resourceSlices"] == 1
    resource = "nvidia.com/gpu.shared" if "timeSlicing" in report["published"] else "nvidia.com/gpu"
    assert _holder(report)["holder"] == {
        "requests": {resource: "1"},
        "node": report["resourceSlice"]["spec"]["nodeName"],
    }
    # The sampler saw the plugin (its pod, or the host process of the first runs) go before the driver came.
    owners = [_allocators(change) for change in report["sampler"]["changes"]]
    first_dra = next(i for i, now in enumerate(owners) if "dra" in now)
    assert any("device-plugin" in now for now in owners[:first_dra])
    assert all(len(now) <= 1 for now in owners)


def _before_move(report: dict[str, Any]) -> dict[str, Any]:
    """What the plugin published when the holder took the GPU: the time-sliced GPU, or the default render's."""
    published: dict[str, Any] = report["published"]
    return published["timeSlicing"] if "timeSlicing" in published else published["default"]


def _holder(report: dict[str, Any]) -> dict[str, Any]:
    sliced = "timeSlicing" in report["published"]
    held = "the time-sliced GPU" if sliced else "the GPU"
    detail: dict[str, Any] = _step(report, f"a pod holds {held} through the device plugin")["detail"]
    return detail


def _allocators(change: dict[str, Any]) -> list[str]:
    """The owners of the allocators one sample saw on the node: pods, and host processes (both key spellings)."""
    pods = [name.split(":", 1)[0] for name in change["allocatorPods"]]
    hosts = change.get("hostAllocators", ["device-plugin"] if change.get("hostPlugin") else [])
    return pods + list(hosts)


@_on(MOVED)
def test_after_the_change_the_dra_claim_was_allocated_the_published_gpu_and_the_probe_passed(
    report: dict[str, Any],
) -> None:
    detail = _step(report, DRA_SMOKE_STEP)["detail"]
    (allocation,) = detail["allocation"]
    published = report["resourceSlice"]["spec"]
    assert allocation["driver"] == published["driver"] == "gpu.nvidia.com"
    assert allocation["pool"] == published["pool"]["name"] == published["nodeName"]
    assert allocation["device"] in [device["name"] for device in published["devices"]]
    (prepared,) = detail["driverPrepared"]
    assert "newly prepared devices" in prepared
    probe = report["probes"]["dra"]
    assert probe["status"] == "pass"
    assert probe["device"]["uuid"] == report["probes"]["default"]["device"]["uuid"]


@_on(MOVED)
def test_the_simulated_slice_of_the_card_is_what_the_dra_driver_published(report: dict[str, Any]) -> None:
    host = _simulated_host(report)
    simulated = simulate.resource_slice(host, "uid")
    assert simulated is not None
    (real,) = report["resourceSlice"]["spec"]["devices"]
    (device,) = simulated["spec"]["devices"]
    assert sorted(device["attributes"]) == sorted(real["attributes"])
    assert {k: sorted(v) for k, v in device["attributes"].items()} == {
        k: sorted(v) for k, v in real["attributes"].items()
    }
    for name in ("productName", "architecture", "cudaComputeCapability", "type", "brand", "addressingMode"):
        assert device["attributes"][name] == real["attributes"][name], name
    assert device["capacity"] == real["capacity"]


@_on(SLICED_FROM_DAEMONSET)
def test_the_time_sliced_plugin_ran_from_the_daemonset_and_its_config_manager_chose_the_programs_config(
    report: dict[str, Any],
) -> None:
    detail = _step(report, SLICED_DAEMONSET_STEP)["detail"]
    assert detail["pod"]["ownerKind"] == "DaemonSet"
    assert detail["pod"]["owner"] == ["device-plugin", "allocator"]
    assert set(detail["imageReplaced"]) == {
        "nvidia-device-plugin-init",
        "nvidia-device-plugin-sidecar",
        "nvidia-device-plugin-ctr",
    }
    # The config-manager read the node through the API (no config label there) and chose the chart's default,
    # the program's `time-slicing` entry, as the simulated kubelet assumes (devicemanager._selected_config).
    assert any("Selecting default name: time-slicing" in line for line in detail["pluginLog"])
    assert "nvidia-gpu.shared.sock" in detail["sockets"]
    assert detail["published"] == report["published"]["timeSlicing"]


@_on(MOVED_BACK)
def test_the_move_back_wiped_the_drivers_slice_before_the_plugin_published_again(report: dict[str, Any]) -> None:
    detail = _step(report, BACK_STEP)["detail"]
    assert list(detail["phases"]) == PHASES
    # The kubelet deletes an unregistered driver's slices after its 30 s wiping delay (pkg/kubelet/cm/dra).
    assert detail["phases"]["wait-unpublished"] >= 30
    assert detail["install"]["pod"]["ownerKind"] == "DaemonSet"
    owners = [_allocators(change) for change in report["sampler"]["changes"]]
    last_dra = max(i for i, now in enumerate(owners) if "dra" in now)
    assert all("device-plugin" not in now for now in owners[: last_dra + 1] if "dra" in now)
    assert report["sampler"]["changes"][-1]["resourceSlices"] == 0
    assert report["probes"]["back"]["status"] == "pass"
    assert report["probes"]["back"]["device"]["uuid"] == report["probes"]["default"]["device"]["uuid"]


@_on(MOVED)
def test_the_simulation_follows_the_real_kubelet_through_both_owner_changes(report: dict[str, Any]) -> None:
    host = _simulated_host(report)
    labels = _step(report, KUBELET_STEP)["detail"]["labels"]
    published = report["published"]
    # The plugin gone for DRA: its resources kept in capacity, nothing allocatable.
    assert _simulated(host, labels, _before_move(report), [], {}) == published["afterMove"]
    if "back" in published:
        default = report["rendered"]["default"]
        simulated = _simulated(host, labels, published["afterMove"], [_ready_pod(default)], _configmaps(default))
        assert simulated == published["back"]
