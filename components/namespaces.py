"""Namespaces owned by the GPU infrastructure operator, with Pod Security levels that fit what runs there."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_kubernetes as k8s

from policy.gpu_allocation.vocab.labels import LABEL_PREFIX

PRIVILEGED = "privileged"
RESTRICTED = "restricted"


def pod_security_labels(level: str) -> dict[str, str]:
    """Enforce `level`, and warn and audit at restricted so privileged namespaces stay visible in audits."""
    return {
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/audit": RESTRICTED,
        "pod-security.kubernetes.io/warn": RESTRICTED,
    }


class GpuNamespaces(pulumi.ComponentResource):
    """The owner and workload namespaces.

    Owner namespaces are privileged (the plugins mount host paths; the MPS daemon and the DRA kubelet
    plugin are privileged); the workloads namespace is restricted, which the hardened smoke Jobs satisfy.
    """

    names: pulumi.Output[dict[str, str]]
    """Role -> namespace name."""

    def __init__(
        self,
        name: str,
        *,
        namespaces: Mapping[str, tuple[str, str]],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`namespaces` maps a role (e.g. device-plugin) to (namespace name, Pod Security level)."""
        super().__init__("eks-hybrid-gpu:cluster:GpuNamespaces", name, None, opts)
        created: dict[str, pulumi.Output[str]] = {}
        for role, (ns_name, level) in namespaces.items():
            namespace = k8s.core.v1.Namespace(
                f"{name}-{role}",
                metadata={
                    "name": ns_name,
                    "labels": {**pod_security_labels(level), f"{LABEL_PREFIX}/role": role},
                },
                opts=pulumi.ResourceOptions(parent=self),
            )
            created[role] = namespace.metadata.apply(lambda m: str(m.name))
        self.names = pulumi.Output.all(**created).apply(lambda d: dict(d))  # type: ignore[arg-type]
        self.register_outputs({"names": self.names})
