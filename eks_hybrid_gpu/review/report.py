"""What a reviewer reads: the unified diff of two review trees and the Markdown summary."""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from cluster.judge.owner_change import owner_changes, unsupported
from cluster.records.migration import Migration, steps
from eks_hybrid_gpu.review.render import PolicyResult, Render
from policy.gpu_allocation.vocab.labels import GPU_OPERATOR

MAX_INLINE_DIFF_LINES = 300
"""Diff lines shown inline in summary.md; the whole diff is review.diff in the artifact."""
MAX_SUMMARY_CHARS = 60_000
"""GitHub refuses comments over 65,536 characters; past this the inline diff is left out."""
OPERATOR_OPT_OUT = "nvidia.com/gpu.deploy.operands=false"


@dataclass(frozen=True)
class Change:
    """One object that differs between base and head."""

    path: str
    status: str
    """added, changed or removed."""
    added_lines: int
    removed_lines: int

    @property
    def kind(self) -> str:
        """The object's kind (the tree's first level)."""
        return self.path.split("/", 1)[0]


def _lines(text: str | None) -> list[str]:
    return text.splitlines(keepends=True) if text is not None else []


def _file_diff(path: str, base: str | None, head: str | None) -> list[str]:
    return list(
        difflib.unified_diff(
            _lines(base),
            _lines(head),
            fromfile=f"a/{path}" if base is not None else "/dev/null",
            tofile=f"b/{path}" if head is not None else "/dev/null",
        )
    )


def compare(base: Mapping[str, str], head: Mapping[str, str]) -> list[Change]:
    """Every added, changed and removed object, in path order."""
    changes = []
    for path in sorted(set(base) | set(head)):
        before, after = base.get(path), head.get(path)
        if before == after:
            continue
        status = "added" if before is None else "removed" if after is None else "changed"
        body = _file_diff(path, before, after)[2:]
        plus = sum(1 for line in body if line.startswith("+"))
        minus = sum(1 for line in body if line.startswith("-"))
        changes.append(Change(path, status, plus, minus))
    return changes


def unified_diff(base: Mapping[str, str], head: Mapping[str, str]) -> str:
    """`diff -ruN`-style text of the two trees (a/ = base, b/ = head)."""
    out: list[str] = []
    for path in sorted(set(base) | set(head)):
        if base.get(path) != head.get(path):
            out.extend(_file_diff(path, base.get(path), head.get(path)))
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def kind_counts(base: Mapping[str, str], head: Mapping[str, str], changes: Sequence[Change]) -> list[dict[str, Any]]:
    """Per kind: added, changed, removed, unchanged."""
    by_kind: dict[str, Counter[str]] = {}
    for change in changes:
        by_kind.setdefault(change.kind, Counter())[change.status] += 1
    for path in set(base) & set(head):
        if base[path] == head[path]:
            by_kind.setdefault(path.split("/", 1)[0], Counter())["unchanged"] += 1
    return [
        {"kind": kind, **{s: counts[s] for s in ("added", "changed", "removed", "unchanged")}}
        for kind, counts in sorted(by_kind.items())
    ]


# ---------------------------------------------------------------- Markdown


def _cell(value: object) -> str:
    text = " ".join(str(value).split())
    return text.replace("|", "\\|") if text else " "


def _code(value: object) -> str:
    text = str(value)
    return f"`{text}`" if text else " "


