"""`eks-hybrid-gpu migrate --stack S --cohort C --to OWNER`: change a cohort's owner in order, never two at once.

Changed in one `pulumi up`, Pulumi creates the new owner's resources before it deletes the old one's, so both
allocators run on the same GPUs for the length of the update; the preview refuses that and names this command.
It runs the change in phases, each recorded in ConfigMap `gpu-allocation-migration` beside the ledger (the
program reads it: see `components.migration`), each `pulumi up` a real one with the policy pack:

1. cordon: plan and checks (the cohort's nodes from the ledger, their GPU consumers: refused, or evicted with
   `--drain` through the Eviction API with PodDisruptionBudgets respected; the target owner's stack config
   with its floors; no second publisher), then cordon the nodes and drain them;
2. remove: `pulumi up` with no owner for the cohort (other cohorts untouched);
3. wait-unpublished: until the old allocator pods are gone and their publication ended on every node;
4. install: `pulumi up` with the new owner;
5. wait-published: until its allocator is Ready and publishing on every node;
6. uncordon (only what this command cordoned), clear the record, print before/after, write the new owner into
   the stack file (or print the exact edit).

`--dry-run` prints the plan and changes nothing. Run again after Ctrl-C, a kill or a failed phase, the same
command continues from the recorded phase.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.config import StackConfig
from components.consumers import consumers_by_node
from components.ledger import LedgerError, parse_record
from components.live import LiveCluster
from components.migration import PHASES, Migration, apply_to_raw, parse_migration, steps, unsupported
from components.preflight import check_publishers, matches
from components.refusals import StackConfigError
from components.validation import load_stack_config
from eks_hybrid_gpu import transit
from eks_hybrid_gpu.cli import run_command
from eks_hybrid_gpu.kubeclient import (
    CLAIMS,
    DAEMONSETS,
    NODES,
    PODS,
    SLICES,
    Kube,
    add_cluster_options,
    connect,
    run_reporting,
    segment,
)
from eks_hybrid_gpu.stackfile import PROJECT_DIR, raw_config, write_owner
from eks_hybrid_gpu.tables import table_lines
from policy.gpu_allocation.vocab.labels import (
    DEVICE_PLUGIN,
    DRA,
    GPU_OPERATOR,
    LEDGER_KEY,
    LEDGER_NAME,
    MIGRATION_KEY,
    MIGRATION_NAME,
    OWNERS,
    PROJECT,
)

DEFAULT_TIMEOUT_SECONDS = 600.0
Up = Callable[[str], None]
"""Runs one `pulumi up` of the stack with the policy pack; the argument says why, for the output."""


class MigrateRefused(Exception):
    """The migration cannot run as asked; the message names the reason and what to do instead."""


class UpFailed(Exception):
    """A phase's `pulumi up` failed; its output above says why."""


def _say(line: str) -> None:
    print(line, flush=True)


@dataclass(frozen=True)
class StackFile:
    """The stack as its file declares it: raw config values (without the project prefix) and the checked model."""

    name: str
    path: Path
    project_dir: Path
    raw: dict[str, Any]
    config: StackConfig

    @property
    def relative(self) -> str:
        """`stacks/Pulumi.S.yaml`, for messages."""
        return f"stacks/{self.path.name}"


def read_stack_file(name: str, project_dir: Path) -> StackFile:
    """Read and validate `stacks/Pulumi.<name>.yaml`; MigrateRefused when it is missing or invalid."""
    path = project_dir / "stacks" / f"Pulumi.{name}.yaml"
    if not path.is_file():
        msg = f"no stack file {path}; pass the stack's name as in stacks/Pulumi.<name>.yaml (and --project-dir)"
        raise MigrateRefused(msg)
    raw = raw_config(yaml.safe_load(path.read_text()) or {})
    try:
        config = load_stack_config(raw, project_dir, stack_file=f"stacks/{path.name}")
    except StackConfigError as error:
        raise MigrateRefused(str(error)) from None
    return StackFile(name, path, project_dir, raw, config)


