"""What each allocation owner needs from a cohort node's own report: its kubelet and its container runtime.

EKS Hybrid Nodes get their kubelet and containerd from `nodeadm` on each host, and a kubelet may run up to three
minor versions behind the control plane, so a 1.34 control plane (checked in `components.validation`) can have
DRA hosts on a 1.31 kubelet, whose DRA API is not resource.k8s.io/v1, or on a containerd without CDI: the DRA
kubelet plugin would install there and its claims would never be prepared. So the preflight and `inspect` read
`status.nodeInfo` of every cohort node against the floors of the owner's mode (its registry entry,
`policy/gpu_allocation/vocab/owners.py`; the containerd CDI floors are here). A version that is
missing or does not parse is "cannot tell", refused like one below the floor: the check does not pass what it
cannot judge. Plain data in, records out; the callers put them into words with their config path or finding.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from cluster.findings import show
from policy.gpu_allocation.vocab import versioning
from policy.gpu_allocation.vocab.labels import Owner
from policy.gpu_allocation.vocab.owners import OWNER_KINDS, ModeKey, Version, mode_of

# CDI in containerd: 1.7 added it behind `enable_cdi = true` in the CRI plugin's config; 2.0 turned it on by default
# (containerd's release notes; eks_hybrid_gpu/hostcheck/containerd.py reads the setting on a host).
CDI_MIN_CONTAINERD: Final = (1, 7, 0)
"""The first containerd with CDI; it needs `enable_cdi = true` in the CRI plugin's config."""
CDI_DEFAULT_CONTAINERD: Final = (2, 0, 0)
"""From here containerd enables CDI by default."""

NodeOwner = ModeKey
"""An owner as the nodes see it: its mode (the GPU Operator's two modes need different kubelets)."""
Fact = Literal["kubelet", "runtime"]
Trouble = Literal["below-floor", "cannot-tell", "not-containerd", "needs-setting"]
"""cannot-tell: missing or unparsable, refused like below-floor. needs-setting: containerd 1.7.x, whose CDI is off
unless configured; not refused (hostcheck reads the config, and a DRA cohort's hostDriverVerified says it ran)."""

KUBELET_FIELD: Final = "status.nodeInfo.kubeletVersion"
RUNTIME_FIELD: Final = "status.nodeInfo.containerRuntimeVersion"
CONTAINERD: Final = "containerd"
MAX_REPORTED: Final = 128
"""A version string longer than this is no version a kubelet reports: cannot tell."""

_RUNTIME = re.compile(r"([a-z0-9][a-z0-9._-]{0,62})://(.*)", re.ASCII | re.DOTALL)
"""NAME://VERSION, as the kubelet reports the CRI runtime: containerd://2.0.5, cri-o://1.30.1."""

UPGRADE_KUBELET: Final = (
    "drain the node and upgrade the host with `sudo nodeadm upgrade <the control plane's Kubernetes minor version> "
    "--config-source file://nodeConfig.yaml`"
)


@dataclass(frozen=True)
class NodeFloor:
    """What one owner needs from every node it serves."""

    title: str
    kubelet: Version
    why: str
    """Where the kubelet floor comes from, in a few words."""
    cdi: bool
    """Needs a CDI-enabled containerd (the DRA path)."""
    hostcheck_owner: str
    """`eks-hybrid-gpu hostcheck --owner` value for this owner."""


FLOORS: Final[dict[NodeOwner, NodeFloor]] = {
    mode.key: NodeFloor(
        mode.title,
        mode.min_kubelet,
        mode.kubelet_source,
        cdi=mode.host.cdi_required,
        hostcheck_owner=mode.hostcheck_key,
    )
    for kind in OWNER_KINDS.values()
    for mode in kind.modes
}
"""Every mode of every registered owner kind, by its key."""


def node_owner(owner: Owner, operator_mode: str | None) -> NodeOwner:
    """The floors' key for a cohort owner and, for the GPU Operator, its mode (cluster-policy unless gpu-cluster)."""
    return mode_of(owner, operator_mode).key


def dotted(version: Version) -> str:
    """(1, 34, 2) -> '1.34.2'."""
    return ".".join(map(str, version))


def kubelet_version(text: object) -> versioning.Version | None:
    """A kubelet's `status.nodeInfo.kubeletVersion`, ordered as Kubernetes orders its own versions; None if unread.

    Kubernetes compares versions with k8s.io/apimachinery/pkg/util/version (`Version.compareInternal`: a version
    with a pre-release sorts below the same one without), so `v1.34.2-rc.1` is below a 1.34.2 floor. A
    distribution's build suffix (`-eks-3025e55`) is a build of the release (`versioning`), as EKS ships it.
    """
    if not isinstance(text, str) or len(text) > MAX_REPORTED:
        return None
    return versioning.parse(text)


def runtime_release(text: object) -> Version | None:
    """`2.0.5-1` -> (2, 0, 5): the release of a container runtime's reported version; None if unread.

    What follows the release in a runtime's version is a distribution's package revision (`-1`, `-0ubuntu1~24.04.1`),
    not a SemVer pre-release: containerd's CDI floors compare the release only.
    """
    if not isinstance(text, str) or len(text) > MAX_REPORTED:
        return None
    found = versioning.parse(text)
    return found.release if found else None


@dataclass(frozen=True)
class Runtime:
    """A reported container runtime: its name, and its version when that parses."""

    name: str
    version: Version | None


