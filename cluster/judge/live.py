"""The live cluster as the preflight judges it: the GPU nodes, what runs on them, the records; one refusal per failure.

The preflight runs inside the Pulumi program, before anything is registered. It reads through the one client
(`cluster.client`) and the one record reader (`cluster.records.read`); each way of not getting an answer — an
unreadable kubeconfig, an unreachable server, rejected credentials, a 403, an unusable record — becomes a
`LiveReadError` whose one-line message names the kubeconfig, the context and the server, and says what to do in
the stack's words (`Hints` of the `Source` the program builds). A list the identity may not read is refused too:
the preflight does not guess what it cannot see.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from cluster.client.errors import KubeAccessError, KubeApiError
from cluster.client.kubeclient import RUNTIME_CLASSES, Kube, open_cluster
from cluster.client.kubeconfig import Hints, Source
from cluster.judge import scoped_read
from cluster.judge.scoped_read import Lists, ScopeError
from cluster.records.ledger import LedgerError, ledger_ref_of
from cluster.records.read import Records, read_records

SLICE_VERSIONS = ("v1", "v1beta2", "v1beta1")
"""resource.k8s.io versions tried in order; a cluster that serves none of them can hold no ResourceSlice."""
FORBIDDEN_FIX = (
    "the preflight must see every node's GPU publishers and does not guess what it cannot read: grant this identity "
    "list and get on nodes, pods, daemonsets (apps), resourceslices and resourceclaims (resource.k8s.io), or use an "
    "administrator kubeconfig"
)


class LiveReadError(Exception):
    """The cluster could not be read; the message is one line that names the cluster and says what to do."""


def preflight_hints(fix: str) -> Hints:
    """The preflight's words: `fix` (the stack's cluster settings) for every failure but a refused list."""
    return Hints(missing=fix, unusable=fix, unreachable=fix, timed_out=fix, unauthorized=fix, forbidden=FORBIDDEN_FIX)


@dataclass(frozen=True)
class LiveCluster:
    """What the preflight reads: the nodes and everything that may publish their GPUs."""

    nodes: list[dict[str, Any]]
    slices: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    """ResourceClaims of every namespace: which pods hold DRA devices on which node (`cluster.judge.consumers`)."""
    runtime_classes: list[dict[str, Any]] | None = None
    """The cluster's RuntimeClasses; None when not read (a LiveCluster built without them, or refused)."""
    runtime_classes_error: str | None = None
    """Why the RuntimeClasses could not be listed (judged only where the stack reuses an existing class)."""
    records: Records | None = None
    """The ledger, the migration record and the Leases, when the namespace that holds them was given."""
    nodes_listed: int = 0
    """How many nodes the cluster has (the node list's length); `nodes` keeps the ones in scope."""
    server_version: str | None = None
    """The API server's `gitVersion` (`/version`); None when not read."""


@contextmanager
def refused_as_live_read() -> Iterator[None]:
    """Whatever stops a read, as one LiveReadError line that says what to do (the program adds that nothing changed)."""
    try:
        yield
    except KubeAccessError as error:
        msg = f"preflight: {error}"
        raise LiveReadError(msg) from None
    except KubeApiError as error:
        listing = f"listing {error.what}" if error.what else "a read"
        msg = f"preflight: {listing} failed ({error.where}): {error.status} {error.message}"
        raise LiveReadError(msg) from None
    except (LedgerError, ScopeError) as error:
        msg = f"preflight: {error}"
        raise LiveReadError(msg) from None


def connect(source: Source) -> Kube:
    """The client for the source; an unusable kubeconfig is a LiveReadError."""
    with refused_as_live_read():
        return open_cluster(source)


def _runtime_classes(kube: Kube) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The RuntimeClasses, or None and why they could not be listed (judged only where a class is reused)."""
    try:
        with refused_as_live_read():
            return [c for page in kube.pages(RUNTIME_CLASSES, what="RuntimeClasses") or () for c in page], None
    except LiveReadError as error:
        return None, str(error).removeprefix("preflight: ")


def server_version(kube: Kube) -> str | None:
    """The API server's `gitVersion`; None where `/version` does not answer one (judged only where it matters)."""
    try:
        with refused_as_live_read():
            found = kube.get_or_none("/version", what="the server version")
    except LiveReadError:
        return None
    version = (found or {}).get("gitVersion")
    return version if isinstance(version, str) else None


def live_cluster(lists: Lists, kube: Kube, records: Records | None) -> LiveCluster:
    """The lists with the RuntimeClasses, records and server version: the LiveCluster the preflight judges."""
    runtime_classes, runtime_error = _runtime_classes(kube)  # listed last: only a reused class needs them
    return LiveCluster(
        lists.nodes,
        lists.slices,
        lists.pods,
        lists.daemonsets,
        lists.claims,
        runtime_classes,
        runtime_error,
        records,
        lists.nodes_listed,
        server_version(kube),
    )


def read_live(
    source: Source, records_namespace: str | None = None, selectors: Sequence[Mapping[str, str]] = ()
) -> LiveCluster:
    """The GPU nodes, what runs on them, the RuntimeClasses and the records (`cluster.judge.scoped_read`).

    `selectors`: the stack's cohort selectors; the ledger's and a migration's are added from the records, which are
    read first. Pods are the unfinished ones on the nodes in scope; the DRA lists come from the first
    resource.k8s.io version served.
    """
    kube = connect(source)
    with refused_as_live_read():
        records = read_records(kube, ledger_ref_of(records_namespace), leases=True) if records_namespace else None
        scope = scoped_read.scope_of(
            selectors, records.ledger if records else None, records.migration if records else None
        )
        lists = scoped_read.read(kube, scope, SLICE_VERSIONS)
    return live_cluster(lists, kube, records)


def read_live_whole(source: Source, records_namespace: str | None = None) -> LiveCluster:
    """Every object of the cluster, whole (`scoped_read.read_whole`): the reference the scoped read is held to."""
    kube = connect(source)
    with refused_as_live_read():
        records = read_records(kube, ledger_ref_of(records_namespace), leases=True) if records_namespace else None
        lists = scoped_read.read_whole(kube, SLICE_VERSIONS)
    return live_cluster(lists, kube, records)
