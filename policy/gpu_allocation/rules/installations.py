"""The GPU installation model: one allocation owner installed by a Helm Chart or Release, and what it renders.

What the analyzer really receives (captured in ``tests/fixtures/policy/real/``): a ``kubernetes:helm.sh/v4:Chart``
is a remote component, so its props are EMPTY in resource and in stack validation. Its inputs (``chart``,
``version``, ``values``) are never visible; the objects it renders are, each with its full manifest and its parent
URN pointing at the Chart. A ``helm.sh/v3:Release`` is a custom resource: its inputs, values included, are
visible, its rendered objects are not. An allocator DaemonSet that no GPU Chart/Release rendered (a plain manifest,
a ConfigGroup, a ``helm template`` render) is an install of its own. :class:`Installation` answers the rules'
questions from the values where they are visible and from the rendered objects otherwise;
:class:`.stack_view.StackView` finds the installations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..vocab import allocators
from ..vocab import labels as vocab
from ..vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR
from ..vocab.selectors import Placement
from .operator_crs import cr_flag, cr_mode
from .props import UNKNOWN, as_bool, contains_unknown, dig, string_map
from .readers import helm_condition, helm_flag, helm_rendered_bool
from .resource import Resource
from .shapes import Container, containers, pod_node_selector, pod_volumes, required_node_terms


def is_plugin_container(container: Container) -> bool:
    """The device plugin's own (allocator) container, not its config manager or MPS daemon."""
    if container.field_name != "containers":
        return False
    return allocators.container_owner(container.spec) == (DEVICE_PLUGIN, "allocator")


def is_allocator_daemonset(resource: Resource, owner: str) -> bool:
    """The DaemonSet that allocates GPUs for ``owner``: the device plugin itself, or the DRA kubelet plugin."""
    if not resource.is_kubernetes or not resource.is_allocator or resource.identity is None:
        return False
    return resource.identity[0] == owner


@dataclass
class Setting:
    """One answer an installation gives, and where it comes from (for messages)."""

    value: Any
    subject: str
    """The object and field, e.g. ``… Chart 'x' values migStrategy`` or ``… DaemonSet 'y' … env MIG_STRATEGY``."""
    defaulted: bool = False
    """The value is the chart's default (nothing set it)."""


