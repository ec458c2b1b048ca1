"""Which Kubernetes release a stack runs on, as the pack learns it: the stack's config, else the policy config.

What a DeviceClass's ``spec.extendedResourceName`` does depends on the version (KEP-5004, gate
``DRAExtendedResource``: alpha and off in 1.34 and 1.35, on from 1.36), and the pack cannot ask the cluster. Two
places can tell it:

- **the stack's config.** The engine sends it in the analyzer's ``ConfigureStack`` call; the pack keeps it where
  pulumi-policy reads config (``sdk_internals.take_stack_config_from_configure_stack``), and pulumi-policy copies it
  into ``pulumi.runtime`` config before every Analyze call. ``tests/integration/test_pack_reads_the_version.py``
  shows it arriving in a real preview. This program's stacks declare
  ``eks-hybrid-gpu:cluster.kubernetesVersion`` and ``.featureGates`` there (``components/config.py``).
- **the policy config** of the policy that needs it (``kubernetesVersion``, ``featureGates``,
  ``oldestKubeletVersion``), for a stack of another program, or one of this program's whose version EKS reports at
  run time (``cluster.source: eks`` without ``kubernetesVersion``).

The stack's config wins when it names a version: it is what the program deploys against. When neither names one,
the version is unknown, and a check that depends on it says so (fail closed); a value that cannot be read is a
finding like any other. What each version does comes from the one table, :mod:`..vocab.kube_releases`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import pulumi

from ..vocab import kube_releases
from ..vocab.grammar import FEATURE_GATE, KUBERNETES_VERSION
from ..vocab.labels import PROJECT
from ..vocab.parsing import load_json
from .findings import PREVIEW_AGAIN
from .props import show

STACK_KEY: Final = f"{PROJECT}:cluster"
"""The stack-config key holding ``kubernetesVersion`` and ``featureGates``."""

VERSION_CONFIG: Final[dict[str, dict[str, Any]]] = {
    "kubernetesVersion": {
        "type": "string",
        "description": "The cluster's Kubernetes version (e.g. 1.37.2), for a stack whose own config does not "
        f"declare {STACK_KEY}.kubernetesVersion.",
    },
    "featureGates": {
        "type": "object",
        "additionalProperties": {"type": "boolean"},
        "description": "The DRA feature gates the cluster sets against that version's defaults, e.g. "
        '{"DRAExtendedResource": true} on 1.34/1.35 (read with kubernetesVersion).',
    },
    "oldestKubeletVersion": {
        "type": "string",
        "description": "The oldest kubelet of the GPU nodes (hybrid kubelets may run three minors behind): the "
        "older of it and the control plane decides each gate.",
    },
}
"""The config properties of every policy that depends on the version (merged into its PolicyConfigSchema)."""


@dataclass(frozen=True)
class ClusterVersion:
    """The release the pack judges by, and where it learned it; or why it cannot know."""

    release: kube_releases.Release | None
    source: str
    """Where the version came from, for messages: ``… in the stack config`` or ``… in the policy config of …``."""
    problem: str | None = None
    """Why the version cannot be known (no source, or a value that cannot be read); None when known."""

    @property
    def mapping_on(self) -> bool:
        """KEP-5004 is on: a DeviceClass's extendedResourceName serves plain requests of that name."""
        return self.release is not None and self.release.keeps_extended_resource_name

    def gate_words(self) -> str:
        """``DRAExtendedResource is off in Kubernetes 1.35 (alpha, off by default; <source>)``, for messages."""
        if self.release is None:
            return f"{kube_releases.DRA_EXTENDED_RESOURCE} cannot be told ({self.problem})"
        stage = kube_releases.stage_at(kube_releases.DRA_EXTENDED_RESOURCE, self.release.minor)
        state = "on" if self.mapping_on else "off"
        default = f"{stage.stage}, {'on' if stage.default else 'off'} by default" if stage else "not in this version"
        gate = kube_releases.DRA_EXTENDED_RESOURCE
        return f"{gate} is {state} in Kubernetes {self.release.name} ({default}; {self.source})"


