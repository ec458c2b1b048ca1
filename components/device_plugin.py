"""The standalone NVIDIA device plugin for one cohort, rendered with Chart v4 so every DaemonSet is visible."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi
import yaml

from components.config import ChartPin, CohortConfig, Mig, TimeSlicing
from components.owner_chart import Upstream, owner_chart
from components.stamping import Ownership
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN
from policy.gpu_allocation.vocab.mig import mig_resource_name

TIME_SLICING_CONFIG_NAME = "time-slicing"
"""Key of the sharing config inside the chart's config map, selected as the default config."""


def time_slicing_config(sharing: TimeSlicing) -> str:
    """The device plugin's sharing config file (a plugin config, not a Kubernetes object)."""
    document = {
        "version": "v1",
        "sharing": {
            "timeSlicing": {
                "renameByDefault": sharing.rename_by_default,
                "failRequestsGreaterThanOne": sharing.fail_requests_greater_than_one,
                "resources": [{"name": "nvidia.com/gpu", "replicas": sharing.replicas}],
            }
        },
    }
    return yaml.safe_dump(document, sort_keys=False)


def device_plugin_values(cohort: CohortConfig, selector: Mapping[str, str], runtime_class: str) -> dict[str, Any]:
    """The GPU integration guide's values, with the cohort's selector and sharing.

    `affinity` is deliberately absent: the chart's GPU-discovery affinity is ANDed with the nodeSelector,
    and removing it to get pods running is what the source material forbids. Types matter: the chart
    tests `failOnInitError` with typeIs bool and `migStrategy` with typeIs string.
    """
    mig_strategy = cohort.sharing.mig_strategy if isinstance(cohort.sharing, Mig) else "none"
    values: dict[str, Any] = {
        "nodeSelector": dict(selector),
        "runtimeClassName": runtime_class,
        "migStrategy": mig_strategy,
        "failOnInitError": True,
        "deviceListStrategy": "envvar",
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"},
        },
    }
    if isinstance(cohort.sharing, TimeSlicing):
        # An unattached ConfigMap changes nothing: config.map renders the chart's own ConfigMap and
        # config.default selects it on every node of the release.
        values["config"] = {
            "map": {TIME_SLICING_CONFIG_NAME: time_slicing_config(cohort.sharing)},
            "default": TIME_SLICING_CONFIG_NAME,
        }
    return values


def advertised_resource(cohort: CohortConfig) -> str:
    """The extended resource the cohort's nodes advertise and its workloads request."""
    sharing = cohort.sharing
    if isinstance(sharing, TimeSlicing) and sharing.rename_by_default:
        return "nvidia.com/gpu.shared"
    if isinstance(sharing, Mig) and sharing.mig_strategy == "mixed":
        return mig_resource_name(sharing.mig_profile or "")
    return "nvidia.com/gpu"


class DevicePlugin(pulumi.ComponentResource):
    """nvidia-device-plugin on the nodes of one cohort."""

    release_name: pulumi.Output[str]
    """Helm release name; prefixes the rendered object names."""
    resource_name: pulumi.Output[str]
    """Extended resource the cohort's nodes advertise: nvidia.com/gpu, nvidia.com/gpu.shared or nvidia.com/mig-*."""

    def __init__(
        self,
        name: str,
        *,
        cohort: CohortConfig,
        ownership: Ownership,
        chart: ChartPin,
        namespace: pulumi.Input[str],
        runtime_class: str,
        skip_await: bool,
        project_dir: Path,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("eks-hybrid-gpu:owners:DevicePlugin", name, None, opts)
        release = f"hybrid-gpu-{cohort.name}"
        owner_chart(
            f"{name}-chart",
            upstream=Upstream.of(DEVICE_PLUGIN),
            pin=chart,
            project_dir=project_dir,
            release=release,
            namespace=namespace,
            values=device_plugin_values(cohort, ownership.selector, runtime_class),
            ownership=ownership,
            skip_await=skip_await,
            parent=self,
        )
        self.release_name = pulumi.Output.from_input(release)
        self.resource_name = pulumi.Output.from_input(advertised_resource(cohort))
        self.register_outputs({"release_name": self.release_name, "resource_name": self.resource_name})
