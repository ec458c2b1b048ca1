"""DRA DeviceClasses and the claim template, in resource.k8s.io/v1.

The pinned Kubernetes SDK predates typed resource.k8s.io/v1 classes, so these are registered by
apiVersion/kind; the provider and the API server treat them exactly like typed resources, and the API
server validates the CEL selectors at preview (server-side dry run).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from policy.gpu_allocation.vocab.dra_attributes import DRIVER_DOMAIN
from policy.gpu_allocation.vocab.labels import LABEL_PREFIX

API_VERSION = "resource.k8s.io/v1"

FULL_GPU_CLASS = "hybrid-full-gpu"
LARGE_GPU_CLASS = "hybrid-large-gpu"
CLAIM_TEMPLATE = "single-large-gpu"

FULL_GPU_EXPRESSION = f'device.driver == "{DRIVER_DOMAIN}" && device.attributes["{DRIVER_DOMAIN}"].type == "gpu"'
"""`type == "gpu"` excludes MIG and VFIO devices published under the same driver."""


def large_gpu_expression(min_memory: str, extra: str | None = None) -> str:
    """More than `min_memory` of advertised memory: a memory floor, not an H100/H200-only selector."""
    expression = (
        f'{FULL_GPU_EXPRESSION} && device.capacity["{DRIVER_DOMAIN}"].memory.isGreaterThan(quantity("{min_memory}"))'
    )
    return f"{expression} && ({extra})" if extra else expression


class DraObjects(pulumi.ComponentResource):
    """hybrid-full-gpu, hybrid-large-gpu and the single-large-gpu ResourceClaimTemplate."""

    claim_template_name: pulumi.Output[str]
    """Name pods put in resourceClaimTemplateName."""
    device_class_names: pulumi.Output[list[str]]
    """The DeviceClasses this component owns."""

    def __init__(
        self,
        name: str,
        *,
        workloads_namespace: pulumi.Input[str],
        large_gpu_memory: str,
        extra_selector: str | None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("eks-hybrid-gpu:dra:DraObjects", name, None, opts)
        labels = {f"{LABEL_PREFIX}/component": "dra-objects"}
        classes = {
            FULL_GPU_CLASS: FULL_GPU_EXPRESSION,
            LARGE_GPU_CLASS: large_gpu_expression(large_gpu_memory, extra_selector),
        }
        for class_name, expression in classes.items():
            k8s.apiextensions.CustomResource(
                f"{name}-{class_name}",
                api_version=API_VERSION,
                kind="DeviceClass",
                metadata={"name": class_name, "labels": labels},
                spec={"selectors": [{"cel": {"expression": expression}}]},
                opts=pulumi.ResourceOptions(parent=self),
            )
        k8s.apiextensions.CustomResource(
            f"{name}-{CLAIM_TEMPLATE}",
            api_version=API_VERSION,
            kind="ResourceClaimTemplate",
            metadata={"name": CLAIM_TEMPLATE, "namespace": workloads_namespace, "labels": labels},
            spec={
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": LARGE_GPU_CLASS,
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                },
                            }
                        ]
                    }
                }
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.claim_template_name = pulumi.Output.from_input(CLAIM_TEMPLATE)
        self.device_class_names = pulumi.Output.from_input(list(classes))
        self.register_outputs(
            {"claim_template_name": self.claim_template_name, "device_class_names": self.device_class_names}
        )
