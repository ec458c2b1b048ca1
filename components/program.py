"""The Pulumi program: read and validate the stack config, check the live nodes, build the stack, export."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pulumi

from cluster.judge.live import LiveCluster, LiveReadError
from cluster.judge.preflight import check
from cluster.records.lease_records import lease_lines
from cluster.records.leases import Leases
from cluster.records.ledger import ledger_namespace
from cluster.records.migration import Migration, paused_cohorts
from cluster.records.read import Records
from components import update_leases
from components.cluster import ClusterTarget, lease_client, make_provider, read_cluster, resolve_target
from components.config import StackConfig
from components.mid_migration import apply_to_raw, beside_raw
from components.refusals import StackConfigError, redact
from components.stack import HybridGpuCluster
from components.stack_loader import load_stack_config
from policy.gpu_allocation.vocab.labels import MIGRATION_NAME, PROJECT
from policy.gpu_allocation.vocab.stack_files import stack_file_name


def read_raw_config() -> dict[str, Any]:
    """Every value in the project's config namespace, as plain data.

    All keys are read, not only the known ones, so a misspelled key reaches the strict model and is
    reported instead of silently ignored. Values are JSON (objects, lists) or plain strings.
    """
    config = pulumi.Config(PROJECT)
    prefix = f"{PROJECT}:"
    keys = sorted(k.removeprefix(prefix) for k in pulumi.runtime.config.CONFIG.get() if k.startswith(prefix))
    raw: dict[str, Any] = {}
    for key in keys:
        try:
            value = config.get_object(key)
        except (pulumi.ConfigTypeError, RecursionError, ValueError):
            value = config.get(key)  # not JSON, nested too deep or a number too long to read: the model refuses it
        if value is not None:
            raw[key] = value
    return raw


def secret_config_keys() -> frozenset[str]:
    """The project's config keys set as secrets (`pulumi config set --secret`), without the namespace.

    `read_raw_config` reads plain values (validation needs them now); these keys say which of them must stay
    secret on their way to the provider, the outputs, the ledger and any refusal.
    """
    prefix = f"{PROJECT}:"
    return frozenset(
        key.removeprefix(prefix)
        for key in pulumi.runtime.config.CONFIG.get()
        if key.startswith(prefix) and pulumi.runtime.config.is_config_secret(key)
    )


def _mid_migration(
    migration: Migration,
    raw: dict[str, Any],
    project_dir: Path,
    target: ClusterTarget,
    stack_file: str,
    secret_keys: frozenset[str],
) -> tuple[StackConfig, dict[str, Any], dict[str, StackConfig]]:
    """The config this phase of a migration installs: the record decides the cohort's owner, not the stack file.

    The third value: cohort -> the config of the owner installed beside its own (a move one node at a time).
    """
    installs = migration.installs
    doing = f"installs no owner for cohort {migration.cohort}" if installs is None else f"installs {installs} for it"
    if migration.beside is not None:
        doing += f" and {migration.beside} beside it on {dict(migration.to_selector or {})}"
    pulumi.log.warn(
        f"mid-migration: {migration.describe()} (ConfigMap {MIGRATION_NAME}); this update {doing}; continue with "
        f"`eks-hybrid-gpu migrate --stack {pulumi.get_stack()} --cohort {migration.cohort} --to {migration.to_owner}`"
    )
    changed, problems = apply_to_raw(raw, migration)
    other = beside_raw(raw, migration)
    beside: dict[str, StackConfig] = {}
    try:
        if problems:
            raise StackConfigError(problems, stack_file)
        config = load_stack_config(changed, project_dir, target.facts, stack_file=stack_file, secret_keys=secret_keys)
        if other is not None:
            beside[migration.cohort] = load_stack_config(
                other, project_dir, target.facts, stack_file=stack_file, secret_keys=secret_keys
            )
    except StackConfigError as error:
        raise pulumi.RunError(str(error)) from None
    return config, changed, beside


def preflight_line(live: LiveCluster, seconds: float) -> str:
    """What the preflight judged against what the cluster holds, and its time: the cost follows the first figure."""
    return (
        f"preflight: judged {len(live.nodes)} GPU or cohort node(s) of {live.nodes_listed}, {len(live.pods)} "
        f"unfinished pod(s) on them, {len(live.claims)} GPU claim(s), {len(live.slices)} GPU ResourceSlice(s) "
        f"in {seconds:.2f} s"
    )


def _show_leases(records: Records, ours: Leases | None, holder: str | None, warned: set[str]) -> None:
    """Say which nodes and cohorts a `move-host` or `migrate` holds now: this update runs beside it.

    Not this update's own Leases, nor those of the `migrate` run it is a phase of (`holder`), nor the cohort Leases
    a preview already warned of (`warned`).
    """
    if records.leases_error is not None:
        pulumi.log.warn(f"preflight: the Leases of move-host and migrate could not be read ({records.leases_error})")
    mine = {ours.identity} if ours is not None else set()
    others = [
        lease
        for lease in records.leases
        if not lease.held_by_this_process() and lease.holder not in mine | {holder} and lease.name not in warned
    ]
    for line in lease_lines(others):
        pulumi.log.warn(
            f"preflight: Lease {line}; that run is changing these GPUs now: let it finish (`eks-hybrid-gpu inspect` "
            "shows the Leases) before reviewing this preview's view of them"
        )


def _cohort_leases(config: StackConfig, target: ClusterTarget, holder: str | None) -> tuple[Leases | None, set[str]]:
    """An update takes its cohorts' Leases (`components.update_leases`); a preview warns of held ones instead."""
    try:
        kube = lease_client(config.cluster, target)
    except LiveReadError as error:
        if pulumi.runtime.is_dry_run():
            pulumi.log.warn(f"the cohorts' Leases could not be read ({error}): a `pulumi up` would refuse")
            return None, set()
        msg = (
            f"pulumi up of stack {pulumi.get_stack()} refused, nothing was changed: the cohorts' Leases could not be "
            f"read ({error}); an update that cannot see whether `migrate` or `move-host` is changing these GPUs does "
            "not run beside them"
        )
        raise pulumi.RunError(msg) from None
    namespace = ledger_namespace(config.namespaces)
    declared = [c.name for c in config.cohorts]
    if pulumi.runtime.is_dry_run():
        return None, update_leases.warn_held(kube, namespace, declared, holder)
    return update_leases.hold(kube, namespace, declared, pulumi.get_stack(), holder), set()


