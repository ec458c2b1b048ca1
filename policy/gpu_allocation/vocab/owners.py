"""The registry of GPU allocation owner kinds: the one place that says what each owner *is*.

Every reader that recognises an owner — the pack's chart classification, targeting, DRA and sharing rules, the
components' dispatch and validation, the chart mirror, the review render, the host check's floors — reads an
entry here, so a fourth owner kind (another vendor, the next DRA chart name) is one entry and one component
(docs/adding-an-owner-kind.md). Plain data, no Pulumi imports: the published pack carries it.

Sources: the charts' own metadata and values (../shared/reference/charts.md), the seed guide's version floors and
the field notes (second publishers, old chart names).
"""

import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, Mapping, Optional, Set, Tuple

from .labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR, Owner

if TYPE_CHECKING:
    from typing import Final

Version = Tuple[int, int, int]
if sys.version_info >= (3, 8):
    from typing import Literal

    Mechanism = Literal["extended-resource", "dra"]
else:  # typing.Literal is 3.8+; the host check's artifact runs on 3.6 and 3.7
    Mechanism = str
"""How a mode hands GPUs to pods: `nvidia.com/*` extended resources or `gpu.nvidia.com` ResourceSlices."""
if sys.version_info >= (3, 8):
    ModeKey = Literal["device-plugin", "dra", "cluster-policy", "gpu-cluster"]
else:  # typing.Literal is 3.8+; the host check's artifact runs on 3.6 and 3.7
    ModeKey = str


@dataclass(frozen=True)
class HostFloor:
    """What a host needs before a mode can work (compatibility floors, not recommendations)."""

    title: str
    driver_major: Optional[int]
    toolkit: Optional[Tuple[int, int]]
    """Minimum (major, minor) NVIDIA Container Toolkit; None: installed, any version."""
    toolkit_required: bool
    runtime_handler_required: bool
    cdi_required: bool
    source: str
    without_handler: str
    """Why a missing nvidia runtime handler is not a failure in this mode (unused when it is)."""


@dataclass(frozen=True)
class Mode:
    """One way an owner kind allocates: the device plugin and DRA driver have one, the Operator two."""

    key: ModeKey
    title: str
    mechanism: Mechanism
    min_kubelet: Version
    kubelet_source: str
    """Where the kubelet floor comes from, for messages."""
    host: HostFloor
    hostcheck_key: str
    """The host check's `--owner` value for this mode."""


@dataclass(frozen=True)
class ChartPin:
    """The owner's chart: its name, the names it had before, the pinned release and where upstream keeps it."""

    name: str
    version: str
    upstream: str
    """A Helm repository URL, or an `oci://` reference of the chart itself."""
    sha256: Optional[str]
    """sha256 of the released `helm package` archive; None: no known digest yet."""
    old_names: Tuple[str, ...] = ()
    fallback: Optional[Tuple[str, str]] = None
    """(version, sha256) of an older archive the local stack and chart-rendering tests may use from a mirror."""

    @property
    def names(self) -> Tuple[str, ...]:
        """The current name first, then the old ones."""
        return (self.name, *self.old_names)

    @property
    def archives(self) -> Dict[Tuple[str, str], Optional[str]]:
        """(chart, version) -> known digest, for the pinned release and the fallback."""
        known: Dict[Tuple[str, str], Optional[str]] = {(self.name, self.version): self.sha256}
        if self.fallback is not None:
            known[(self.name, self.fallback[0])] = self.fallback[1]
        return known


@dataclass(frozen=True)
class OwnerKind:
    """Everything the program and the pack know about one allocation owner kind."""

    owner: Owner
    title: str
    config_key: str
    """Its key under `charts.` and `namespaces.` in the stack config (`devicePlugin`)."""
    default_namespace: str
    chart: ChartPin
    app_labels: FrozenSet[str]
    """`app.kubernetes.io/name` of the chart's workloads, old chart names included."""
    images: FrozenSet[str]
    """Last path element of the owner's image repository (NGC, GHCR, registry.k8s.io, mirrors), old names too."""
    allocator_binary: str
    """The executable that publishes GPUs (or, for a manager, the manager's), recognised in a command or shell line."""
    modes: Tuple[Mode, ...]
    docs_url: str
    companion_commands: FrozenSet[str] = frozenset()
    """Commands of the owner's image that are part of its install and publish no GPU."""
    allocator_container: Optional[str] = None
    """The container name that publishes GPUs when the image also runs companions."""
    component_labels: Tuple[str, ...] = ()
    """Pod-template labels of the chart whose value `allocator_component` marks the allocator pod."""
    allocator_component: Optional[str] = None
    manager: bool = False
    """The owner's own pods publish nothing: they run operands that do (the GPU Operator)."""

    def mode(self, operator_mode: Optional[str] = None) -> Mode:
        """The mode a cohort of this owner runs in: the only one, or the Operator's by its `operator.mode`."""
        if len(self.modes) == 1:
            return self.modes[0]
        return next((m for m in self.modes if m.key == operator_mode), self.modes[0])


