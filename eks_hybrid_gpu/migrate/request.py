"""What a `migrate` run was asked to do: its command line, parsed once into one frozen request.

The planning, the phases, the merge and each phase's `pulumi up` read this request, never the argparse Namespace;
`rerun` is the line that continues the same run after an interruption.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from cluster.client import names
from eks_hybrid_gpu import projectdir, transit
from eks_hybrid_gpu.options import request_of


@dataclass(frozen=True)
class MigrateRequest:
    """One owner change as the command line asks for it."""

    stack: str
    """The stack, as in stacks/Pulumi.<stack>.yaml."""
    cohort: str
    to: str
    """The new owner."""
    drain: bool = False
    timeout: float = transit.DEFAULT_TIMEOUT_SECONDS
    """How long each wait may take, in seconds."""
    dry_run: bool = False
    yes: bool = False
    """--yes: run without asking first (a script's run: stdin is no terminal)."""
    merge_into: str | None = None
    """With --merge-into, the existing cohort of the new owner the hosts move into, one at a time."""
    project: Path | None = None
    """`--project` as given (None: the project the command found), for the rerun line."""
    state_dir: Path | None = None
    chart_mirror: Path | None = None
    kubeconfig: str | None = None
    context: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MigrateRequest:
        """The request of a parsed `migrate` command line; NameRefused for a stack or cohort that is no name."""
        names.stack_name(args.stack)
        names.cohort_name(args.cohort)
        if args.merge_into is not None:
            names.cohort_name(args.merge_into, "--merge-into")
        return request_of(cls, args)

    @property
    def project_dir(self) -> Path:
        """The project the stack file is read from: `--project`, else the one the command found."""
        return projectdir.of(self.project)

    def rerun(self) -> str:
        """The same command, to continue after an interruption: every flag that names the cluster, stack or charts."""
        flags: list[tuple[str, object]] = [
            ("--stack", self.stack),
            ("--cohort", self.cohort),
            ("--to", self.to),
            ("--drain", self.drain),
            ("--yes", self.yes),
            ("--merge-into", self.merge_into),
            ("--project", self.project),
            ("--state-dir", self.state_dir),
            ("--chart-mirror", self.chart_mirror),
            ("--kubeconfig", self.kubeconfig),
            ("--context", self.context),
            ("--timeout", self.timeout if self.timeout != transit.DEFAULT_TIMEOUT_SECONDS else None),
        ]
        return transit.rerun_command("migrate", options=flags)
