"""What a killed `pulumi up` was creating: in the cluster, yet only a pending create in the stack's state.

A kill inside an update (a CI job's or a device call's time limit, `kill -9`, a lost machine) leaves each object
the engine was creating as a pending CREATE operation in the state, and often the object itself in the cluster. The
resumed update creates it again under a new Server-Side Apply field manager, and the API server refuses it as a
field conflict (seen on the lent H200 and on the local default, where the DaemonSet's `valueFrom.fieldRef`s
conflicted). So before a phase's `pulumi up`, migrate settles them:

- an object the killed update made: its one applier (the managers beside it only write `status`) is a
  `pulumi-kubernetes-*` field manager that no resource in the state records, or the one the pending create itself
  records (`__fieldManager`). While a migration holds the cohort's Lease no other update of the cohort runs, so
  that is the killed update. Deleted in the foreground at the version read, and waited out;
- an object that is not there: nothing to delete;
- an object some other manager made: refused, naming it, its managers and the fix; nothing changes.

A name from the state becomes a path segment only as the API server takes names (no `/`, `%`, `.` or `..`): the
state is the user's file, and a damaged one is refused before any request.

Then the pending creates are dropped from the state, and the update creates those objects afresh. In a migration
these are the new owner's objects, made in the install phase while its nodes are cordoned and no workload uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from cluster.client import waits
from cluster.client.kubeclient import Kube, KubeApiError

FIELD_MANAGER_KEY = "__fieldManager"
"""Where the Kubernetes provider records, in a resource's outputs, the field manager it applied the object with."""
PROVIDER_MANAGER_PREFIX = "pulumi-kubernetes-"
"""How the provider names a resource's Server-Side Apply field manager: this prefix and a random suffix."""
GONE_TIMEOUT_SECONDS = 120.0


class LeftByOthers(Exception):
    """A pending create's object exists but the killed update did not make it; the message names it and the fix."""


@dataclass(frozen=True)
class LeftCreating:
    """One pending create of a Kubernetes object: its URN, where it lives, and the manager it records ('' none)."""

    urn: str
    api_version: str
    kind: str
    namespace: str
    name: str
    field_manager: str

    def describe(self) -> str:
        """`DaemonSet gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin`."""
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


def pending_creates(deployment: Mapping[str, Any]) -> list[LeftCreating]:
    """The state's pending CREATE operations of Kubernetes objects (others are not this module's)."""
    found = []
    for operation in deployment.get("pending_operations") or []:
        resource = operation.get("resource") or {}
        inputs = resource.get("inputs") or {}
        metadata = inputs.get("metadata") or {}
        if operation.get("type") != "creating" or not str(resource.get("type", "")).startswith("kubernetes:"):
            continue
        if not (inputs.get("apiVersion") and inputs.get("kind") and metadata.get("name")):
            continue  # a provider or a component: no object of its own
        found.append(
            LeftCreating(
                urn=str(resource.get("urn", "")),
                api_version=str(inputs["apiVersion"]),
                kind=str(inputs["kind"]),
                namespace=str(metadata.get("namespace") or ""),
                name=str(metadata["name"]),
                field_manager=str((resource.get("outputs") or {}).get(FIELD_MANAGER_KEY) or ""),
            )
        )
    return found


def without_pending_creates(deployment: Mapping[str, Any], urns: set[str]) -> dict[str, Any]:
    """The deployment with the pending creates of `urns` dropped, as `pulumi refresh --clear-pending-creates` does."""
    kept = [
        operation
        for operation in deployment.get("pending_operations") or []
        if not (operation.get("type") == "creating" and (operation.get("resource") or {}).get("urn") in urns)
    ]
    return {**deployment, "pending_operations": kept}


def _path_segment(value: str, left: LeftCreating) -> str:
    """`value` as one API path segment, as the API server takes names (not `.` or `..`, no `/` or `%`).

    The state is the user's file: a name in it must not walk the DELETE to another path.
    """
    if value in ("", ".", "..") or "/" in value or "%" in value or len(value) > 253:
        msg = f"{left.urn} names {value[:80]!r}, which is no Kubernetes name: the stack's state is damaged; nothing "
        raise LeftByOthers(msg + "was changed")
    return quote(value, safe="")


