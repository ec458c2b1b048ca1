"""The standalone NVIDIA DRA driver for one cohort, rendered with Chart v4 from its OCI chart."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi

from components.config import ChartPin
from components.owner_chart import Upstream, owner_chart
from components.stamping import Ownership
from policy.gpu_allocation.vocab.labels import DRA


def dra_driver_values(selector: Mapping[str, str], feature_gates: Mapping[str, bool]) -> dict[str, Any]:
    """The GPU integration guide's values with the cohort's selector.

    `nvidiaDriverRoot: /` assumes a host-installed driver with CDI; an Operator-installed driver uses a
    different root, so this component is never combined with an Operator-managed driver. ComputeDomains
    stay off: ordinary H100/H200 allocation needs no multi-node NVLink orchestration.
    """
    return {
        "gpuResourcesEnabledOverride": True,
        "nvidiaDriverRoot": "/",
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "featureGates": dict(feature_gates),
        "kubeletPlugin": {
            "nodeSelector": dict(selector),
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "containers": {
                "gpus": {
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "128Mi"},
                        "limits": {"cpu": "1", "memory": "512Mi"},
                    }
                }
            },
        },
        "webhook": {"enabled": False},
    }


def without_extended_resource_name(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """Drop `spec.extendedResourceName` from the chart's DeviceClasses, unless the stack keeps the name.

    On resource.k8s.io/v1 the chart's `gpu.nvidia.com` class declares `extendedResourceName:
    nvidia.com/gpu` (KEP-5004). Where that feature is on (beta from 1.36), pods asking for nvidia.com/gpu are
    served from DRA devices on nodes that do not publish the name through a device plugin; where it is off
    (1.34, 1.35), the API server drops the field and every preview shows a diff. Unless `dra.extendedResourceName`
    asks for the mapping (the move from the device plugin that keeps workloads unchanged), DRA devices are
    reached through claims only.
    """
    if args.type_ != "kubernetes:resource.k8s.io/v1:DeviceClass":
        return None
    spec = args.props.get("spec")
    if not isinstance(spec, dict) or "extendedResourceName" not in spec:
        return None
    trimmed = {key: value for key, value in spec.items() if key != "extendedResourceName"}
    return pulumi.ResourceTransformResult(props={**args.props, "spec": trimmed}, opts=args.opts)


class DraDriver(pulumi.ComponentResource):
    """dra-driver-nvidia-gpu with its kubelet plugin on the nodes of one cohort."""

    release_name: pulumi.Output[str]
    """Helm release name."""

    def __init__(
        self,
        name: str,
        *,
        cohort_name: str,
        ownership: Ownership,
        chart: ChartPin,
        namespace: pulumi.Input[str],
        feature_gates: Mapping[str, bool],
        skip_await: bool,
        keep_extended_resource_name: bool = False,
        project_dir: Path,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("eks-hybrid-gpu:owners:DraDriver", name, None, opts)
        release = f"hybrid-gpu-{cohort_name}"
        owner_chart(
            f"{name}-chart",
            upstream=Upstream.of(DRA),
            pin=chart,
            project_dir=project_dir,
            release=release,
            namespace=namespace,
            values=dra_driver_values(ownership.selector, feature_gates),
            ownership=ownership,
            skip_await=skip_await,
            parent=self,
            transforms=[] if keep_extended_resource_name else [without_extended_resource_name],
        )
        self.release_name = pulumi.Output.from_input(release)
        self.register_outputs({"release_name": self.release_name})
