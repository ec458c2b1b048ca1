"""The base of a review: a read-only export of a git ref, laid out so its relative paths still resolve.

`git archive` (not `git worktree add`) so the repository's own metadata is never touched: other people may be
working in the same checkout. The export gets the repository's directory name, and every sibling of the
repository is linked next to it, so a stack's `../shared/charts/…` archive resolves to the same file.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path


class GitRefError(RuntimeError):
    """The base ref cannot be read."""


@dataclass(frozen=True)
class BaseCheckout:
    """An exported ref."""

    ref: str
    commit: str
    project_dir: Path

    @property
    def label(self) -> str:
        """`ref` (short commit), for the summary."""
        return f"`{self.ref}` ({self.commit[:12]})"


def in_git(repo: Path) -> bool:
    """Whether `repo` lies in a git repository's working tree."""
    inside = subprocess.run(  # noqa: S603
        ["git", "-C", str(repo), "rev-parse", "--is-inside-work-tree"],  # noqa: S607
        check=False,
        capture_output=True,
        text=True,
    )
    return inside.returncode == 0 and inside.stdout.strip() == "true"


def resolve(repo: Path, ref: str) -> str:
    """The commit a ref names, or GitRefError saying how to make it available."""
    if not in_git(repo):
        msg = (
            f"{repo} is not in a git repository, and review compares the project with the git ref --base {ref}: "
            "run it in a git checkout of the project, or pass --project DIR of one"
        )
        raise GitRefError(msg)
    found = subprocess.run(  # noqa: S603
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],  # noqa: S607
        check=False,
        capture_output=True,
        text=True,
    )
    if found.returncode != 0 or not found.stdout.strip():
        msg = (
            f"the base ref '{ref}' is not a commit of {repo}; fetch it (e.g. `git fetch origin {ref}`) "
            "or name another one with --base"
        )
        raise GitRefError(msg)
    return found.stdout.strip()


def export(repo: Path, ref: str, destination: Path) -> BaseCheckout:
    """Export `ref` of `repo` to `destination/<repo name>` and link the repository's siblings beside it."""
    commit = resolve(repo, ref)
    archive = subprocess.run(  # noqa: S603
        ["git", "-C", str(repo), "archive", "--format=tar", commit],  # noqa: S607
        check=False,
        capture_output=True,
    )
    if archive.returncode != 0:
        msg = f"git archive of '{ref}' failed: {archive.stderr.decode(errors='replace').strip()}"
        raise GitRefError(msg)
    repo = repo.resolve()
    project_dir = destination / repo.name
    project_dir.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(project_dir, filter="data")
    for sibling in sorted(repo.parent.iterdir()):
        if sibling.name != repo.name:
            (destination / sibling.name).symlink_to(sibling.resolve())
    return BaseCheckout(ref, commit, project_dir)
