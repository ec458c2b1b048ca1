"""Read-only lists from the live cluster for the preflight, with one refusal per way of not getting them.

The preflight runs inside the Pulumi program, before anything is registered. Each way of not getting an
answer — an unreadable kubeconfig, an unreachable server, rejected credentials, a 403 — becomes a
`LiveReadError` whose one-line message names the kubeconfig, the context and the server, and says what to do;
the program turns it into a refusal that changed nothing. A list the identity may not read is refused too: the
preflight does not guess what it cannot see.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import config
from kubernetes.config.config_exception import ConfigException

from components import scoped_read
from components.kube_http import Unreachable, send, status_message
from components.lease_records import LEASE_OF, HeldLease, leases_path
from components.ledger import LedgerError, parse_record
from components.migration import Migration, parse_migration
from components.scoped_read import Lists, ScopeError
from policy.gpu_allocation.vocab.labels import LEDGER_KEY, LEDGER_NAME, MIGRATION_KEY, MIGRATION_NAME

RUNTIME_CLASSES = "/apis/node.k8s.io/v1/runtimeclasses"
SLICE_VERSIONS = ("v1", "v1beta2", "v1beta1")
"""resource.k8s.io versions tried in order; a cluster that serves none of them can hold no ResourceSlice."""


class LiveReadError(Exception):
    """The cluster could not be read; the message is one line that names the cluster and says what to do."""


@dataclass(frozen=True)
class Source:
    """Where the preflight reads from, and what to tell the person when it cannot."""

    kubeconfig_path: str | None
    kubeconfig_content: str | None
    context: str | None
    described_as: str
    """`kubeconfig PATH` or `the kubeconfig generated for EKS cluster NAME`: the refusal's first words."""
    fix: str
    """What to do when the cluster cannot be reached or refuses the credentials."""


@dataclass(frozen=True)
class LiveCluster:
    """What the preflight reads: the nodes and everything that may publish their GPUs."""

    nodes: list[dict[str, Any]]
    slices: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    """ResourceClaims of every namespace: which pods hold DRA devices on which node (`components.consumers`)."""
    runtime_classes: list[dict[str, Any]] | None = None
    """The cluster's RuntimeClasses; None when not read (a LiveCluster built without them, or refused)."""
    runtime_classes_error: str | None = None
    """Why the RuntimeClasses could not be listed (judged only where the stack reuses an existing class)."""
    records: Records | None = None
    """The ledger and the migration record, when the namespace that holds them was given."""
    nodes_listed: int = 0
    """How many nodes the cluster has (the node list's length); `nodes` keeps the ones in scope."""


def missing_file(path: str) -> str:
    """Why a path given as a file is not one, in a refusal's words: a folder says it is a folder."""
    if path and Path(path).is_dir():
        return "is a folder, not a kubeconfig file"
    return "does not exist"


@dataclass(frozen=True)
class Records:
    """What the cluster records about the owners: the ledger of the last `pulumi up`, and a migration under way."""

    namespace: str
    ledger: dict[str, Any] | None
    """The ownership map; None when no `pulumi up` wrote one."""
    migration: dict[str, Any] | None
    """The record `eks-hybrid-gpu migrate` writes (see `components.migration`); None when none is under way."""
    leases: list[HeldLease] = field(default_factory=list)
    """The Leases `move-host` and `migrate` hold in the namespace (see `components.lease_records`)."""
    leases_error: str | None = None
    """Why the Leases could not be listed: the preview says so instead of showing none."""

    @property
    def ledger_ref(self) -> str:
        """`NAMESPACE/NAME` of the ledger ConfigMap."""
        return f"{self.namespace}/{LEDGER_NAME}"

    @property
    def migration_ref(self) -> str:
        """`NAMESPACE/NAME` of the migration record."""
        return f"{self.namespace}/{MIGRATION_NAME}"

    def checked_migration(self) -> Migration | None:
        """The migration record checked as `migrate`, `inspect` and `move-host` check it; LedgerError when unusable."""
        return parse_migration(self.migration, f"ConfigMap {self.migration_ref}")


