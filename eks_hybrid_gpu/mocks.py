"""Run the real program under Pulumi mocks and record every registration.

The unit tests and the construction benchmark share this runner, so it lives in the package, not in tests/.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import yaml
from pulumi.runtime.mocks import MockMonitor

from eks_hybrid_gpu.projectdir import SHIPPED, stack_file
from policy.gpu_allocation.vocab.labels import PROJECT

ROOT = SHIPPED
"""The project the mocks run: the one this package ships (the checkout, in a source install)."""

EKS_DESCRIBE_INVOKE = "aws:eks/getCluster:getCluster"

EKS_CLUSTER = {
    "name": "hybrid-gpu",
    "arn": "arn:aws:eks:us-west-2:111122223333:cluster/hybrid-gpu",
    "endpoint": "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com",
    "version": "1.34",
    "certificateAuthorities": [{"data": "Q0EtREFUQQ=="}],
    "computeConfigs": [{"enabled": False}],
    "remoteNetworkConfigs": [{"remoteNodeNetworks": [{"cidrs": ["10.80.0.0/16"]}]}],
}


@dataclass
class Registration:
    """One resource the program registered."""

    type_: str
    name: str
    inputs: dict[str, Any]
    parent: str | None
    provider: str | None


@dataclass
class RecordingMocks(pulumi.runtime.Mocks):
    """Mocks that keep every registration and answer the EKS describe-cluster invoke."""

    eks_cluster: Mapping[str, Any] = field(default_factory=lambda: dict(EKS_CLUSTER))
    registrations: list[Registration] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    parents: dict[str, str] = field(default_factory=dict)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        """Record the registration; echo inputs as outputs."""
        parent = self.parents.get(args.name)
        self.registrations.append(Registration(args.typ, args.name, dict(args.inputs), parent, args.provider or None))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        """Answer invokes; only the EKS describe is expected."""
        self.calls.append(args.token)
        if args.token == EKS_DESCRIBE_INVOKE:
            return dict(self.eks_cluster), []
        return {}, []

    def of_type(self, type_: str) -> list[Registration]:
        """Registrations of one resource type."""
        return [r for r in self.registrations if r.type_ == type_]

    def named(self, name: str) -> Registration:
        """The one registration with this Pulumi name."""
        found = [r for r in self.registrations if r.name == name]
        if len(found) != 1:
            msg = f"{len(found)} registrations named {name}: {[r.name for r in self.registrations]}"
            raise LookupError(msg)
        return found[0]


class ParentRecordingMonitor(MockMonitor):
    """The mock monitor, noting each registration's parent (MockResourceArgs does not carry it)."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self._recorder = mocks

    def RegisterResource(self, request: Any) -> Any:
        """Remember the parent's name, then register as the mock monitor does."""
        if request.parent:
            self._recorder.parents[request.name] = request.parent.rsplit("::", 1)[-1]
        return super().RegisterResource(request)  # type: ignore[no-untyped-call]


def stack_config(stack: str) -> dict[str, Any]:
    """The config values of stacks/Pulumi.<stack>.yaml, keys without the project namespace."""
    document = yaml.safe_load(stack_file(stack, ROOT).read_text())
    return {key.split(":", 1)[1]: value for key, value in document["config"].items()}


def run_program(
    config: Mapping[str, Any],
    stack: str = "test",
    mocks: RecordingMocks | None = None,
    *,
    render_dir: str | None = None,
    preview: bool = False,
    cohort_leases: bool = False,
    lease_holder: str | None = None,
) -> RecordingMocks:
    """Run components.program.run under fresh mocks with `config`; return the recorder.

    `render_dir` runs the program in the review's render mode (`components.program.run(..., render_dir=...)`).
    `preview` runs it as a preview (`pulumi.runtime.is_dry_run()`). `cohort_leases`: the update takes its cohorts'
    Leases (`components.update_leases`), off by default since the mocks reach no cluster; its tests give the program
    an in-memory API server instead; `lease_holder` as the program's.
    """
    from components.program import run
    from eks_hybrid_gpu.localpaths import local_kubeconfig

    recorder = mocks or RecordingMocks()
    pulumi.runtime.set_mocks(
        recorder, project=PROJECT, stack=stack, preview=preview, monitor=ParentRecordingMonitor(recorder)
    )
    pulumi.runtime.set_all_config(
        {f"{PROJECT}:{key}": value if isinstance(value, str) else json.dumps(value) for key, value in config.items()}
    )

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> pulumi.Output[Any]:
        return run(
            ROOT,
            render_dir=render_dir,
            local_kubeconfig=local_kubeconfig(),
            lease_holder=lease_holder,
            cohort_leases=cohort_leases,
        ).ownership

    program()
    return recorder


def exported_outputs() -> dict[str, Any]:
    """The resolved stack outputs (`pulumi.export`) of the program that `run_program` ran last."""
    from pulumi.runtime.settings import get_root_resource
    from pulumi.runtime.sync_await import _sync_await

    root = get_root_resource()
    outputs: dict[str, Any] = getattr(root, "outputs", {})
    return {name: _sync_await(pulumi.Output.from_input(value).future()) for name, value in outputs.items()}