def object_path(kube: Kube, left: LeftCreating, discovered: dict[str, Mapping[str, Any]]) -> str:
    """The object's API path, from the API server's discovery of its group and version (plural, namespaced).

    `discovered`: the discovery documents read so far, by group and version (one read per group and version).
    """
    parts = [_path_segment(part, left) for part in left.api_version.split("/", 1)]
    group_version = f"/api/{parts[0]}" if len(parts) == 1 else f"/apis/{parts[0]}/{parts[1]}"
    if group_version not in discovered:
        discovered[group_version] = kube.get(group_version, what=f"the API server's resources of {left.api_version}")
    for entry in discovered[group_version].get("resources") or []:
        if entry.get("kind") != left.kind or "/" in str(entry.get("name", "")):
            continue
        if entry.get("namespaced") and not left.namespace:
            msg = (
                f"{left.urn} was creating a namespaced {left.kind} without a namespace (the provider's default "
                f"namespace then holds it): if {left.describe()} is there and no other tool manages it, delete it, "
                "then run the same command again; nothing was changed"
            )
            raise LeftByOthers(msg)
        where = f"/namespaces/{_path_segment(left.namespace, left)}" if entry.get("namespaced") else ""
        return f"{group_version}{where}/{_path_segment(str(entry['name']), left)}/{_path_segment(left.name, left)}"
    msg = f"the API server serves no kind {left.kind} in {left.api_version}, which {left.urn} was creating"
    raise LeftByOthers(msg)


def managers_of(found: Mapping[str, Any]) -> list[str]:
    """The field managers of an object, as its managedFields name them."""
    return sorted({str(entry.get("manager")) for entry in (found.get("metadata") or {}).get("managedFields") or []})


def recorded_managers(deployment: Mapping[str, Any]) -> set[str]:
    """The field managers the state records for its resources: what finished updates applied."""
    return {
        str((resource.get("outputs") or {}).get(FIELD_MANAGER_KEY))
        for resource in deployment.get("resources") or []
        if (resource.get("outputs") or {}).get(FIELD_MANAGER_KEY)
    }


def made_by_the_killed_update(live: Mapping[str, Any], left: LeftCreating, recorded: set[str]) -> bool:
    """Whether the object's one applier is the killed update's field manager (see the module's rule)."""
    entries = (live.get("metadata") or {}).get("managedFields") or []
    appliers = [entry for entry in entries if entry.get("subresource") != "status"]
    if len(appliers) != 1 or appliers[0].get("operation") != "Apply":
        return False
    manager = str(appliers[0].get("manager") or "")
    if left.field_manager:
        return manager == left.field_manager
    return manager.startswith(PROVIDER_MANAGER_PREFIX) and manager not in recorded


def settle(kube: Kube, stack: Any, say: Callable[[str], None]) -> int:
    """Delete what a killed update of `stack` left creating, then drop its pending creates; how many were pending.

    `stack`: an Automation API stack (`export_stack`, `import_stack`). LeftByOthers, changing nothing, when an
    object was made by another manager than the one the killed update recorded for it.
    """
    deployment = stack.export_stack()
    document = deployment.deployment or {}
    left = pending_creates(document)
    if not left:
        return 0
    say(
        f"the stack's state holds {len(left)} pending create(s) of an update that was killed: "
        f"{', '.join(item.describe() for item in left)}"
    )
    found: list[tuple[LeftCreating, str, dict[str, Any] | None]] = []
    discovered: dict[str, Mapping[str, Any]] = {}
    for item in left:
        path = object_path(kube, item, discovered)
        found.append((item, path, kube.get_or_none(path, what=item.describe())))
    recorded = recorded_managers(document)
    for item, _, live in found:
        if live is not None and not made_by_the_killed_update(live, item, recorded):
            msg = (
                f"{item.describe()} is in the cluster, but the killed update of stack {stack.name} did not make it "
                f"alone (the object's field managers: {', '.join(managers_of(live)) or 'none'}): if no other tool "
                f"manages it, delete it, or adopt it with `pulumi refresh --import-pending-creates {item.urn} <ID>` "
                "in the stack's project; nothing was changed"
            )
            raise LeftByOthers(msg)
    for item, path, live in found:
        if live is None:
            say(f"  {item.describe()}: not in the cluster; nothing to remove")
            continue
        version = str((live.get("metadata") or {}).get("resourceVersion") or "") or None
        try:
            kube.delete(path, resource_version=version, propagationPolicy="Foreground")
        except KubeApiError as error:
            if error.status != 409:  # 409: changed since it was read; it is judged again at the next run
                raise
            msg = f"{item.describe()} changed while it was being removed ({error}); run the same command again"
            raise LeftByOthers(msg) from None
        say(f"  {item.describe()}: made by the killed update; deleting it, to create it afresh")

        def gone(at: str = path) -> tuple[bool, str]:
            return kube.get_or_none(at) is None, "the API server still has it (its dependents are being deleted)"

        waits.wait_for(
            f"{item.describe()} is gone", gone, GONE_TIMEOUT_SECONDS, say, "run the same command again once it is"
        )
    from pulumi import automation as auto

    urns = {item.urn for item in left}
    stack.import_stack(auto.Deployment(version=deployment.version, deployment=without_pending_creates(document, urns)))
    say(f"dropped {len(urns)} pending create(s) from the state; this update creates them afresh")
    return len(left)
