"""The simulated DRA slice says what the real NVIDIA DRA driver said on the lent H200, name for name, type for type.

`tests/fixtures/dra/h200-dra-0.4.1-resourceslice.json` is the ResourceSlice `gpu-kubelet-plugin` v0.4.1 published
for an H200 to a real kube-apiserver 1.34.4 (../shared/reference/hardware/README.md says how it was run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eks_hybrid_gpu import simulate
from policy.gpu_allocation.vocab.dra_attributes import (
    FULL_GPU_ATTRIBUTES,
    FULL_GPU_CAPACITY,
    MIG_ATTRIBUTES,
    nvml_semver,
    slice_attribute_types,
)

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dra"


def _real_device() -> dict[str, Any]:
    document = json.loads((FIXTURES / "h200-dra-0.4.1-resourceslice.json").read_text())
    (item,) = document["items"]
    (device,) = item["spec"]["devices"]
    return dict(device)


def _simulated_h200(extra: str = "") -> list[dict[str, Any]]:
    node = simulate.load(f"nodes: [{{name: h200-0, cohort: dra, hostAllocator: dra, gpus: [{{model: H200}}]{extra}}}]")
    found = simulate.resource_slice(node.nodes[0], "uid")
    assert found is not None
    return list(found["spec"]["devices"])


def _types(device: dict[str, Any]) -> dict[str, str]:
    """Attribute name -> its one value key (string, version, int, bool)."""
    return {name: next(iter(value)) for name, value in device["attributes"].items()}


def test_the_simulated_h200_has_the_real_attribute_names_and_types() -> None:
    (simulated,) = _simulated_h200()

    assert _types(simulated) == _types(_real_device())


def test_the_simulated_h200_has_the_real_capacity() -> None:
    (simulated,) = _simulated_h200()

    assert simulated["capacity"] == _real_device()["capacity"] == {"memory": {"value": "143771Mi"}}


def test_the_simulated_h200_publishes_the_real_model_and_driver_facts() -> None:
    (simulated,) = _simulated_h200()
    real = _real_device()
    host_specific = {"uuid", "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot"}

    assert {k: v for k, v in simulated["attributes"].items() if k not in host_specific} == {
        k: v for k, v in real["attributes"].items() if k not in host_specific
    }
    assert simulated["name"] == real["name"] == "gpu-0"
    assert "index" not in simulated["attributes"]


def test_a_host_driver_is_published_as_semver() -> None:
    (simulated,) = _simulated_h200(", driverVersion: 570.86.15, cudaDriverVersion: '12.8'")

    assert simulated["attributes"]["driverVersion"] == {"version": "570.86.15"}
    assert simulated["attributes"]["cudaDriverVersion"] == {"version": "12.8.0"}
    assert (nvml_semver("580.159.04"), nvml_semver("9.0")) == ("580.159.4", "9.0.0")


def test_the_attribute_table_is_the_recorded_slice() -> None:
    real = _real_device()

    assert slice_attribute_types(FULL_GPU_ATTRIBUTES) == _types(real)
    assert tuple(real["capacity"]) == FULL_GPU_CAPACITY


def test_every_simulated_device_keeps_to_the_driver_table() -> None:
    fleet = simulate.default_simulation()
    tables = {"gpu": slice_attribute_types(FULL_GPU_ATTRIBUTES), "mig": slice_attribute_types(MIG_ATTRIBUTES)}
    seen = set()

    for node in fleet.nodes:
        found = simulate.resource_slice(node, "uid")
        for device in found["spec"]["devices"] if found else []:
            kind = device["attributes"]["type"]["string"]
            seen.add(kind)
            assert _types(device) == tables[kind], device["name"]
    assert seen == {"gpu", "mig"}


@pytest.mark.parametrize(("model", "memory"), [("H100", "81559Mi"), ("A100-40GB", "40960Mi"), ("A10G", "23028Mi")])
def test_other_models_publish_nvml_mebibytes(model: str, memory: str) -> None:
    node = simulate.load(f"nodes: [{{name: n0, cohort: dra, hostAllocator: dra, gpus: [{{model: {model}}}]}}]")
    found = simulate.resource_slice(node.nodes[0], "uid")

    assert found is not None
    assert found["spec"]["devices"][0]["capacity"] == {"memory": {"value": memory}}


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            "driverVersion: 'r580'",
            "nodes.0.driverVersion: 'r580' is not an NVML driver version: write MAJOR.MINOR[.PATCH] as nvidia-smi "
            "prints it, e.g. 580.159.04",
        ),
        (
            "cudaDriverVersion: '13'",
            "nodes.0.cudaDriverVersion: '13' is not a CUDA driver version: write MAJOR.MINOR as nvidia-smi prints it, "
            "e.g. 13.0",
        ),
    ],
)
def test_a_bad_host_driver_version_is_refused_with_its_path(entry: str, problem: str) -> None:
    with pytest.raises(simulate.SimulationError) as refused:
        simulate.load(f"nodes: [{{name: n0, gpus: [{{model: H200}}], {entry}}}]")

    assert str(refused.value).splitlines()[1:] == [f"  - {problem}"]