def parse_runtime(text: object) -> Runtime | None:
    """`containerd://2.0.5-1` -> Runtime('containerd', (2, 0, 5)); None when it is not NAME://VERSION."""
    if not isinstance(text, str) or len(text) > MAX_REPORTED:
        return None
    found = _RUNTIME.fullmatch(text)
    return Runtime(found[1], runtime_release(found[2])) if found else None


def reported(node: Mapping[str, Any]) -> tuple[object, object]:
    """(kubeletVersion, containerRuntimeVersion) as the node reports them; None where absent."""
    status = node.get("status")
    info = status.get("nodeInfo") if isinstance(status, Mapping) else None
    if not isinstance(info, Mapping):
        return None, None
    return info.get("kubeletVersion"), info.get("containerRuntimeVersion")


@dataclass(frozen=True)
class Issue:
    """One node fact that does not meet (or cannot be judged against) the owner's floor."""

    node: str
    fact: Fact
    trouble: Trouble
    value: object
    """What the node reports (None: nothing)."""
    owner: NodeOwner

    @property
    def refused(self) -> bool:
        """Everything but containerd 1.7's CDI setting, which only the host's config shows."""
        return self.trouble != "needs-setting"

    def describe(self) -> str:
        """The issue in words after "whose" or "its", with the floor and the fix; the caller adds the cohort way out."""
        floor = FLOORS[self.owner]
        hostcheck = f"`sudo eks-hybrid-gpu hostcheck --owner {floor.hostcheck_owner}`"
        cdi = (
            f"containerd {dotted(CDI_MIN_CONTAINERD)}+ with enable_cdi = true in its CRI plugin config, or "
            f"{dotted(CDI_DEFAULT_CONTAINERD)}+ where CDI is on by default"
        )
        runtime_need = f"a CDI-enabled containerd ({cdi})" if floor.cdi else "containerd"
        if self.fact == "kubelet":
            need = f"{floor.title} needs kubelet {dotted(floor.kubelet)}+ ({floor.why})"
            if self.trouble == "below-floor":
                return f"kubelet reports {show(self.value)} ({KUBELET_FIELD}); {need}: {UPGRADE_KUBELET}"
            return (
                f"kubelet version is unknown ({KUBELET_FIELD} {_unparsable(self.value, 'vMAJOR.MINOR.PATCH')}); "
                f"{need}, and the preflight does not pass what it cannot read: check the host's kubelet "
                f"(`kubelet --version`); to upgrade it, {UPGRADE_KUBELET}"
            )
        if self.trouble == "not-containerd":
            return (
                f"container runtime is {show(self.value)} ({RUNTIME_FIELD}), not containerd; EKS Hybrid Nodes "
                f"run the containerd that `nodeadm install` puts on the host, and {floor.title} needs {runtime_need}: "
                f"bootstrap the host again with `nodeadm install` and `nodeadm init`, then check it with {hostcheck}"
            )
        if self.trouble == "below-floor":
            return (
                f"container runtime is {show(self.value)} ({RUNTIME_FIELD}), older than containerd "
                f"{dotted(CDI_MIN_CONTAINERD)}, the first with CDI; {floor.title} needs {runtime_need}: "
                f"upgrade containerd on the host, then check its config with {hostcheck}"
            )
        if self.trouble == "needs-setting":
            return (
                f"container runtime is {show(self.value)}: containerd 1.7.x enables CDI only with enable_cdi = "
                f"true in its CRI plugin config, which {floor.title} needs; the node cannot show its config: check it "
                f"with {hostcheck} on the host (or upgrade to containerd {dotted(CDI_DEFAULT_CONTAINERD)}+)"
            )
        return (
            f"container runtime is unknown ({RUNTIME_FIELD} "
            f"{_unparsable(self.value, 'containerd://MAJOR.MINOR.PATCH')}); {floor.title} needs {runtime_need}, "
            f"and the preflight does not pass what it cannot read: check the host's containerd "
            f"(`containerd --version`) and its config with {hostcheck}"
        )


def _unparsable(value: object, shape: str) -> str:
    if value is None:
        return "is missing"
    return f"is {show(value)}, not {shape}"


def check_node(node: Mapping[str, Any], owner: NodeOwner) -> list[Issue]:
    """Every way the node's kubelet and runtime fall short of the owner's floor; [] when they meet it."""
    floor = FLOORS[owner]
    metadata = node.get("metadata")
    name = str(metadata.get("name", "<unnamed>")) if isinstance(metadata, Mapping) else "<unnamed>"
    kubelet_text, runtime_text = reported(node)
    issues: list[Issue] = []
    kubelet = kubelet_version(kubelet_text)
    if kubelet is None:
        issues.append(Issue(name, "kubelet", "cannot-tell", kubelet_text, owner))
    elif kubelet < versioning.Version(*floor.kubelet):
        issues.append(Issue(name, "kubelet", "below-floor", kubelet_text, owner))
    runtime = parse_runtime(runtime_text)
    if runtime is None or (runtime.name == CONTAINERD and runtime.version is None):
        issues.append(Issue(name, "runtime", "cannot-tell", runtime_text, owner))
    elif runtime.name != CONTAINERD:
        issues.append(Issue(name, "runtime", "not-containerd", runtime_text, owner))
    elif floor.cdi and runtime.version is not None and runtime.version < CDI_MIN_CONTAINERD:
        issues.append(Issue(name, "runtime", "below-floor", runtime_text, owner))
    elif floor.cdi and runtime.version is not None and runtime.version < CDI_DEFAULT_CONTAINERD:
        issues.append(Issue(name, "runtime", "needs-setting", runtime_text, owner))
    return issues