def rerun_command(args: argparse.Namespace) -> str:
    """The same command, to continue after an interruption."""
    options = ("stack", "cohort", "to", "drain", "project_dir", "state_dir", "kubeconfig")
    return transit.rerun_command(
        "migrate", options=[(f"--{name.replace('_', '-')}", getattr(args, name)) for name in options]
    )


@dataclass
class ClusterRecords:
    """The ledger and the migration record in the ledger's namespace, read and written through the API."""

    kube: Kube
    namespace: str
    timings: dict[str, float] = field(default_factory=dict)

    def _path(self, name: str = "") -> str:
        base = f"/api/v1/namespaces/{segment(self.namespace)}/configmaps"
        return f"{base}/{segment(name)}" if name else base

    def ledger(self) -> dict[str, Any] | None:
        """The ownership map the last `pulumi up` wrote."""
        return parse_record(self.kube.get_or_none(self._path(LEDGER_NAME)), LEDGER_KEY)

    def migration(self) -> Migration | None:
        """The migration under way, if any."""
        record = parse_record(self.kube.get_or_none(self._path(MIGRATION_NAME)), MIGRATION_KEY)
        return parse_migration(record, f"ConfigMap {self.namespace}/{MIGRATION_NAME}")

    def record(self, migration: Migration) -> None:
        """Write the phase, so the program, `inspect` and a re-run see it."""
        data = {MIGRATION_KEY: json.dumps(migration.as_json(), sort_keys=True, indent=2)}
        if self.kube.get_or_none(self._path(MIGRATION_NAME)) is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": MIGRATION_NAME, "namespace": self.namespace},
                "data": data,
            }
            self.kube.create(self._path(), body)
        else:
            self.kube.merge_patch(self._path(MIGRATION_NAME), {"data": data})
        _say(f"[phase {migration.phase}] recorded in ConfigMap {self.namespace}/{MIGRATION_NAME}")

    def clear(self) -> None:
        """The migration is finished: remove the record."""
        self.kube.delete(self._path(MIGRATION_NAME))


def _live(kube: Kube) -> LiveCluster:
    """What the preflight reads, through the day-2 client."""
    return LiveCluster(
        nodes=kube.items(NODES),
        slices=kube.items(SLICES),
        pods=kube.items(PODS, fieldSelector="status.phase!=Succeeded,status.phase!=Failed"),
        daemonsets=kube.items(DAEMONSETS),
        claims=kube.items(CLAIMS),
    )


def _config_at(stack: StackFile, migration: Migration) -> StackConfig:
    """The stack config the program uses in the migration's phase (the target owner's floors checked here)."""
    changed, problems = apply_to_raw(stack.raw, migration)
    try:
        if problems:
            raise StackConfigError(problems, stack.relative)
        return load_stack_config(changed, stack.project_dir, stack_file=stack.relative)
    except StackConfigError as error:
        msg = f"with cohort {migration.cohort} owned by {migration.installs or migration.from_owner}: {error}"
        raise MigrateRefused(msg) from None