def _selector(selector: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _show(value: object) -> str:
    return _selector(value) if isinstance(value, Mapping) else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None) -> list[str]:
    align = align or ["---"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def ownership_rows(ownership: Mapping[str, Any] | None) -> list[list[str]]:
    """Table rows of an ownership map: cohort, owner, sharing, namespace, node selector, host driver verified."""
    rows = []
    for name, entry in sorted(((ownership or {}).get("cohorts") or {}).items()):
        rows.append(
            [
                _code(name),
                _code(entry.get("owner", "")),
                _cell(entry.get("sharing", "")),
                _code(entry.get("namespace", "")),
                _code(_selector(entry.get("nodeSelector") or {})),
                "yes" if entry.get("hostDriverVerified") else "no",
            ]
        )
    return rows


def ownership_changes(base: Mapping[str, Any] | None, head: Mapping[str, Any] | None) -> list[str]:
    """One sentence per cohort whose entry differs, and the Operator mode when it changes."""
    before = (base or {}).get("cohorts") or {}
    after = (head or {}).get("cohorts") or {}
    lines = []
    for name in sorted(set(before) | set(after)):
        if name not in before:
            lines.append(f"cohort `{name}` added, owner `{after[name].get('owner')}`")
        elif name not in after:
            lines.append(f"cohort `{name}` removed (was owner `{before[name].get('owner')}`)")
        else:
            for key in ("owner", "sharing", "namespace", "nodeSelector", "hostDriverVerified"):
                old, new = before[name].get(key), after[name].get(key)
                if old != new:
                    lines.append(f"cohort `{name}`: {key} `{_show(old)}` → `{_show(new)}`")
    old_mode, new_mode = (base or {}).get("operatorMode"), (head or {}).get("operatorMode")
    if old_mode != new_mode:
        lines.append(f"GPU Operator mode `{old_mode or 'none'}` → `{new_mode or 'none'}`")
    return lines


def owner_migrations(base: Mapping[str, Any] | None, head: Mapping[str, Any] | None, stack: str) -> list[str]:
    """Markdown for each cohort whose owner the head changes: the phases `migrate` runs, or the documented path.

    The preview refuses such a change made in one `pulumi up` (two allocators for the length of the update), so
    the diff below is where the migration ends, not what one update does.
    """
    before = (base or {}).get("cohorts") or {}
    after = (head or {}).get("cohorts") or {}
    out: list[str] = []
    for name in sorted(set(before) & set(after)):
        old, new = str(before[name].get("owner")), str(after[name].get("owner"))
        old_mode, new_mode = (base or {}).get("operatorMode"), (head or {}).get("operatorMode")
        if not owner_changes(old, old_mode, new, new_mode):
            continue
        why_not = unsupported(old, old_mode, new, new_mode)
        if why_not is not None:
            out += [f"- cohort `{name}`: `{old}` → `{new}` is not supported in place: {why_not}", ""]
            continue
        hosts = before[name].get("nodeSelector") or {}
        command = f"eks-hybrid-gpu migrate --stack {stack} --cohort {name} --to {new}"
        out += [
            f"- cohort `{name}`: owner `{old}` → `{new}` on the hosts `{_selector(hosts)}`. A plain `pulumi up` "
            f"of this change is refused at preview; after merging, run `{command}` (add `--drain` to evict the pods "
            "holding its GPUs), which runs:",
            "",
        ]
        planned = Migration(name, old, new, "cordon", hosts, ("the cohort's nodes",), ("the cohort's nodes",))
        out += [f"  {line}" for line in steps(planned)]
        out.append("")
    return out


def _mermaid_id(prefix: str, name: str) -> str:
    return prefix + "_" + re.sub(r"[^A-Za-z0-9]", "_", name)


def _label(*lines: str) -> str:
    return '"' + "<br/>".join(line.replace('"', "#quot;") for line in lines) + '"'


def mermaid(ownership: Mapping[str, Any] | None) -> str:
    """A flowchart: node selector → cohort → owner, for every cohort of the head render."""
    lines = ["flowchart LR"]
    cohorts = sorted(((ownership or {}).get("cohorts") or {}).items())
    if not cohorts:
        lines.append('  empty["no cohorts: the stack renders no GPU owner"]')
        return "\n".join(lines)
    mode = (ownership or {}).get("operatorMode")
    for name, entry in cohorts:
        selector, cohort, owner = _mermaid_id("sel", name), _mermaid_id("cohort", name), _mermaid_id("owner", name)
        selector_lines = [f"{k}={v}" for k, v in sorted((entry.get("nodeSelector") or {}).items())]
        lines.append(f"  {selector}[/{_label('node selector', *selector_lines)}/]")
        lines.append(f"  {cohort}([{_label('cohort ' + name, 'sharing: ' + str(entry.get('sharing', '')))}])")
        owner_lines = [str(entry.get("owner", "")), "namespace " + str(entry.get("namespace", ""))]
        if entry.get("owner") == GPU_OPERATOR:
            owner_lines += [f"mode {mode or 'cluster-policy'}", f"cluster-wide: other nodes need {OPERATOR_OPT_OUT}"]
        lines.append(f"  {owner}[[{_label(*owner_lines)}]]")
        lines.append(f"  {selector} --> {cohort} --> {owner}")
    return "\n".join(lines)


def ledger_problems(review: Review) -> list[str]:
    """Why the base's or the head's ledger cannot be read, each prefixed with its side; [] when both can."""
    sides = (("base", review.base.ledger_problem), ("head", review.head.ledger_problem))
    return [f"{side}: {problem}" for side, problem in sides if problem is not None]


@dataclass(frozen=True)
class Review:
    """Everything the review found, as written to result.json."""

    stack: str
    base_label: str
    head_label: str
    base: Render
    head: Render
    changes: tuple[Change, ...]
    diff: str

    @property
    def mandatory_failures(self) -> list[PolicyResult]:
        """Violations of mandatory policies on the head render."""
        return [p for p in self.head.policy if p.level == "mandatory"]

    @property
    def exit_code(self) -> int:
        """1 when a mandatory policy fails, else 0."""
        return 1 if self.mandatory_failures else 0

    def as_json(self) -> dict[str, Any]:
        """Machine-readable result (no secrets: it holds only redacted data)."""
        return {
            "stack": self.stack,
            "base": {"label": self.base_label, "exists": self.base.exists, "objects": len(self.base.tree)},
            "head": {"label": self.head_label, "exists": self.head.exists, "objects": len(self.head.tree)},
            "changes": [asdict(c) for c in self.changes],
            "byKind": kind_counts(self.base.tree, self.head.tree, self.changes),
            "ownership": {"base": self.base.ownership, "head": self.head.ownership},
            "ownershipChanges": ownership_changes(self.base.ownership, self.head.ownership),
            "ledgerProblems": {"base": self.base.ledger_problem, "head": self.head.ledger_problem},
            "policy": [asdict(p) for p in self.head.policy],
            "mandatoryFailures": len(self.mandatory_failures),
            "exitCode": self.exit_code,
        }


def summary(review: Review, policy_names: Sequence[str]) -> str:
    """The Markdown summary posted on the pull request."""
    counts = Counter(c.status for c in review.changes)
    failures = review.mandatory_failures
    advisories = [p for p in review.head.policy if p.level != "mandatory"]
    out = [f"## GPU allocation review: stack `{review.stack}`", ""]
    base_note = "" if review.base.exists else " (the stack does not exist there: everything is new)"
    out.append(
        f"Base: {review.base_label}{base_note} · head: {review.head_label} · "
        f"{len(review.head.tree)} objects rendered (base {len(review.base.tree)})"
    )
    out += [f"\n_{note}_" for note in review.base.notes]
    out.append("")
    verdict = (
        f"❌ **{len(failures)} mandatory policy violation(s)**: this change must not be applied"
        if failures
        else "✅ no mandatory policy violation"
    )
    out.append(f"{verdict} · {len(advisories)} advisory")
    out.append(
        f"**{counts['added']} added, {counts['changed']} changed, {counts['removed']} removed** "
        f"({len(review.head.tree) - counts['added'] - counts['changed']} unchanged)"
    )

    unread = ledger_problems(review)
    migrations = owner_migrations(review.base.ownership, review.head.ownership, review.stack)
    if unread:
        out += ["", "### Owner migrations", ""]
        out.append("Cannot tell whether this change moves a cohort to another owner, since a ledger cannot be read:")
        out += ["", *(f"- {problem}" for problem in unread)]
    elif migrations:
        out += ["", "### Owner migrations", ""]
        out.append("This change moves a cohort to another owner; the objects below are where the migration ends.")
        out += ["", *migrations]

    out += ["", "### Objects by kind", ""]
    statuses = ("added", "changed", "removed", "unchanged")
    counted = kind_counts(review.base.tree, review.head.tree, review.changes)
    moved = [r for r in counted if r["added"] or r["changed"] or r["removed"]]
    rows = [[_cell(r["kind"]), *(str(r[s]) for s in statuses)] for r in moved]
    quiet = [r for r in counted if r not in moved]
    if quiet:
        names = ", ".join(r["kind"] for r in quiet)
        rows.append([f"unchanged kinds: {names}", "0", "0", "0", str(sum(r["unchanged"] for r in quiet))])
    rows.append(["**total**", *(f"**{sum(r[s] for r in counted)}**" for s in statuses)])
    out += _table(["kind", *statuses], rows, ["---", "--:", "--:", "--:", "--:"])
    if review.changes:
        out += ["", "### Changed objects", ""]
        out += _table(
            ["object", "change", "lines"],
            [[_code(c.path), c.status, f"+{c.added_lines} −{c.removed_lines}"] for c in review.changes],
            ["---", "---", "--:"],
        )

    out += ["", "### Cohort → owner", ""]
    header = ["cohort", "owner", "sharing", "namespace", "node selector", "host driver verified"]
    sides = [(f"Before ({review.base_label})", review.base), (f"After ({review.head_label})", review.head)]
    if review.base.exists and review.base.ownership == review.head.ownership and not unread:
        sides = [("Before and after (unchanged)", review.head)]
    for title, side in sides:
        out += [f"**{title}**", ""]
        rows = ownership_rows(side.ownership)
        if side.ledger_problem is not None:
            out.append(f"**The ledger cannot be read:** {side.ledger_problem}")
        elif rows:
            out += _table(header, rows)
            out.append(f"\nGPU Operator: `{(side.ownership or {}).get('operatorMode') or 'none'}`")
        else:
            out.append("_no ledger: the stack does not exist here_" if not side.exists else "_no cohorts_")
        out.append("")
    changed_owners = ownership_changes(review.base.ownership, review.head.ownership)
    if unread:
        out.append("Ownership changes: cannot tell (a ledger cannot be read, see above)")
    else:
        out.append("Ownership changes:" + ("" if changed_owners else " none"))
        out += [f"- {line}" for line in changed_owners]

    out += ["", "### Policy results (head render)", ""]
    if review.head.policy:
        out += _table(
            ["level", "policy", "object", "message"],
            [[p.level, _code(p.policy), _cell(p.object), _cell(p.message)] for p in review.head.policy],
        )
        out.append("")
    violated = {p.policy for p in review.head.policy}
    passed = [name for name in policy_names if name not in violated]
    out.append(f"No violation: {', '.join(f'`{n}`' for n in passed) or 'none'}.")
    out += [f"\n_{note}_" for note in review.head.notes]

    out += ["", "### Cohorts, owners and node selectors (head)", ""]
    if review.head.ledger_problem is not None:
        out.append(f"**The ledger cannot be read:** {review.head.ledger_problem}")
    else:
        out += ["```mermaid", mermaid(review.head.ownership), "```"]

    text = "\n".join(out) + "\n"
    if review.diff:
        diff_lines = review.diff.splitlines()
        shown = "\n".join(diff_lines[:MAX_INLINE_DIFF_LINES])
        more = len(diff_lines) - MAX_INLINE_DIFF_LINES
        tail = f"\n_{more} more line(s) in `review.diff` of the artifact._\n" if more > 0 else ""
        block = (
            f"\n<details><summary>Rendered diff ({len(diff_lines)} lines)</summary>\n\n"
            f"```diff\n{shown}\n```\n{tail}\n</details>\n"
        )
        if len(text) + len(block) <= MAX_SUMMARY_CHARS:
            text += block
        else:
            text += "\n_The rendered diff is too long for a comment: see `review.diff` in the artifact._\n"
    return text


def result_json(review: Review) -> str:
    """result.json's text."""
    return json.dumps(review.as_json(), indent=2, sort_keys=True) + "\n"
