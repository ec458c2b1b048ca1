"""How a phase runs `pulumi up`: the local default's engine for a local stack, else the user's own Pulumi."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster.client.kubeclient import Kube
from cluster.records.migration import Migration
from eks_hybrid_gpu.engine_interrupt import interruptible
from eks_hybrid_gpu.migrate import left_creating
from eks_hybrid_gpu.migrate.phases import Up
from eks_hybrid_gpu.migrate.planning import MigrateRefused, StackFile, config_at
from eks_hybrid_gpu.migrate.records import say
from eks_hybrid_gpu.migrate.request import MigrateRequest
from policy.gpu_allocation.vocab.labels import DEVICE_PLUGIN, DRA, PROJECT
from policy.gpu_allocation.vocab.stack_files import short_name


class UpFailed(Exception):
    """A phase's `pulumi up` failed; its output above says why."""


def stack_runner(
    stack: StackFile, request: MigrateRequest, kubeconfig: str | None, holder: str, kube: Kube | None = None
) -> Up:
    """How one phase runs `pulumi up`: the local default's engine for a local stack, else the user's Pulumi.

    `holder`: the holderIdentity of this run's Leases; the program of each `pulumi up` is told it, so it counts the
    cohort's Lease as its own instead of refusing the migration that holds it. `kube`: the cluster, where a killed
    earlier update's objects are settled before each `pulumi up` (`left_creating`); None leaves them to the engine.
    """
    from pulumi import automation as auto

    from eks_hybrid_gpu import chartmirror, engine, engine_lock

    def output(line: str) -> None:
        print(f"  | {line}", flush=True)

    if stack.config.cluster.source == "local":
        from eks_hybrid_gpu.localpaths import local_kubeconfig

        state = Path(request.state_dir) if request.state_dir else engine.engine_state_dir()
        try:
            env = engine.prepare(state, Path(kubeconfig) if kubeconfig else local_kubeconfig())
        except engine.EngineUnavailable as error:
            raise MigrateRefused(str(error)) from None
        charts: dict[str, Any] = {}
        target = config_at(stack, _target(stack, request.cohort, request.to))
        try:
            for config in (stack.config, target):
                charts.update(chartmirror.choose(config, request.chart_mirror).overrides or {})
        except chartmirror.ChartMirrorError as error:
            raise MigrateRefused(str(error)) from None
        pulumi_stack = engine.stack(
            env, stack.name, work_dir=stack.project_dir, charts=charts or None, lease_holder=holder
        )

        work = engine.project_folder(env)  # a stable folder: this run's own work folder is removed after it

        def before_up() -> None:
            engine_lock.clear_stale(env.pulumi_home, state / "backend", work, PROJECT, short_name(stack.name), say)

        locked_hint = (
            f"`{engine_lock.cancel_command(env.pulumi_home, state / 'backend', work, short_name(stack.name))}`"
        )
    else:
        from components.program import run as program

        def user_program() -> None:
            program(stack.project_dir, lease_holder=holder)

        pulumi_stack = auto.select_stack(
            stack.name,
            project_name=PROJECT,
            program=user_program,
            opts=auto.LocalWorkspaceOptions(work_dir=str(stack.project_dir), pulumi_command=_users_pulumi(stack)),
        )

        def before_up() -> None:
            """The user's own backend: its locks are Pulumi's to judge; a refusal names the command below."""

        locked_hint = f"`pulumi cancel --cwd {stack.project_dir} --stack {stack.name} --yes`"
    packs = engine.policy_packs()

    def up(why: str) -> None:
        before_up()
        if kube is not None:
            try:
                left_creating.settle(kube, pulumi_stack, say)
            except left_creating.LeftByOthers as error:
                raise UpFailed(str(error)) from None
        say(f"pulumi up of stack {stack.name} with the policy pack: {why}")
        try:
            # Ctrl-C: the engine records its steps in flight and stops; migrate's line then names the re-run.
            interruptible(
                f"`pulumi up` of stack {stack.name}",
                lambda: pulumi_stack.up(on_output=output, color="never", policy_packs=packs),
            )
        except auto.CommandError as error:
            raise UpFailed(with_fix(" ".join(str(error).split()), locked_hint)[-900:]) from None

    return up


SSA_CONFLICT = "Server-Side Apply field conflict"
"""How the Kubernetes provider refuses an object that exists outside the stack's state."""


def with_fix(text: str, locked_hint: str) -> str:
    """A failed `pulumi up`'s words with the fix for the two failures an interrupted update leaves behind.

    A killed update leaves its lock, and the object it was creating in the cluster but not in the state: the resumed
    update then meets that object as a Server-Side Apply conflict (seen on the lent H200, docs/host-validation.md).
    """
    if "the stack is currently locked" in text:
        text += f"; if no other update of the stack runs, clear its lock with {locked_hint}"
    if SSA_CONFLICT in text:
        text += (
            "; an interrupted update may have left the object it was creating outside the stack's state: if no other "
            "tool manages that object (its URN is in the output above), delete it, then run the same command again"
        )
    return text


def _users_pulumi(stack: StackFile) -> Any:
    """The user's own Pulumi CLI for a stack in the user's own backend; MigrateRefused, in words to act on, without.

    A missing Kubernetes provider is only said: the user's Pulumi installs its plugins itself, where it may.
    """
    from pulumi import automation as auto

    from eks_hybrid_gpu import engine_tools

    found = engine_tools.user_engine()
    if found.pulumi is None or found.version is None:
        msg = (
            f"migrate runs `pulumi up` of stack {stack.name} ({stack.config.cluster.source} source) with your own "
            f"Pulumi CLI and its backend, and {found.problem.split(', and ')[0]}: install the Pulumi CLI, log in to "
            f"the stack's backend (`pulumi login`), then run the command again (`--dry-run` needs neither)"
        )
        raise MigrateRefused(msg)
    if found.problem:
        then = "upgrade it if `pulumi up` fails" if found.provider else "`pulumi up` installs it where it can download"
        say(f"notice: {found.problem}; {then}")
    return auto.PulumiCommand(root=str(found.pulumi.parent.parent), skip_version_check=True)


def _target(stack: StackFile, cohort_name: str, to: str) -> Migration:
    """A migration at its install phase: the target owner's config, for choosing its chart source."""
    cohort = next((c for c in stack.config.cohorts if c.name == cohort_name), None)
    selector = cohort.selector(stack.config.cohort_label_key) if cohort else {}
    return Migration(cohort_name, DEVICE_PLUGIN if to == DRA else DRA, to, "install", selector)