def plan(kube: Kube, stack: StackFile, records: ClusterRecords, args: argparse.Namespace) -> Migration | None:
    """The migration to run (a recorded one to resume, or a new one after its checks); None when nothing is left."""
    if not stack.config.cluster.preflight:
        msg = (
            f"{stack.relative} sets cluster.preflight false; the program reads the migration record in its preflight, "
            "so without it a `pulumi up` could reinstall the old owner mid-migration: turn the preflight on first"
        )
        raise MigrateRefused(msg)
    recorded = records.migration()
    if recorded is not None:
        if (recorded.cohort, recorded.to_owner) != (args.cohort, args.to):
            msg = (
                f"another migration is under way ({recorded.describe()}); finish it first with `eks-hybrid-gpu migrate "
                f"--stack {args.stack} --cohort {recorded.cohort} --to {recorded.to_owner}`"
            )
            raise MigrateRefused(msg)
        _say(f"resuming the migration recorded in the cluster: {recorded.describe()}")
        return dataclasses.replace(recorded, drain=recorded.drain or args.drain)  # --drain added on a re-run counts
    ledger = records.ledger()
    if ledger is None:
        msg = (
            f"no ownership ledger in namespace {records.namespace}: migrate changes the owner of a cohort that "
            "`pulumi up` installed; run it first"
        )
        raise MigrateRefused(msg)
    cohorts: Mapping[str, Any] = ledger.get("cohorts") or {}
    entry = cohorts.get(args.cohort)
    if not isinstance(entry, Mapping):
        msg = (
            f"the ledger has no cohort {args.cohort} (cohorts: {', '.join(sorted(cohorts)) or 'none'}); a new cohort "
            "is installed by `pulumi up`, not migrated"
        )
        raise MigrateRefused(msg)
    from_owner = str(entry.get("owner"))
    if from_owner == args.to:
        return None
    mode = stack.config.operator.mode if args.to == GPU_OPERATOR else None
    why_not = unsupported(from_owner, ledger.get("operatorMode"), args.to, mode)
    if why_not is not None:
        msg = f"cohort {args.cohort}: {from_owner} -> {args.to}: {why_not}"
        raise MigrateRefused(msg)
    selector = {str(k): str(v) for k, v in (entry.get("nodeSelector") or {}).items()}
    live = _live(kube)
    nodes = sorted(str(n["metadata"]["name"]) for n in live.nodes if matches(selector, n))
    if not nodes:
        msg = f"cohort {args.cohort}'s selector {selector} selects no node; nothing to migrate: edit the stack file"
        raise MigrateRefused(msg)
    migration = Migration(args.cohort, from_owner, args.to, "cordon", selector, tuple(nodes), (), args.drain)
    _config_at(stack, migration.at("install"))  # the target owner's floors (hostDriverVerified, versions, ...)
    current = _config_at(stack, migration)
    index = next(i for i, c in enumerate(current.cohorts) if c.name == args.cohort)
    second = [p for p in check_publishers(current, live) if p.path == f"cohorts[{index}].nodeSelector"]
    if second:
        raise MigrateRefused("; ".join(p.message for p in second))
    held = [c for node in nodes for c in consumers_by_node(live.pods, live.claims).get(node, [])]
    if held and not args.drain:
        msg = (
            f"GPUs of cohort {args.cohort} are in use: {'; '.join(c.describe() for c in held)}; let those pods finish, "
            f"or evict them with `{rerun_command(args)} --drain` (PodDisruptionBudgets respected)"
        )
        raise MigrateRefused(msg)
    cordoned = {str(n["metadata"]["name"]) for n in live.nodes if (n.get("spec") or {}).get("unschedulable")}
    return Migration(
        args.cohort,
        from_owner,
        args.to,
        "cordon",
        selector,
        tuple(nodes),
        tuple(n for n in nodes if n not in cordoned),
        args.drain,
    )


def _run_phase(
    migration: Migration, kube: Kube, records: ClusterRecords, up: Up, timeout: float, rerun: str
) -> Migration:
    """Do one phase, then record the next; returns the migration at the next phase."""
    phase = migration.phase
    started = time.monotonic()
    nodes = migration.nodes
    if phase == "cordon":
        for node in nodes:
            record = {"to": migration.cohort, "migration": f"{migration.from_owner}->{migration.to_owner}"}
            transit.mark(
                kube, node, unschedulable=True, transit={**record, "cordonedByUs": node in migration.cordoned_by_us}
            )
            _say(f"cordoned {node}")
        for node in nodes:
            transit.drain_consumers(kube, node, drain=migration.drain, timeout=timeout, progress=_say, rerun=rerun)
    elif phase == "remove":
        up(f"remove {migration.from_owner} from cohort {migration.cohort}")
    elif phase == "wait-unpublished":
        for node in nodes:
            transit.wait_unpublished(kube, node, timeout, _say, rerun)
    elif phase == "install":
        up(f"install {migration.to_owner} for cohort {migration.cohort}")
    elif phase == "wait-published":
        for node in nodes:
            transit.wait_published(kube, node, migration.to_owner, timeout, _say, rerun)
    records.timings[phase] = time.monotonic() - started
    _say(f"[phase {phase}] done in {records.timings[phase]:.1f} s")
    following = PHASES[PHASES.index(phase) + 1]
    moved = migration.at(following)
    records.record(moved)
    return moved


