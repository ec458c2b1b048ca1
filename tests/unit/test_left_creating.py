"""What a killed `pulumi up` left creating (eks_hybrid_gpu.migrate.left_creating): only the killed update's own
objects are deleted, its pending creates dropped; another manager's object is refused with nothing changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from eks_hybrid_gpu.migrate import left_creating
from testkit.fake_kube import FakeKube

pytestmark = pytest.mark.unit

DS_URN = "urn:pulumi:mig::eks-hybrid-gpu::x$kubernetes:apps/v1:DaemonSet::chart:gpu-dra-system/plugin"
CLASS_URN = "urn:pulumi:mig::eks-hybrid-gpu::x$kubernetes:resource.k8s.io/v1:DeviceClass::chart:gpu.nvidia.com"
DS_PATH = "/apis/apps/v1/namespaces/gpu-dra-system/daemonsets/plugin"
CLASS_PATH = "/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com"
RECORDED = "pulumi-kubernetes-aaaa1111"
KILLED = "pulumi-kubernetes-bbbb2222"


def pending(urn: str, api_version: str, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    inputs = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    return {"type": "creating", "resource": {"urn": urn, "type": f"kubernetes:{api_version}:{kind}", "inputs": inputs}}


def deployment() -> dict[str, Any]:
    return {
        "resources": [{"urn": "urn:other", "outputs": {"__fieldManager": RECORDED}}],
        "pending_operations": [
            pending(DS_URN, "apps/v1", "DaemonSet", "plugin", "gpu-dra-system"),
            pending(CLASS_URN, "resource.k8s.io/v1", "DeviceClass", "gpu.nvidia.com"),
            {"type": "deleting", "resource": {"urn": "urn:gone", "type": "kubernetes:core/v1:ConfigMap"}},
        ],
    }


def made_by(*managers: tuple[str, str, str]) -> dict[str, Any]:
    fields = [{"manager": m, "operation": op, **({"subresource": sub} if sub else {})} for m, op, sub in managers]
    return {"metadata": {"managedFields": fields}}


@dataclass
class Exported:
    version: int
    deployment: dict[str, Any]


@dataclass
class FakeStack:
    """An Automation API stack's `export_stack`/`import_stack`, over one deployment document."""

    document: dict[str, Any]
    name: str = "mig"
    imported: list[dict[str, Any]] = field(default_factory=list)

    def export_stack(self) -> Exported:
        return Exported(3, self.document)

    def import_stack(self, state: Any) -> None:
        self.imported.append(state.deployment)


def cluster(daemonset_managers: tuple[tuple[str, str, str], ...]) -> FakeKube:
    kube = FakeKube()
    kube.objects["/apis/apps/v1"] = {
        "resources": [
            {"name": "daemonsets", "kind": "DaemonSet", "namespaced": True},
            {"name": "daemonsets/status", "kind": "DaemonSet", "namespaced": True},
        ]
    }
    kube.objects["/apis/resource.k8s.io/v1"] = {
        "resources": [{"name": "deviceclasses", "kind": "DeviceClass", "namespaced": False}]
    }
    kube.objects[DS_PATH] = {**made_by(*daemonset_managers), "kind": "DaemonSet"}
    kube.objects[DS_PATH]["metadata"]["resourceVersion"] = "7"
    return kube


def test_only_kubernetes_objects_being_created_are_pending_creates() -> None:
    found = left_creating.pending_creates(deployment())
    assert [item.describe() for item in found] == ["DaemonSet gpu-dra-system/plugin", "DeviceClass gpu.nvidia.com"]


@pytest.mark.parametrize(
    ("managers", "killed"),
    [
        (((KILLED, "Apply", ""), ("kube-controller-manager", "Update", "status")), True),
        (((RECORDED, "Apply", ""),), False),  # a finished update's manager: not the killed one
        (((KILLED, "Apply", ""), ("kubectl-edit", "Update", "")), False),  # someone edited it since
        ((("helm", "Update", ""),), False),
        ((), False),
    ],
)
def test_the_killed_update_made_an_object_only_when_its_one_applier_is_an_unrecorded_provider_manager(
    managers: tuple[tuple[str, str, str], ...], killed: bool
) -> None:
    item = left_creating.pending_creates(deployment())[0]
    assert left_creating.made_by_the_killed_update(made_by(*managers), item, {RECORDED}) is killed


