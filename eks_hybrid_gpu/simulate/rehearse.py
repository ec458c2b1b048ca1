"""Rehearsing a cohort change: a work copy of the project and a Pulumi run against the simulated fleet."""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cluster.client import names
from cluster.findings import show
from eks_hybrid_gpu import projectdir
from eks_hybrid_gpu.cluster_access import ACCESS_EXIT_CODE
from eks_hybrid_gpu.confirm import DECLINED_EXIT_CODE, NO_TERMINAL_EXIT_CODE, asker, refusal
from eks_hybrid_gpu.options import UsageError, read_text_argument, request_of


def rehearsal_work_dir(stack_file: Path, name: str, root: Path) -> Path:
    """A private work dir holding Pulumi.yaml and a copy of the stack file, so the repository is never written.

    Pulumi stores the passphrase salt in the stack file on the first run; the copy keeps it across runs.
    """
    work = root / "rehearse" / name
    (work / "stacks").mkdir(parents=True, exist_ok=True)
    shutil.copy(projectdir.current() / "Pulumi.yaml", work / "Pulumi.yaml")
    document = yaml.safe_load(stack_file.read_text()) or {}
    target = projectdir.stack_file(name, work)
    if target.exists() and "encryptionsalt" not in document:
        salt = (yaml.safe_load(target.read_text()) or {}).get("encryptionsalt")
        if salt:
            document["encryptionsalt"] = salt
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return work


def stack_name_of(stack_file: Path) -> str:
    """`Pulumi.rehearse.yaml` -> rehearse; any other file name -> its stem."""
    name = stack_file.name
    if name.startswith("Pulumi.") and name.endswith((".yaml", ".yml")):
        return name.removeprefix("Pulumi.").rsplit(".", 1)[0]
    return stack_file.stem


@dataclass(frozen=True)
class Rehearsal:
    """One `simulate preview|up|destroy` as its command line asks for it, parsed once."""

    action: str
    """preview, up or destroy."""
    stack: str = "local"
    stack_file: str | None = None
    """Any stack file (`--stack-file`, as given); the stack is named after it. None: stacks/Pulumi.<stack>.yaml."""
    chart_mirror: Path | None = None
    yes: bool = False
    """`up --yes`: update without the preview and the question."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Rehearsal:
        """The rehearsal of a parsed `simulate preview|up|destroy` command line (destroy takes no chart mirror).

        NameRefused for a --stack that is no stack name.
        """
        names.stack_name(args.stack)
        return request_of(cls, args)


def run_pulumi(rehearsal: Rehearsal) -> int:
    """`simulate preview|up|destroy`: the stack file's program in a work copy, against the simulated fleet."""
    from pulumi import automation as auto

    from eks_hybrid_gpu import chartmirror, engine, localcluster, localprocs
    from eks_hybrid_gpu.engine import engine_state_dir
    from eks_hybrid_gpu.engine_up import planned_up
    from eks_hybrid_gpu.localpaths import local_state_dir

    if rehearsal.stack_file is None:
        names.stack_name(rehearsal.stack)
    stack_file = Path(rehearsal.stack_file) if rehearsal.stack_file else projectdir.stack_file(rehearsal.stack)
    name = stack_name_of(stack_file) if rehearsal.stack_file else rehearsal.stack
    option = f"--stack-file {show(rehearsal.stack_file)}" if rehearsal.stack_file else f"--stack {rehearsal.stack}"
    try:
        found = stack_file.is_file()
    except (OSError, ValueError):  # a name too long for the file system
        found = False
    if not found:
        known = ", ".join(projectdir.stack_names()) or "none"
        msg = f"{option}: {show(str(stack_file))} is not a file; name a stack of stacks/ ({known}) or a --stack-file"
        raise UsageError(msg)
    if rehearsal.action == "up":
        preview = f"`eks-hybrid-gpu simulate preview {option}` to print the plan alone"
        stop = refusal("simulate up", yes=rehearsal.yes, dry_run=False, plan_only=preview)
        if stop is not None:
            print(stop, file=sys.stderr)
            return NO_TERMINAL_EXIT_CODE
    charts: dict[str, Any] | None = None
    if rehearsal.action != "destroy":  # destroy runs no program: it renders no chart
        label = "--stack-file" if rehearsal.stack_file else f"--stack {rehearsal.stack}: its file"
        text = read_text_argument(str(stack_file), label, "a stack file")
        try:
            document = yaml.safe_load(text) or {}
            choice = chartmirror.choose_for_document(
                document if isinstance(document, dict) else {}, rehearsal.chart_mirror
            )
        except (OSError, yaml.YAMLError, chartmirror.ChartMirrorError) as error:
            print(f"simulate {rehearsal.action}: {' '.join(str(error).split())}", file=sys.stderr)
            return ACCESS_EXIT_CODE
        for notice in choice.notices:
            print(notice, file=sys.stderr)
        charts = choice.overrides or None
    try:
        cluster = localcluster.attach(local_state_dir())
    except localprocs.LocalClusterError as error:
        print(f"simulate {rehearsal.action}: {error}; start it with `eks-hybrid-gpu simulate start`", file=sys.stderr)
        return ACCESS_EXIT_CODE
    try:
        env = engine.prepare(engine_state_dir(), cluster.kubeconfig)
    except engine.EngineUnavailable as error:
        print(f"simulate {rehearsal.action}: {error}", file=sys.stderr)
        return 1
    work_dir = rehearsal_work_dir(stack_file, name, engine_state_dir())
    stack = engine.stack(env, name, work_dir=work_dir, charts=charts)
    try:
        if rehearsal.action == "preview":
            stack.preview(on_output=print, color="never", policy_packs=engine.policy_packs())
        elif rehearsal.action == "up":
            where = f"the simulated cluster at {cluster.server}"
            if planned_up(stack, None if rehearsal.yes else asker(), print, where) is None:
                print(f"simulate up: not updated (answered no): stack {name} is as it was", file=sys.stderr)
                return DECLINED_EXIT_CODE
        else:
            stack.destroy(on_output=print, color="never")
    except auto.CommandError:
        print(
            f"simulate {rehearsal.action}: pulumi {rehearsal.action} of stack {name} failed; its output above says why",
            file=sys.stderr,
        )
        return 1
    return 0
