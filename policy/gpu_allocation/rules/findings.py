"""Findings as records, and the words many policies share.

A rule that cannot read a value must say so: a :class:`Finding` records the object, the field, the value, why and
the fix, and a check that cannot judge an object reports one as a violation at its policy's level (fail closed),
never nothing. Values unknown during preview are not findings: they are judged at ``up``. A finding becomes text
only where it is reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from .props import show


@dataclass(frozen=True)
class Finding:
    """One offence as a record: turned into text only when it is reported."""

    subject: str
    """The object, e.g. ``kubernetes:apps/v1:DaemonSet 'gpu-system/x'``."""
    field: str
    """The field read, e.g. ``spec.template.spec.nodeSelector``."""
    problem: str
    """What is wrong, said after the field and its value."""
    fix: str
    """What to change."""
    value: Any = None
    shown: bool = False
    """Show ``value`` after the field."""
    urn: str | None = None

    def text(self) -> str:
        """The violation message: object, field (and value), problem, fix."""
        value = f" is {show(self.value)}," if self.shown else ""
        return f"{self.subject}: {self.field}{value} {self.problem}. {self.fix}."


CANNOT_JUDGE: Final = "so this policy cannot judge the object and refuses it (fail closed)"
"""Said by every finding of a value a check cannot read."""

READ_FIX: Final = (
    "Give the field a value of the type Kubernetes and the chart expect (plain, at most 64 levels deep), or remove "
    "it; then preview again"
)


def cannot_judge(subject: str, field: str, why: str, urn: str | None = None, fix: str = READ_FIX) -> Finding:
    """A finding for a value that a check cannot read: the object, the field and why."""
    return Finding(subject, field, f"{why}, {CANNOT_JUDGE}", fix, urn=urn)


def report_findings(findings: Iterable[Finding], report: Any, *, with_urn: bool = True) -> None:
    """Report each finding once, in a stable order (resource policies pass ``with_urn=False``)."""
    seen: set[str] = set()
    for finding in findings:
        message = finding.text()
        if message in seen:
            continue
        seen.add(message)
        report(message, finding.urn if with_urn else None)


PREVIEW_AGAIN: Final = "then run `pulumi preview --policy-pack policy` again"
"""The next command, said after the fix by the round-four messages: the preview that shows the fix took."""

LABELS_NOTE: Final = (
    "Labels are scheduling inputs, not a security boundary: also verify that no "
    "other plugin or Operator publishes the same physical GPUs."
)
"""Appended to every ownership and targeting message (the guide: "Choose one allocation owner per GPU")."""
