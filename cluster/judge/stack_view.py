"""What the cluster layer's judgments read of a stack config, and nothing more.

The judgments (`cluster.judge.preflight`, `owner_change`, `replacements`, `operator_boundary`) compare a stack
with the live cluster. The stack's typed config lives above this layer (`components.config.StackConfig`), so the
judgments name here the few fields they read, as protocols; `StackConfig` is one (mypy checks it where the program
and the commands hand it down), and a test can hand down any object of this shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from cluster.records.ledger import NamespacesView
from policy.gpu_allocation.vocab.labels import Owner


class CohortView(Protocol):
    """One cohort: its name, owner and node selector."""

    @property
    def name(self) -> str:
        """The cohort's name (a DNS label)."""
        ...

    @property
    def owner(self) -> Owner:
        """The cohort's allocation owner."""
        ...

    def selector(self, cohort_label_key: str) -> dict[str, str]:
        """The equality selector of the cohort's nodes."""
        ...


class RuntimeClassView(Protocol):
    """The RuntimeClass the device-plugin path runs with."""

    @property
    def name(self) -> str:
        """The class's name."""
        ...

    @property
    def hosts_have_nvidia_handler(self) -> bool:
        """True: the program creates the class; false: it reuses an existing one."""
        ...


class OperatorView(Protocol):
    """The GPU Operator's settings the judgments read."""

    @property
    def mode(self) -> str:
        """`cluster-policy` or `gpu-cluster`."""
        ...


class DraView(Protocol):
    """The DRA settings the judgments read."""

    @property
    def extended_resource_name(self) -> str | None:
        """`nvidia.com/gpu` when the DRA cohort keeps that name through its class (KEP-5004), else None."""
        ...


class ClusterView(Protocol):
    """What the stack declares of its cluster."""

    @property
    def kubernetes_version(self) -> str | None:
        """The declared control-plane version (EKS reports its own)."""
        ...

    @property
    def feature_gates(self) -> Mapping[str, bool]:
        """DRA gates set against the version's defaults."""
        ...


class StackView(Protocol):
    """A stack's cohorts and the settings the judgments of the live cluster read."""

    @property
    def cohorts(self) -> Sequence[CohortView]:
        """The cohorts, in config order (a problem names `cohorts[i]`)."""
        ...

    @property
    def cohort_label_key(self) -> str:
        """The label that puts a node in a cohort."""
        ...

    @property
    def namespaces(self) -> NamespacesView:
        """Where each owner kind is installed."""
        ...

    @property
    def dra(self) -> DraView:
        """The DRA settings."""
        ...

    @property
    def cluster(self) -> ClusterView:
        """What the stack declares of its cluster."""
        ...

    @property
    def operator(self) -> OperatorView:
        """The GPU Operator's settings."""
        ...

    @property
    def operator_mode(self) -> str | None:
        """The Operator's mode when a cohort is the Operator's, else None."""
        ...

    @property
    def runtime_class(self) -> RuntimeClassView:
        """The RuntimeClass settings."""
        ...

    @property
    def needs_runtime_class(self) -> bool:
        """Whether any pod of the stack runs with the RuntimeClass."""
        ...