def _finish(migration: Migration, kube: Kube, records: ClusterRecords) -> None:
    started = time.monotonic()
    for node in migration.nodes:
        ours = node in migration.cordoned_by_us
        transit.mark(kube, node, unschedulable=False if ours else None, transit=None)
        _say(f"{'uncordoned' if ours else 'left cordoned (it was cordoned before)'} {node}")
    records.clear()
    records.timings["uncordon"] = time.monotonic() - started
    _say(f"[phase uncordon] done in {records.timings['uncordon']:.1f} s; ConfigMap {MIGRATION_NAME} removed")


def migrate(kube: Kube, stack: StackFile, args: argparse.Namespace, up: Up) -> int:
    """Plan, then (unless --dry-run) run or resume the migration; 0 when the cohort is served by its new owner."""
    started = time.monotonic()
    records = ClusterRecords(kube, stack.config.namespaces.device_plugin)
    migration = plan(kube, stack, records, args)
    if migration is None:
        _say(f"cohort {args.cohort} is already owned by {args.to} in the cluster's ledger; nothing to migrate")
        return _write_stack_file(stack, args.cohort, args.to, records)
    before = [transit.read_state(kube, n) for n in migration.nodes]
    key = stack.config.cohort_label_key
    _say(f"migrate: {migration.describe()} on {', '.join(migration.nodes)}")
    _say("\n".join(table_lines(transit.state_rows(before, key))))
    _say("plan:\n" + "\n".join(f"  {line}" for line in steps(migration)))
    if args.dry_run:
        _say("--dry-run: nothing was changed")
        return 0
    rerun = rerun_command(args)
    if records.migration() is None:
        records.record(migration)
    while migration.phase != "uncordon":
        migration = _run_phase(migration, kube, records, up, args.timeout, rerun)
    _finish(migration, kube, records)
    after = [transit.read_state(kube, n) for n in migration.nodes]
    _say("before:\n" + "\n".join(table_lines(transit.state_rows(before, key))))
    _say("after:\n" + "\n".join(table_lines(transit.state_rows(after, key))))
    timings = ", ".join(f"{p} {s:.1f} s" for p, s in records.timings.items())
    _say(f"cohort {args.cohort} is owned by {args.to} ({time.monotonic() - started:.1f} s: {timings})")
    return _write_stack_file(stack, migration.cohort, migration.to_owner, records, migration.node_selector)


def _write_stack_file(
    stack: StackFile, cohort: str, owner: str, records: ClusterRecords, selector: Mapping[str, str] | None = None
) -> int:
    """Make the repository agree with the cluster: the ledger's selector is the hosts' selector."""
    if selector is None:
        entry = ((records.ledger() or {}).get("cohorts") or {}).get(cohort) or {}
        selector = entry.get("nodeSelector") or {}
    left = write_owner(stack.path, cohort, owner, selector)
    if left is None:
        _say(f"{stack.path}: cohort {cohort} declares owner {owner} with the hosts' selector, as the cluster has it")
        return 0
    _say(f"{stack.path} could not be edited safely; make this edit so a later `pulumi up` agrees: {left}")
    return 0