def run(
    project_dir: Path,
    *,
    render_dir: str | None = None,
    local_kubeconfig: Path | None = None,
    lease_holder: str | None = None,
    cohort_leases: bool = True,
) -> HybridGpuCluster:
    """Everything `__main__.py` does; a function so tests and the local runner can call it.

    `render_dir` turns on render mode, for `eks-hybrid-gpu review` only (its worker passes it): nothing reaches a
    cluster. The provider writes each object into that folder as YAML instead of applying it, the EKS describe
    is skipped (the declared facts stand in), and the GPU Operator renders through Chart v4 (a Helm Release
    cannot render). `__main__.py`, and so `pulumi up`, never passes it; None or an empty string is the normal program.

    `local_kubeconfig`: the kubeconfig of the loopback API server that `cluster.source: local` targets. The program
    reads no environment; its entry point does (`__main__.py`: `eks_hybrid_gpu.localpaths.local_kubeconfig()`) and
    passes the file here. Not needed for the other sources, nor in render mode.

    `cohort_leases` (off only under the unit tests' mocks, which reach no cluster): an update holds the Lease of
    each cohort it may change and refuses while another run holds one; a preview warns of them
    (`components.update_leases`). `lease_holder`: the holderIdentity of the `migrate` run whose own `pulumi up` this
    is (its entry point passes it; `__main__.py` reads `EKS_HYBRID_GPU_LEASE_HOLDER`): its Leases count as this
    update's.
    """
    render_dir = render_dir or None  # an empty folder name is no render mode
    render_only = render_dir is not None
    stack_file = stack_file_name(pulumi.get_stack())
    raw = read_raw_config()
    secret_keys = secret_config_keys()
    try:
        precheck = load_stack_config(raw, project_dir, stack_file=stack_file, secret_keys=secret_keys)
        target = resolve_target(precheck.cluster, render_only=render_only, local_kubeconfig=local_kubeconfig)
        config = load_stack_config(raw, project_dir, target.facts, stack_file=stack_file, secret_keys=secret_keys)
    except StackConfigError as error:
        raise pulumi.RunError(str(error)) from None
    leases: Leases | None = None
    warned: set[str] = set()
    if cohort_leases and not render_only:
        leases, warned = _cohort_leases(config, target, lease_holder)
    migration: Migration | None = None
    beside: dict[str, StackConfig] = {}
    if config.cluster.preflight:
        pulumi.log.info("preflight: reading the cohorts' nodes, who publishes their GPUs, and the ownership ledger")
        started = time.perf_counter()
        try:
            live = read_cluster(config.cluster, target, ledger_namespace(config.namespaces), config)
            records = live.records
            migration = records.migration if records else None
        except LiveReadError as error:
            msg = f"{error}; nothing was changed"
            raise pulumi.RunError(msg) from None
        if records is not None:
            _show_leases(records, leases, lease_holder, warned)
        if migration is not None:
            config, raw, beside = _mid_migration(migration, raw, project_dir, target, stack_file, secret_keys)
        paused = paused_cohorts(migration)
        # A cohort whose owner is being removed gets no allocator from this update, so nothing it installs can
        # double-book; what still publishes or holds its GPUs is what `migrate` waits on before the install phase.
        checked = config.model_copy(update={"cohorts": [c for c in config.cohorts if c.name not in paused]})
        problems = check(checked, live, pulumi.get_stack(), migration)
        pulumi.log.info(preflight_line(live, time.perf_counter() - started))
        if problems:
            raise pulumi.RunError(
                str(StackConfigError(redact(problems, raw, secret_keys), stack_file, subject="The live nodes"))
            )
    if leases is not None:  # the preflight may have taken long: still ours, or register nothing
        update_leases.still_held(leases, pulumi.get_stack())
    provider = make_provider(target, secret="cluster" in secret_keys, render_dir=render_dir)
    cluster = HybridGpuCluster(
        "gpu",
        config=config,
        project_dir=project_dir,
        secret_inputs=bool(secret_keys),
        render_only=render_only,
        paused=paused_cohorts(migration),
        migration=migration.as_json() if migration is not None else None,
        beside=beside,
        opts=pulumi.ResourceOptions(provider=provider),
    )
    pulumi.export("ownership", cluster.ownership)
    pulumi.export("namespaces", cluster.namespaces)
    pulumi.export("smokeJobs", cluster.smoke_jobs)
    pulumi.export("releases", cluster.releases)
    return cluster
