"""The guide's seed documents and the other policy fixtures, read from their one home: tests/fixtures/policy/.

The component tests compare what the program registers with these documents key by key; the policy tests feed
them to the pack. Its README says where each file comes from. Every call returns a fresh copy, so a test may
edit what it gets.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "policy"

DEVICE_PLUGIN_VALUES = "device-plugin-values.yaml"
"""The guide's device-plugin values (seed chapter, "Standalone device plugin")."""
DRA_VALUES = "dra-values.yaml"
"""The guide's DRA values (seed chapter, "Standalone DRA")."""
GPU_CLUSTER_VALUES = "operator-gpu-cluster-values.yaml"
"""The guide's GPUCluster fragment of the Operator values (seed chapter, "GPU Operator alternative")."""
DRA_OBJECTS = "seed-dra-objects.yaml"
"""DeviceClasses hybrid-full-gpu and hybrid-large-gpu, ResourceClaimTemplate single-large-gpu."""
SMOKE_JOBS = "seed-smoke-jobs.yaml"
"""The two smoke Jobs, device plugin then DRA (placeholder image, a tag)."""
TIME_SLICING_VALUES = "device-plugin-time-slicing-values.yaml"
"""The device-plugin values with the guide's time-slicing fragment in ``config.map``."""


@functools.cache
def _load(file_name: str) -> list[dict[str, Any]]:
    with (FIXTURES / file_name).open() as handle:
        return [d for d in yaml.safe_load_all(handle) if d]


def documents(file_name: str) -> list[dict[str, Any]]:
    """The documents of a fixture file, in order."""
    return copy.deepcopy(_load(file_name))


def document(file_name: str) -> dict[str, Any]:
    """The one document of a fixture file (a values file)."""
    loaded = documents(file_name)
    assert len(loaded) == 1, file_name
    return loaded[0]


def time_slicing() -> dict[str, Any]:
    """The guide's time-slicing fragment: device-plugin configuration, not a Kubernetes resource."""
    fragment: dict[str, Any] = yaml.safe_load(document(TIME_SLICING_VALUES)["config"]["map"]["time-slicing"])
    return fragment