@dataclass
class Installation:
    """One GPU allocation owner installed by a Helm Chart or Release.

    A Release (and a Chart in tests that carry inputs) shows its values; a Chart v4 shows nothing itself,
    and every question is answered from the objects it rendered (``children``).
    """

    owner: str
    resource: Resource
    children: list[Resource] = field(default_factory=list)
    standalone: bool = False
    """An allocator DaemonSet with no Helm Chart/Release above it (a plain manifest, a ConfigGroup, a rendered
    ``helm template``): the install is the DaemonSet itself, and every answer comes from what it renders."""

    @property
    def inputs_visible(self) -> bool:
        """Tell whether the Helm inputs (values, skipCrds, ...) are visible."""
        return not self.standalone and not self.resource.inputs_hidden

    @property
    def describe(self) -> str:
        """The Helm resource, for messages."""
        return self.resource.describe

    @property
    def values(self) -> Any:
        """The Helm values (dict) or UNKNOWN; ``{}`` when the inputs are hidden."""
        return self.resource.values

    def value(self, *path: str) -> Any:
        """One Helm value: None if absent (or hidden), UNKNOWN if unknown."""
        return dig(self.values, *path)

    def rendered(self, child: Resource) -> str:
        """Name a rendered object and the Chart that rendered it (a standalone install is the object itself)."""
        if self.standalone:
            return child.describe
        return f"{child.describe} (rendered by {self.describe})"

    @property
    def cohorts(self) -> list[str]:
        """The cohort labels stamped on the rendered children, sorted."""
        return sorted({c.cohort for c in self.children if c.cohort})

    @property
    def sharing(self) -> str | None:
        """The sharing annotation stamped on the rendered children, if any."""
        for child in self.children:
            value = child.annotation(vocab.SHARING_ANNOTATION)
            if isinstance(value, str):
                return value
        return None

    @property
    def main_workload(self) -> Resource | None:
        """The rendered allocator DaemonSet (device plugin or DRA kubelet plugin), if rendered."""
        return next((c for c in self.children if is_allocator_daemonset(c, self.owner)), None)

    def _main_pod(self) -> tuple[Resource, dict[str, Any]] | None:
        main = self.main_workload
        if main is None:
            return None
        pod = main.read_pod()
        return (main, pod) if isinstance(pod, dict) else None

    @property
    def selector(self) -> Any:
        """The cohort nodeSelector (dict), None if it cannot be told, or UNKNOWN."""
        return self.selector_setting.value

    @property
    def selector_setting(self) -> Setting:
        """The nodeSelector of the allocator: values, else the rendered allocator DaemonSet."""
        key = "kubeletPlugin.nodeSelector" if self.owner == DRA else "nodeSelector"
        if self.owner not in {DEVICE_PLUGIN, DRA}:
            return Setting(None, self.describe)
        if self.inputs_visible:
            raw = self.value(*key.split("."))
            if raw is UNKNOWN or contains_unknown(raw):
                return Setting(UNKNOWN, f"{self.describe} (values {key})")
            selector = string_map(raw) if raw is not None else {}
            if selector is None:
                self.resource.cannot_read(f"values {key}", "is not a map of strings")
            return Setting(selector, f"{self.describe} (values {key})")
        found = self._main_pod()
        if found is None:
            return Setting(None, self.describe)
        main, pod = found
        raw = pod_node_selector(pod)
        if pod.get("nodeSelector") not in (None, UNKNOWN) and not isinstance(pod.get("nodeSelector"), dict):
            return Setting(None, f"{self.rendered(main)} (nodeSelector)")  # recorded by read_pod: cannot tell
        if raw is UNKNOWN or contains_unknown(raw):
            return Setting(UNKNOWN, f"{self.rendered(main)} (nodeSelector)")
        return Setting(string_map(raw), f"{self.rendered(main)} (nodeSelector)")

    @property
    def placement_setting(self) -> Setting:
        """Where the allocator can run (a Placement: nodeSelector + required node affinity), None or UNKNOWN."""
        selector = self.selector_setting
        if not isinstance(selector.value, dict):
            return selector
        if self.inputs_visible:
            base = self.value("kubeletPlugin") if self.owner == DRA else self.values
            terms = required_node_terms(dig(base, "affinity"))
        else:
            found = self._main_pod()
            terms = required_node_terms(found[1].get("affinity")) if found is not None else None
        if terms is UNKNOWN or contains_unknown(terms):
            terms = None
        return Setting(Placement.of(selector.value, terms), selector.subject)

    @property
    def stamped(self) -> bool:
        """Tell whether this program stamped what the install renders."""
        return any(child.stamped for child in self.children)

    def config_path(self, suffix: str, program_path: str) -> str:
        """Where to fix a setting: the stack-config path stamped on a child plus ``suffix``.

        ``program_path`` for this program's install without that stamp; for an install this program did not stamp,
        its own setting.
        """
        for child in self.children:
            stamped = child.annotation(vocab.CONFIG_PATH_ANNOTATION)
            if isinstance(stamped, str) and stamped:
                return f"{stamped}{suffix}"
        if not self.stamped:
            return f"the {suffix.lstrip('.') or 'settings'} of {self.describe}"
        return program_path

    @property
    def publishes_gpus(self) -> Any:
        """Whether this install publishes GPUs to the kubelet: True/False, or UNKNOWN during preview.

        A DRA chart with ``resources.gpus.enabled`` false (``{{ if .Values.resources.gpus.enabled }}`` in
        dra-driver-nvidia-gpu ``templates/kubeletplugin.yaml`` and ``deviceclass-gpu.yaml``, Helm truthiness, chart
        default true) renders no ``gpus`` container and no GPU DeviceClass: ComputeDomains only, no GPU owner. A
        rendered install without a GPU-publishing DaemonSet is recognised by :func:`..vocab.allocators.pod_owner`.
        """
        if self.owner != DRA or not self.inputs_visible:
            return True
        return helm_flag(self.values, DRA, "resources.gpus.enabled")

    # ---- device plugin

    def mig_strategy(self) -> Setting:
        """The device plugin's MIG strategy: values ``migStrategy``, else the rendered ``MIG_STRATEGY`` env."""
        if self.inputs_visible:
            raw = self.value("migStrategy")
            return Setting("none" if raw is None else raw, f"{self.describe} values migStrategy", raw is None)
        found = self._main_pod()
        if found is None:
            return Setting(UNKNOWN, self.describe)
        main, pod = found
        plugin = next((c for c in containers(pod) if is_plugin_container(c)), None)
        if plugin is None:
            return Setting(UNKNOWN, self.describe)
        raw = main.env_value(plugin, "MIG_STRATEGY")
        subject = f"{self.rendered(main)} container '{plugin.name}' env MIG_STRATEGY"
        return Setting("none" if raw is None else raw, subject, raw is None)

    def nfd(self) -> Setting:
        """Whether this install runs Node Feature Discovery (True/False/UNKNOWN) and why."""
        if self.inputs_visible:
            if self.values is UNKNOWN:
                return Setting(UNKNOWN, self.describe)
            # The NFD subchart's Chart.yaml condition, as Helm evaluates it.
            if self.owner == DEVICE_PLUGIN:
                enabled = helm_condition(self.values, DEVICE_PLUGIN, "nfd.enabled,gfd.enabled")
                nfd = self.value("nfd", "enabled")
                detail = "nfd.enabled=true" if nfd is True else "gfd.enabled=true"
                return Setting(enabled, f"{self.describe} ({detail})")
            if self.owner == GPU_OPERATOR:
                enabled = helm_condition(self.values, GPU_OPERATOR, "nfd.enabled")
                default = "" if isinstance(self.value("nfd", "enabled"), bool) else " (default)"
                return Setting(enabled, f"{self.describe} (nfd.enabled=true{default})")
            return Setting(False, self.describe)
        rendered = [c for c in self.children if c.is_nfd and c.kind in {"DaemonSet", "Deployment"}]
        if not rendered:
            return Setting(False, self.describe)
        names = ", ".join(sorted(r.describe for r in rendered))
        return Setting(True, f"{self.describe} (renders {names})")

    # ---- DRA

    def driver_root(self) -> Setting:
        """The DRA driver root: values ``nvidiaDriverRoot`` (default ``/``), else the rendered env/hostPath."""
        if self.inputs_visible:
            raw = self.value("nvidiaDriverRoot")
            if raw is UNKNOWN:
                return Setting(UNKNOWN, self.describe)
            return Setting("/" if raw is None else raw, f"{self.describe} values nvidiaDriverRoot", raw is None)
        found = self._main_pod()
        if found is None:
            return Setting(UNKNOWN, self.describe)
        main, pod = found
        for container in sorted(containers(pod), key=lambda c: c.field_name != "containers"):
            raw = main.env_value(container, "NVIDIA_DRIVER_ROOT")
            if raw is UNKNOWN:
                return Setting(UNKNOWN, self.describe)
            if isinstance(raw, str):
                return Setting(raw, f"{self.rendered(main)} container '{container.name}' env NVIDIA_DRIVER_ROOT")
        volumes = pod_volumes(pod)
        if volumes is UNKNOWN:
            return Setting(UNKNOWN, self.describe)
        for volume in volumes:
            path = dig(volume, "hostPath", "path")
            if volume.get("name") == "driver-root" and (isinstance(path, str) or path is UNKNOWN):
                return Setting(path, f"{self.rendered(main)} volume driver-root hostPath.path")
        return Setting(UNKNOWN, self.describe)

    @property
    def skips_crds(self) -> Any:
        """The ``skipCrds`` input: True, False/None, or UNKNOWN."""
        return as_bool(self.resource.props.get("skipCrds"))

    # ---- GPU Operator

    @property
    def custom_resources(self) -> list[Resource]:
        """The rendered ClusterPolicy/GPUCluster objects."""
        return [c for c in self.children if cr_mode(c) is not None]

    @property
    def mode(self) -> Any:
        """The Operator mode: from the values, else from the rendered CR objects."""
        if self.inputs_visible:
            return operator_mode(self.values)
        modes = {cr_mode(c) for c in self.custom_resources}
        if len(modes) > 1:
            return "both"
        return next(iter(modes), None)

    def operand_enabled(self, component: str) -> Any:
        """Whether the Operator deploys an operand (``devicePlugin``, ``driver``), as the ClusterPolicy reads it.

        The chart prints ``{component}.enabled`` into the CR's ``spec.{component}.enabled`` (so the string
        ``"false"`` is false there); a rendered CR is read directly. True/False, UNKNOWN, or None when it cannot be
        told (recorded: fail closed).
        """
        field_name = f"{component}.enabled"
        if self.inputs_visible:
            value = helm_rendered_bool(self.values, GPU_OPERATOR, field_name)
            if value is None:
                self.resource.cannot_read(
                    f"values {field_name}", f"is no boolean the chart can print into spec.{field_name}"
                )
            return value
        for resource in sorted(self.custom_resources, key=lambda r: r.kind != "ClusterPolicy"):
            return cr_flag(resource, component)
        return True

    def setting(self, *path: str) -> Any:
        """An Operator setting (e.g. ``driver.enabled``): the values, else the rendered CR's spec."""
        if self.inputs_visible:
            return self.value(*path)
        for resource in sorted(self.custom_resources, key=lambda r: r.kind != "ClusterPolicy"):
            return dig(resource.props, "spec", *path)
        return None


def operator_mode(values: Any) -> Any:
    """Return the GPU Operator mode from its values.

    Returns ``cluster-policy``, ``gpu-cluster``, ``both``, None (no CR) or UNKNOWN.
    ``clusterPolicy.deployCR`` defaults to true, ``gpuCluster.deployCR`` to false; each is read with Helm truthiness.
    """
    if values is UNKNOWN:
        return UNKNOWN
    # `{{ if .Values.clusterPolicy.deployCR }}`: Helm truthiness, so the string "false" renders the CR.
    cluster_policy = helm_flag(values, GPU_OPERATOR, "clusterPolicy.deployCR")
    gpu_cluster = helm_flag(values, GPU_OPERATOR, "gpuCluster.deployCR")
    if cluster_policy is UNKNOWN or gpu_cluster is UNKNOWN:
        return UNKNOWN
    cluster_policy_on = cluster_policy is True
    gpu_cluster_on = gpu_cluster is True
    if cluster_policy_on and gpu_cluster_on:
        return "both"
    if gpu_cluster_on:
        return "gpu-cluster"
    if cluster_policy_on:
        return "cluster-policy"
    return None