def test_the_killed_updates_objects_are_deleted_and_waited_out_then_their_pending_creates_dropped() -> None:
    kube = cluster(((KILLED, "Apply", ""), ("kube-controller-manager", "Update", "status")))
    stack = FakeStack(deployment())
    said: list[str] = []
    assert left_creating.settle(kube, stack, said.append) == 2  # type: ignore[arg-type]
    assert kube.writes == [f"delete {DS_PATH}"]  # the DeviceClass was never made: nothing to delete
    assert DS_PATH not in kube.objects
    assert [op["resource"]["urn"] for op in stack.imported[0]["pending_operations"]] == ["urn:gone"]
    assert stack.imported[0]["resources"] == deployment()["resources"]
    assert "  DeviceClass gpu.nvidia.com: not in the cluster; nothing to remove" in said
    assert said[-1] == "dropped 2 pending create(s) from the state; this update creates them afresh"


def test_an_object_another_manager_touched_is_refused_naming_it_and_nothing_changes() -> None:
    kube = cluster(((KILLED, "Apply", ""), ("kubectl-edit", "Update", "")))
    stack = FakeStack(deployment())
    with pytest.raises(left_creating.LeftByOthers) as refused:
        left_creating.settle(kube, stack, lambda _: None)  # type: ignore[arg-type]
    assert kube.writes == []
    assert stack.imported == []
    text = str(refused.value)
    assert text.startswith("DaemonSet gpu-dra-system/plugin is in the cluster, but the killed update of stack mig")
    assert f"kubectl-edit, {KILLED}" in text
    assert f"pulumi refresh --import-pending-creates {DS_URN} <ID>" in text


def test_a_state_without_pending_creates_is_left_alone() -> None:
    kube = cluster(((KILLED, "Apply", ""),))
    stack = FakeStack({"resources": [], "pending_operations": []})
    assert left_creating.settle(kube, stack, lambda _: None) == 0  # type: ignore[arg-type]
    assert (kube.writes, stack.imported) == ([], [])


@pytest.mark.parametrize(
    ("name", "namespace"), [("../../nodes/gpu-0", "gpu-dra-system"), ("plugin", ".."), ("a%2Fb", "gpu-dra-system")]
)
def test_a_name_in_the_state_that_would_walk_the_delete_elsewhere_is_refused_and_nothing_changes(
    name: str, namespace: str
) -> None:
    kube = cluster(((KILLED, "Apply", ""),))
    document = deployment()
    document["pending_operations"][0] = pending(DS_URN, "apps/v1", "DaemonSet", name, namespace)
    stack = FakeStack(document)
    with pytest.raises(left_creating.LeftByOthers) as refused:
        left_creating.settle(kube, stack, lambda _: None)  # type: ignore[arg-type]
    assert (kube.writes, stack.imported) == ([], [])
    assert str(refused.value).startswith(f"{DS_URN} names ")
    assert "the stack's state is damaged; nothing was changed" in str(refused.value)


def test_a_namespaced_object_pending_without_a_namespace_is_refused_naming_the_fix() -> None:
    kube = cluster(((KILLED, "Apply", ""),))
    document = deployment()
    document["pending_operations"][0] = pending(DS_URN, "apps/v1", "DaemonSet", "plugin")
    stack = FakeStack(document)
    with pytest.raises(left_creating.LeftByOthers) as refused:
        left_creating.settle(kube, stack, lambda _: None)  # type: ignore[arg-type]
    assert (kube.writes, stack.imported) == ([], [])
    assert "creating a namespaced DaemonSet without a namespace" in str(refused.value)


def test_discovery_is_read_once_per_group_and_version() -> None:
    kube = cluster(((KILLED, "Apply", ""),))
    reads: list[str] = []
    real_get = kube.get

    def get(path: str, **query: Any) -> dict[str, Any]:
        reads.append(path)
        return real_get(path, **query)

    kube.get = get  # type: ignore[method-assign]
    document = deployment()
    document["pending_operations"].append(pending("urn:second", "apps/v1", "DaemonSet", "other", "gpu-dra-system"))
    left_creating.settle(kube, FakeStack(document), lambda _: None)  # type: ignore[arg-type]
    assert reads.count("/apis/apps/v1") == 1
