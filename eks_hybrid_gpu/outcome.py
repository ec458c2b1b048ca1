"""What a `move-host` or `migrate` run did, as its `-o json|yaml` prints it: filled in as the run goes.

Those commands print their progress as they go (a phase can take minutes). With `-o json|yaml` the progress goes to
stderr and stdout carries one document at the end, so a script reads the result without parsing the log: the
request, the plan, each node before and after, the result and the exit code.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cluster.judge.node_state import NodeState
from eks_hybrid_gpu.options import serialized

Result = Literal["planned", "nothing-to-do", "declined", "done"]
"""planned: --dry-run printed the plan; declined: the question was answered no; done: the cluster was changed."""


def node_json(state: NodeState, key: str) -> dict[str, Any]:
    """One node as before/after show it (`transit.state_rows`' columns), as data."""
    return {
        "name": state.name,
        "cohortLabel": {key: state.labels.get(key)},
        "cordoned": state.cordoned,
        "allocatorPods": [p.as_json() for p in state.allocators],
        "publishes": {"resources": dict(state.resources), "resourceSlices": list(state.slices)},
        "gpuConsumers": [c.as_json() for c in state.consumers],
    }


@dataclass
class Outcome:
    """The run's plan, nodes and result, recorded by the command as it reaches each."""

    kind: str
    """The document's kind: MoveHostResult or MigrateResult."""
    spec: Mapping[str, Any]
    """The request as the command line gave it."""
    plan: list[str] = field(default_factory=list)
    label_key: str = ""
    before: list[NodeState] = field(default_factory=list)
    after: list[NodeState] = field(default_factory=list)
    result: Result | None = None
    """None: the run stopped before a result (refused, failed, interrupted: its line on stderr says why)."""
    timings: dict[str, float] = field(default_factory=dict)

    def planned(self, plan: Sequence[str], key: str, before: Sequence[NodeState]) -> None:
        """The plan is printed: record it and the nodes as they are."""
        self.plan, self.label_key, self.before = list(plan), key, list(before)

    def body(self, exit_code: int) -> dict[str, Any]:
        """The document's fields after `apiVersion` and `kind`."""
        status: dict[str, Any] = {
            "result": self.result or "stopped",
            "exitCode": exit_code,
            "plan": self.plan,
            "before": [node_json(s, self.label_key) for s in self.before],
            "after": [node_json(s, self.label_key) for s in self.after],
        }
        if self.timings:
            status["secondsPerPhase"] = {phase: round(seconds, 1) for phase, seconds in self.timings.items()}
        return {"spec": dict(self.spec), "status": status}


def reported(output: str, outcome: Outcome, run: Callable[[], int]) -> int:
    """Run the command; with `-o json|yaml` its progress goes to stderr, and `outcome` to stdout at the end."""
    if output not in ("json", "yaml"):
        return run()
    with contextlib.redirect_stdout(sys.stderr):
        code = run()
    print(serialized(outcome.kind, outcome.body(code), output))
    return code