_DRA_HOST: "Final" = HostFloor(
    title="standalone DRA driver 0.5.0",
    driver_major=565,
    toolkit=(1, 18),
    toolkit_required=True,
    runtime_handler_required=False,
    cdi_required=True,
    source="DRA 0.5.0 prerequisites: driver 565+, Container Toolkit 1.18+, CDI-enabled runtime",
    without_handler="it allocates through CDI instead",
)
DRA_MIN_KUBERNETES: "Final[Version]" = (1, 34, 2)
"""DRA GPU allocation with resource.k8s.io/v1 requires Kubernetes 1.34.2 or newer (the seed guide)."""

# A kubelet may run up to three minor versions behind the control plane, and nodeadm installs each Hybrid Node's
# own, so every mode carries its own kubelet floor (cluster/judge/node_facts.py checks nodes against it). The charts'
# `-0` lets pre-release suffixes through, so a floor compares major.minor.patch only.
DEVICE_PLUGIN_KIND: "Final" = OwnerKind(
    owner=DEVICE_PLUGIN,
    title="NVIDIA device plugin",
    config_key="devicePlugin",
    default_namespace="gpu-system",
    chart=ChartPin(
        name="nvidia-device-plugin",
        version="0.20.0",
        upstream="https://nvidia.github.io/k8s-device-plugin",
        sha256="8b491b92ec7f3b7c0a806eedff27e36247b1dd986fbf91402776faa5a4d07c7e",
    ),
    app_labels=frozenset({"nvidia-device-plugin"}),
    images=frozenset({"k8s-device-plugin"}),
    allocator_binary="nvidia-device-plugin",
    companion_commands=frozenset({"config-manager", "mps-control-daemon", "gpu-feature-discovery"}),
    docs_url="https://github.com/NVIDIA/k8s-device-plugin",
    modes=(
        Mode(
            key="device-plugin",
            title="the device plugin chart 0.20.0",
            mechanism="extended-resource",
            min_kubelet=(1, 10, 0),
            kubelet_source="its chart's kubeVersion",
            hostcheck_key="device-plugin",
            host=HostFloor(
                title="standalone NVIDIA device plugin 0.20.0",
                driver_major=None,
                toolkit=None,
                toolkit_required=True,
                runtime_handler_required=True,
                cdi_required=False,
                source="device plugin path: prepared driver, NVIDIA Container Toolkit and the nvidia runtime handler",
                without_handler="",
            ),
        ),
    ),
)

DRA_KIND: "Final" = OwnerKind(
    owner=DRA,
    title="NVIDIA DRA driver",
    config_key="draDriver",
    default_namespace="gpu-dra-system",
    chart=ChartPin(
        name="dra-driver-nvidia-gpu",
        version="0.5.0",
        upstream="oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu",
        # The digest of the archive packaged with `helm package` from the Go module
        # sigs.k8s.io/dra-driver-nvidia-gpu@v0.5.0 (its chart folder at tag v0.5.0, vouched for by the Go checksum
        # database); upstream's OCI artifact carries other tar headers and so another digest (docs/charts.md).
        sha256="7cd6bef64c0df8358c0bc2756c2e9fe58e563e3b11e72a6f1acfe5f375f31a34",
        old_names=("nvidia-dra-driver-gpu",),
        fallback=("0.4.1", "ff2d7edadb62a84aa4da7526033b7e4d7e494965ee75f3f80a344c052c2aaa8e"),
    ),
    app_labels=frozenset({"dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu"}),
    images=frozenset({"dra-driver-nvidia-gpu", "k8s-dra-driver-gpu", "k8s-dra-driver", "nvidia-dra-driver-gpu"}),
    allocator_binary="gpu-kubelet-plugin",
    allocator_container="gpus",
    component_labels=("dra-driver-nvidia-gpu-component", "nvidia-dra-driver-gpu-component"),
    allocator_component="kubelet-plugin",
    docs_url="https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu",
    modes=(
        Mode(
            key="dra",
            title="the DRA driver",
            mechanism="dra",
            min_kubelet=DRA_MIN_KUBERNETES,
            kubelet_source="DRA with resource.k8s.io/v1",
            hostcheck_key="dra",
            host=_DRA_HOST,
        ),
    ),
)