def how_to_tell(policy: str) -> str:
    """The fix for a version the pack cannot know: where to declare it, and the next command."""
    return (
        f"Declare it: in this program's stack, `pulumi config set --path {STACK_KEY}.kubernetesVersion 1.37.2` (and "
        f"{STACK_KEY}.featureGates where the cluster sets DRA gates); for any stack, give the pack "
        f'{{"{policy}": {{"kubernetesVersion": "1.37.2"}}}} with --policy-pack-config; {PREVIEW_AGAIN}'
    )


def cluster_version(policy_config: Mapping[str, Any], policy: str) -> ClusterVersion:
    """The release the stack runs on: the stack's ``eks-hybrid-gpu:cluster``, else the policy config of ``policy``."""
    stack, problem = _stack_cluster()
    if problem is not None:
        return ClusterVersion(None, f"{STACK_KEY} in the stack config", problem)
    if stack is not None and stack.get("kubernetesVersion") is not None:
        return _read(stack, f"{STACK_KEY}.", "in the stack config", with_kubelet=False)
    if policy_config.get("kubernetesVersion") is not None:
        return _read(policy_config, "", f"in the policy config of {policy}", with_kubelet=True)
    return ClusterVersion(
        None,
        "",
        f"the pack cannot know the cluster's Kubernetes version: the stack config has no {STACK_KEY}.kubernetesVersion "
        f"and the policy config of {policy} has no kubernetesVersion",
    )


def _stack_cluster() -> tuple[dict[str, Any] | None, str | None]:
    """The stack config's ``eks-hybrid-gpu:cluster`` object (None when unset), or why it cannot be read."""
    raw = pulumi.runtime.get_config(STACK_KEY)
    if raw is None:
        return None, None
    value, error = load_json(raw) if isinstance(raw, str) else (raw, None)
    if error is not None:
        return None, f"{STACK_KEY} in the stack config {error}"
    if not isinstance(value, dict):
        return None, f"{STACK_KEY} in the stack config is not an object"
    return value, None


def _read(config: Mapping[str, Any], prefix: str, where: str, *, with_kubelet: bool) -> ClusterVersion:
    version = config.get("kubernetesVersion")
    source = f"{prefix}kubernetesVersion {show(version)} {where}"
    control = _minor(version)
    if control is None:
        why = f"{prefix}kubernetesVersion {where} is {show(version)}, no Kubernetes version"
        return ClusterVersion(None, source, why)
    gates = config.get("featureGates")
    overrides: dict[str, bool] = {}
    if gates is not None:
        if not isinstance(gates, Mapping) or not all(
            isinstance(k, str) and FEATURE_GATE.fullmatch(k) and isinstance(v, bool) for k, v in gates.items()
        ):
            return ClusterVersion(
                None, source, f"{prefix}featureGates {where} is {show(gates)}, not a map of gate names to booleans"
            )
        overrides = dict(gates)
        if overrides.get(kube_releases.DRA_EXTENDED_RESOURCE) is not None:
            wanted = str(overrides[kube_releases.DRA_EXTENDED_RESOURCE]).lower()
            source += f" with {prefix}featureGates.{kube_releases.DRA_EXTENDED_RESOURCE}: {wanted}"
    kubelets: list[kube_releases.Minor] = []
    kubelet = config.get("oldestKubeletVersion") if with_kubelet else None
    if kubelet is not None:
        found = _minor(kubelet)
        if found is None:
            why = f"oldestKubeletVersion {where} is {show(kubelet)}, no Kubernetes version"
            return ClusterVersion(None, source, why)
        kubelets.append(found)
        source += f" and oldestKubeletVersion {show(kubelet)}"
    return ClusterVersion(kube_releases.effective(control, kubelets, overrides), source)


def _minor(version: Any) -> kube_releases.Minor | None:
    if not isinstance(version, str):
        return None
    match = KUBERNETES_VERSION.fullmatch(version)
    if match is None:
        return None
    return int(match["major"]), int(match["minor"])