class Reader:
    """GET requests of plain JSON lists to one cluster as one user."""

    def __init__(self, source: Source) -> None:
        """Load the kubeconfig; an unusable one is a LiveReadError."""
        self.source = source
        if source.kubeconfig_content is None and not Path(source.kubeconfig_path or "").is_file():
            msg = f"preflight: {source.described_as} {missing_file(source.kubeconfig_path or '')}; {source.fix}"
            raise LiveReadError(msg)
        try:
            if source.kubeconfig_content is not None:
                document = json.loads(source.kubeconfig_content)
                self.api = config.new_client_from_config_dict(document, context=source.context)  # type: ignore[no-untyped-call]
                current = source.context or document.get("current-context") or ""
            else:
                self.api = config.new_client_from_config(config_file=source.kubeconfig_path, context=source.context)  # type: ignore[no-untyped-call]
                _, active = config.list_kube_config_contexts(config_file=source.kubeconfig_path)  # type: ignore[no-untyped-call]
                current = source.context or (active or {}).get("name", "")
        except (ConfigException, yaml.YAMLError, OSError, ValueError, TypeError, KeyError) as error:
            msg = f"preflight: {source.described_as} cannot be used ({' '.join(str(error).split())}); {source.fix}"
            raise LiveReadError(msg) from None
        self.context = current or "(none)"
        self.server = str(self.api.configuration.host)

    @property
    def where(self) -> str:
        """`kubeconfig PATH, context C, server S`."""
        return f"{self.source.described_as}, context {self.context}, server {self.server}"

    def get(self, path: str, what: str, **query: str) -> dict[str, Any] | None:
        """One object or list as JSON, or None when it does not exist or is not served (404)."""
        try:
            response = send(self.api, "GET", path, query=query)
        except Unreachable as error:
            msg = f"preflight: cannot reach the Kubernetes API ({self.where}): {error}; {self.source.fix}"
            raise LiveReadError(msg) from None
        text = response.text
        if response.status == 404:
            return None
        if response.status == 401:
            msg = (
                f"preflight: the API server rejected the credentials ({self.where}): 401 Unauthorized; "
                f"{self.source.fix}"
            )
            raise LiveReadError(msg)
        if response.status == 403:
            msg = (
                f"preflight: permission denied listing {what} ({self.where}): {status_message(text)}; the preflight "
                "must see every node's GPU publishers and does not guess what it cannot read: grant this identity "
                "list and get on nodes, pods, daemonsets (apps), resourceslices and resourceclaims (resource.k8s.io), "
                "or use an administrator kubeconfig"
            )
            raise LiveReadError(msg)
        if not 200 <= response.status <= 299:
            msg = f"preflight: listing {what} failed ({self.where}): {response.status} {status_message(text)}"
            raise LiveReadError(msg)
        document: dict[str, Any] = json.loads(text) if text else {}
        return document


def read_records(reader: Reader, namespace: str) -> Records:
    """The ledger and the migration record in `namespace`; unreadable content is a LiveReadError (fail closed)."""
    found = {}
    for name, key in ((LEDGER_NAME, LEDGER_KEY), (MIGRATION_NAME, MIGRATION_KEY)):
        configmap = reader.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}", f"ConfigMap {namespace}/{name}")
        try:
            found[name] = parse_record(configmap, key)
        except LedgerError as error:
            msg = f"preflight: {error}; nothing was changed"
            raise LiveReadError(msg) from None
    leases: list[HeldLease] = []
    leases_error = None
    try:
        pages = scoped_read.paged(_getter(reader), leases_path(namespace), "Leases", labelSelector=LEASE_OF)
        leases = [HeldLease.of(lease) for page in pages or () for lease in page if isinstance(lease, dict)]
    except (LiveReadError, ScopeError) as error:  # only shown, never judged: a refusal would block every preview
        leases_error = str(error).removeprefix("preflight: ")
    return Records(namespace, found[LEDGER_NAME], found[MIGRATION_NAME], leases, leases_error)


def read_only_records(source: Source, namespace: str) -> Records:
    """The records alone: what a stack without the preflight still reads, so it never skips a migration's phase."""
    return read_records(Reader(source), namespace)


def live_cluster(lists: Lists, reader: Reader, records: Records | None) -> LiveCluster:
    """The lists with the RuntimeClasses and records: the LiveCluster the preflight judges."""
    # Listed last, and a refusal kept rather than raised: only a stack that reuses an existing class needs them.
    try:
        pages = scoped_read.paged(_getter(reader), RUNTIME_CLASSES, "RuntimeClasses")
        runtime_classes: list[dict[str, Any]] | None = [c for page in pages or () for c in page]
        runtime_error = None
    except LiveReadError as error:
        runtime_classes, runtime_error = None, str(error).removeprefix("preflight: ")
    except ScopeError as error:
        runtime_classes, runtime_error = None, str(error)
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
    )


def read_live(
    source: Source, records_namespace: str | None = None, selectors: Sequence[Mapping[str, str]] = ()
) -> LiveCluster:
    """The GPU nodes, what runs on them, the RuntimeClasses and the records (`components.scoped_read`).

    `selectors`: the stack's cohort selectors; the ledger's and a migration's are added from the records, which are
    read first. Pods are the unfinished ones on the nodes in scope; the DRA lists come from the first
    resource.k8s.io version served.
    """
    reader = Reader(source)
    records = read_records(reader, records_namespace) if records_namespace else None
    try:
        lists = scoped_read.read(
            _getter(reader),
            scoped_read.scope_of(
                selectors, records.ledger if records else None, records.migration if records else None
            ),
            SLICE_VERSIONS,
        )
    except ScopeError as error:
        msg = f"preflight: {error}; nothing was changed"
        raise LiveReadError(msg) from None
    return live_cluster(lists, reader, records)


def read_live_whole(source: Source, records_namespace: str | None = None) -> LiveCluster:
    """Every object of the cluster, whole (`scoped_read.read_whole`): the reference the scoped read is held to."""
    reader = Reader(source)
    records = read_records(reader, records_namespace) if records_namespace else None
    return live_cluster(scoped_read.read_whole(_getter(reader), SLICE_VERSIONS), reader, records)


def _getter(reader: Reader) -> scoped_read.Get:
    return lambda path, what, query: reader.get(path, what, **query)
