"""The repository's stack files: their config read without the engine, and a cohort's new owner written back.

`local`, `simulate fleet` and `migrate` read `stacks/Pulumi.<name>.yaml` here (project prefix removed, the model
checked) rather than through a Pulumi stack, so they work before the engine has ever run.

`migrate` ends by making the repository agree with the cluster, by a text edit, so the file's comments and layout
stay as they were. The edit changes the cohort's `owner:` line and, when the cohort used the default selector
(which is derived from the owner), pins the hosts' selector under it. The result is read back and checked;
whatever cannot be edited safely is returned as the exact edit to make.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from components.config import StackConfig
from components.stack_loader import load_stack_config
from eks_hybrid_gpu import projectdir
from policy.gpu_allocation.vocab.labels import PROJECT
from policy.gpu_allocation.vocab.stack_files import stack_file_name

_ITEM = re.compile(r"^(?P<indent>\s*)-\s+(?P<rest>.*)$")
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]*")


def raw_config(document: Mapping[str, Any]) -> dict[str, Any]:
    """A parsed stack file's config values of this project, keys without the `eks-hybrid-gpu:` prefix."""
    prefix = f"{PROJECT}:"
    return {k.removeprefix(prefix): v for k, v in (document.get("config") or {}).items() if k.startswith(prefix)}


def stack_config(stack_name: str, project_dir: Path | None = None) -> StackConfig:
    """The validated config of `stacks/Pulumi.<stack_name>.yaml` of the project (default: the command's)."""
    project_dir = project_dir or projectdir.current()
    stack_file = stack_file_name(stack_name)
    document = yaml.safe_load((project_dir / stack_file).read_text()) or {}
    return load_stack_config(raw_config(document), project_dir, stack_file=stack_file)


def _scalar(value: str) -> str:
    return (
        value if _PLAIN.fullmatch(value) and value not in ("true", "false", "null", "yes", "no") else json.dumps(value)
    )


def _cohort_of(document: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    cohorts = (document.get("config") or {}).get(f"{PROJECT}:cohorts")
    for entry in cohorts if isinstance(cohorts, list) else []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return entry
    return None


def wanted_edit(cohort: str, owner: str, selector: Mapping[str, str]) -> str:
    """The edit in words, for a person to make by hand."""
    pinned = ", ".join(f"{k}: {v}" for k, v in sorted(selector.items()))
    return f"in {PROJECT}:cohorts, the cohort named {cohort}: set `owner: {owner}` and `nodeSelector: {{{pinned}}}`"


def _block_end(lines: list[str], start: int, end: int, indent: int) -> int:
    """The line after a mapping key's value: its own line, then the lines indented deeper than the entry's keys."""
    j = start + 1
    while j < end and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
        j += 1
    return j


def edited(text: str, cohort: str, owner: str, selector: Mapping[str, str]) -> str | None:
    """The stack file's text with the cohort's owner (and, if absent, its selector) set; None when not safely found."""
    lines = text.splitlines(keepends=True)
    start = None
    for i, line in enumerate(lines):
        match = _ITEM.match(line)
        if match is None:
            continue
        end = next(
            (
                j
                for j in range(i + 1, len(lines))
                if lines[j].strip()
                and len(lines[j]) - len(lines[j].lstrip()) <= len(match["indent"])
                and not lines[j].lstrip().startswith("#")
            ),
            len(lines),
        )
        block = "".join(lines[i:end])
        if re.search(rf"(^|\n)\s*-?\s*name:\s*['\"]?{re.escape(cohort)}['\"]?\s*(#.*)?\n", block + "\n"):
            start = (i, end, len(match["indent"]) + 2)
            break
    if start is None:
        return None
    first, end, indent = start
    owner_line = None
    selector_lines: tuple[int, int] | None = None
    for j in range(first, end):
        body = lines[j][indent:] if j > first else lines[j].lstrip()[2:]
        if re.match(r"owner:\s*", body):
            owner_line = j
        if re.match(r"nodeSelector:", body):
            selector_lines = (j, _block_end(lines, j, end, indent))
    if owner_line is None:
        return None
    lines[owner_line] = re.sub(r"owner:\s*[^#\n]*?(\s*(#.*)?)$", rf"owner: {owner}\1", lines[owner_line].rstrip("\n"))
    lines[owner_line] += "\n"
    pad = " " * indent
    pinned = [f"{pad}nodeSelector:\n"] + [f"{pad}  {k}: {_scalar(v)}\n" for k, v in sorted(selector.items())]
    if selector_lines is None:
        lines[owner_line + 1 : owner_line + 1] = pinned
    elif dict((_cohort_of(yaml.safe_load(text) or {}, cohort) or {}).get("nodeSelector") or {}) != dict(selector):
        # The hosts' selector changed (a move one node at a time relabels them): the whole mapping is replaced.
        selector_first, selector_end = selector_lines
        if selector_first == first:
            return None  # `- nodeSelector:` opens the entry: not an edit this makes safely
        lines[selector_first:selector_end] = pinned
    result = "".join(lines)
    try:
        entry = _cohort_of(yaml.safe_load(result) or {}, cohort)
    except yaml.YAMLError:
        return None
    if entry is None or entry.get("owner") != owner or dict(entry.get("nodeSelector") or {}) != dict(selector):
        return None
    return result


def write_owner(path: Path, cohort: str, owner: str, selector: Mapping[str, str]) -> str | None:
    """Edit the stack file in place; None when done (or already so), else the edit a person must make."""
    text = path.read_text()
    entry = _cohort_of(yaml.safe_load(text) or {}, cohort)
    if entry is not None and entry.get("owner") == owner and dict(entry.get("nodeSelector") or {}) == dict(selector):
        return None
    result = edited(text, cohort, owner, selector)
    if result is None:
        return wanted_edit(cohort, owner, selector)
    path.write_text(result)
    return None