GPU_OPERATOR_KIND: "Final" = OwnerKind(
    owner=GPU_OPERATOR,
    title="NVIDIA GPU Operator",
    config_key="gpuOperator",
    default_namespace="gpu-operator",
    chart=ChartPin(
        name="gpu-operator",
        version="v26.7.0",
        upstream="https://helm.ngc.nvidia.com/nvidia",
        sha256="2d1fea13dae16c215a46242a830aa03a5bbfc377693c628bb0c50853375ae20c",
    ),
    app_labels=frozenset({"gpu-operator"}),
    images=frozenset({"gpu-operator"}),
    allocator_binary="gpu-operator",
    manager=True,
    docs_url="https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/index.html",
    modes=(
        Mode(
            key="cluster-policy",
            title="the GPU Operator in cluster-policy mode",
            mechanism="extended-resource",
            min_kubelet=(1, 16, 0),
            kubelet_source="its chart's kubeVersion",
            hostcheck_key="gpu-operator",
            host=HostFloor(
                title="GPU Operator 26.7 with ClusterPolicy",
                driver_major=None,
                toolkit=None,
                toolkit_required=False,
                runtime_handler_required=False,
                cdi_required=False,
                source="ClusterPolicy: the Operator's toolkit component can configure the runtime",
                without_handler="the Operator's toolkit component configures it while toolkit.enabled=true",
            ),
        ),
        Mode(
            key="gpu-cluster",
            title="the GPU Operator in gpu-cluster mode (its DRA driver)",
            mechanism="dra",
            min_kubelet=DRA_MIN_KUBERNETES,
            kubelet_source="DRA with resource.k8s.io/v1",
            hostcheck_key="gpu-operator-dra",
            host=HostFloor(
                title="GPU Operator 26.7 DRA workflow (GPUCluster)",
                driver_major=580,
                toolkit=(1, 18),
                toolkit_required=True,
                runtime_handler_required=False,
                cdi_required=True,
                source=(
                    "GPU Operator DRA workflow: driver 580+; GPUCluster does not manage the toolkit, "
                    "so the DRA toolkit and CDI floors apply"
                ),
                without_handler="it allocates through CDI instead",
            ),
        ),
    ),
)

OWNER_KINDS: "Final[Mapping[Owner, OwnerKind]]" = {
    kind.owner: kind for kind in (DEVICE_PLUGIN_KIND, DRA_KIND, GPU_OPERATOR_KIND)
}
"""Owner -> its kind, in the vocabulary's order (labels.OWNERS)."""


def owner_kind(owner: Owner) -> OwnerKind:
    """The registry entry of one owner."""
    return OWNER_KINDS[owner]


def mode_of(owner: Owner, operator_mode: Optional[str] = None) -> Mode:
    """The mode a cohort of `owner` runs in (`operator_mode` matters for the GPU Operator only)."""
    return OWNER_KINDS[owner].mode(operator_mode)


def allocates_through_dra(owner: object, operator_mode: Optional[str] = None) -> bool:
    """Whether a cohort of `owner` hands out GPUs through ResourceSlices (the DRA driver, the Operator's GPUCluster)."""
    kind = OWNER_KINDS.get(owner)  # type: ignore[call-overload]
    return kind is not None and kind.mode(operator_mode).mechanism == "dra"


def chart_base_name(reference: str) -> str:
    """A chart reference (name, repo/name, OCI URL, archive path, name@version) reduced to the chart's name."""
    base = reference.strip().rstrip("/").rsplit("/", 1)[-1]
    base = re.sub(r"\.tgz$", "", base)
    base = re.split(r"[:@]", base, maxsplit=1)[0]
    return re.sub(r"-v?\d+\.\d+\.\d+.*$", "", base)


def owner_of_chart(reference: str) -> Optional[Owner]:
    """The owner whose chart (current or old name) a reference names, or None."""
    base = chart_base_name(reference)
    return next((kind.owner for kind in OWNER_KINDS.values() if base in kind.chart.names), None)


def owner_of_app_label(value: object) -> Optional[Owner]:
    """The owner whose chart's workloads carry this `app.kubernetes.io/name`, or None (also for a non-string)."""
    if not isinstance(value, str):
        return None
    return next((kind.owner for kind in OWNER_KINDS.values() if value in kind.app_labels), None)


def owner_of_image(repository_name: str) -> Optional[Owner]:
    """The owner whose image this repository name (last path element, no tag) is, or None."""
    return next((kind.owner for kind in OWNER_KINDS.values() if repository_name in kind.images), None)


def archive_digests() -> Dict[Tuple[str, str], Optional[str]]:
    """(chart, version) -> sha256 of every archive the registry knows (pinned releases and fallbacks)."""
    known: Dict[Tuple[str, str], Optional[str]] = {}
    for kind in OWNER_KINDS.values():
        known.update(kind.chart.archives)
    return known


def hostcheck_modes() -> Dict[str, Mode]:
    """The host check's `--owner` values -> their modes."""
    return {mode.hostcheck_key: mode for kind in OWNER_KINDS.values() for mode in kind.modes}


def hostcheck_owners() -> Dict[str, Owner]:
    """The host check's `--owner` values -> the owner kind whose mode each one checks (its default cohort label)."""
    return {mode.hostcheck_key: kind.owner for kind in OWNER_KINDS.values() for mode in kind.modes}


def registered_literals() -> FrozenSet[str]:
    """Every chart name, app label and image name in the registry: what no other module may spell out."""
    found: Set[str] = set()
    for kind in OWNER_KINDS.values():
        found.update(kind.chart.names, kind.app_labels, kind.images)
    return frozenset(found)