def stack_runner(stack: StackFile, args: argparse.Namespace, kubeconfig: str | None) -> Up:
    """How one phase runs `pulumi up`: the local default's engine for a local stack, else the user's Pulumi."""
    from pulumi import automation as auto

    from eks_hybrid_gpu import chartmirror, engine

    def output(line: str) -> None:
        print(f"  | {line}", flush=True)

    if stack.config.cluster.source == "local":
        from components.cluster import local_kubeconfig

        state = Path(args.state_dir) if args.state_dir else engine.engine_state_dir()
        env = engine.prepare(state, Path(kubeconfig) if kubeconfig else local_kubeconfig())
        charts: dict[str, Any] = {}
        target = _config_at(stack, _target(stack, args.cohort, args.to))
        try:
            for config in (stack.config, target):
                charts.update(chartmirror.choose(config, args.chart_mirror).overrides or {})
        except chartmirror.ChartMirrorError as error:
            raise MigrateRefused(str(error)) from None
        pulumi_stack = engine.stack(env, stack.name, work_dir=stack.project_dir, charts=charts or None)
    else:
        from components.program import run as program

        def user_program() -> None:
            program(stack.project_dir)

        pulumi_stack = auto.select_stack(
            stack.name,
            project_name=PROJECT,
            program=user_program,
            opts=auto.LocalWorkspaceOptions(work_dir=str(stack.project_dir)),
        )
    packs = engine.policy_packs()

    def up(why: str) -> None:
        _say(f"pulumi up of stack {stack.name} with the policy pack: {why}")
        try:
            pulumi_stack.up(on_output=output, color="never", policy_packs=packs)
        except auto.CommandError as error:
            raise UpFailed(" ".join(str(error).split())[-600:]) from None

    return up


def _target(stack: StackFile, cohort_name: str, to: str) -> Migration:
    """A migration at its install phase: the target owner's config, for choosing its chart source."""
    cohort = next((c for c in stack.config.cohorts if c.name == cohort_name), None)
    selector = cohort.selector(stack.config.cohort_label_key) if cohort else {}
    return Migration(cohort_name, DEVICE_PLUGIN if to == DRA else DRA, to, "install", selector)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu migrate --stack S --cohort C --to OWNER` options."""
    p.add_argument("--stack", required=True, help="the stack, as in stacks/Pulumi.<stack>.yaml")
    p.add_argument("--cohort", required=True, help="the cohort whose owner changes, as named in the ledger")
    p.add_argument("--to", required=True, choices=OWNERS, help="the new owner")
    p.add_argument(
        "--drain", action="store_true", help="evict the pods holding its GPUs (PodDisruptionBudgets respected)"
    )
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, help="seconds per wait (default 600)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    p.add_argument("--project-dir", type=Path, help="the project holding stacks/ (default: this checkout)")
    p.add_argument("--state-dir", type=Path, help="a local stack's Pulumi home and backend (default: local up's)")
    p.add_argument("--chart-mirror", type=Path, help="a local stack's chart mirror folder, as for `local up`")
    add_cluster_options(p, "default: the local cluster's for a local stack, else $KUBECONFIG or ~/.kube/config")


def main(argv: Sequence[str]) -> int:
    """`eks-hybrid-gpu migrate ARGV...`."""
    return run_command("migrate", argv)


def run(args: argparse.Namespace) -> int:
    """0 migrated (or nothing to do); 1 refused, a phase failed or a wait ran out (re-run to continue); 2 no cluster."""
    return run_reporting("migrate", lambda: _migrate(args), (MigrateRefused, transit.TransitError, LedgerError))


def _migrate(args: argparse.Namespace) -> int:
    try:
        stack = read_stack_file(args.stack, args.project_dir or PROJECT_DIR)
        kubeconfig = args.kubeconfig
        if kubeconfig is None and stack.config.cluster.source == "local":
            from components.cluster import local_kubeconfig

            kubeconfig = str(local_kubeconfig())
        elif kubeconfig is None and stack.config.cluster.source == "kubeconfig":
            kubeconfig = stack.config.cluster.kubeconfig
        kube = connect(kubeconfig, args.context or stack.config.cluster.context)
        up: Up = (lambda why: None) if args.dry_run else stack_runner(stack, args, kubeconfig)
        return migrate(kube, stack, args, up)
    except UpFailed as error:
        print(
            f"migrate: pulumi up failed (its output above says why: {error}); the phase stays recorded: fix that, "
            f"then run `{rerun_command(args)}` again",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print(
            f"migrate: interrupted; the phase is recorded in the cluster: run `{rerun_command(args)}` again",
            file=sys.stderr,
        )
        return 130
