"""Where the Pulumi project is: the one answer every command, the engine, the review and the mocks use.

The project is a directory holding `Pulumi.yaml` (named `eks-hybrid-gpu`), `__main__.py`, `components/`,
`policy/` and `stacks/`. A command acts on, in order:

1. `--project DIR` (every command has it), which must hold such a `Pulumi.yaml`;
2. the first directory from the working directory upwards whose `Pulumi.yaml` names this project, as `pulumi`
   itself finds its project (a `Pulumi.yaml` of another project is passed over: its stacks are not ours);
3. the project this package ships (`SHIPPED`): `eks_hybrid_gpu/_project/` in an installed wheel, the checkout
   around the package in a source or editable install.

`components` and `policy` are imported from the chosen project, as `pulumi up` imports them from the program's
directory: `use` puts the project first on `sys.path` and the shipped copy after it, so a project that holds only
`Pulumi.yaml` and `stacks/` runs the shipped program. The wheel installs no top-level `components` or `policy`
package (names another distribution could own); see docs/packaging.md.

Tool files that are not the project's (the offline toolchain script and its versions) always come from `SHIPPED`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Final

PROJECT_FILE: Final = "Pulumi.yaml"
PROJECT_NAME: Final = "eks-hybrid-gpu"
"""The `name:` of our Pulumi.yaml (the config namespace, `policy.gpu_allocation.vocab.labels.PROJECT`)."""

_PACKAGE = Path(__file__).resolve().parent


class ProjectDirError(Exception):
    """`--project DIR` does not name a project of this program; the message says what DIR lacks."""


def names_this_project(directory: Path) -> bool:
    """True when `directory/Pulumi.yaml` exists and its top-level `name:` is this project's."""
    manifest = directory / PROJECT_FILE
    try:
        if not manifest.is_file():
            return False
        lines = manifest.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):  # a name too long, a folder not readable: no project of ours
        return False
    # A line read, not a YAML parse: this module runs before any third-party import is set up.
    names = [line.split(":", 1)[1].split("#", 1)[0].strip().strip("'\"") for line in lines if line.startswith("name:")]
    return names == [PROJECT_NAME]


def _shipped() -> Path:
    bundled = _PACKAGE / "_project"
    return bundled if (bundled / PROJECT_FILE).is_file() else _PACKAGE.parent


SHIPPED: Final = _shipped()
"""The project this package ships: its own program, pack, example stacks and toolchain script."""


def search_upwards(start: Path) -> Path | None:
    """The first directory from `start` upwards whose Pulumi.yaml names this project; None if there is none."""
    start = start.resolve()
    return next((d for d in (start, *start.parents) if names_this_project(d)), None)


def locate(explicit: Path | None = None, cwd: Path | None = None) -> Path:
    """`explicit` (checked), else the search upwards from `cwd` (default: the working directory), else SHIPPED."""
    if explicit is not None:
        try:
            directory = explicit.expanduser().resolve()
            holds = (directory / PROJECT_FILE).is_file()
        except (OSError, RuntimeError, ValueError):  # too long a name, a link loop, a NUL byte
            directory, holds = explicit, False
        if not names_this_project(directory):
            what = "is another Pulumi project" if holds else "holds no Pulumi.yaml"
            shown = (
                str(explicit)
                if str(explicit).isprintable() and len(str(explicit)) <= 200
                else ascii(str(explicit)[:200])
            )
            msg = f"--project {shown} {what}; name the folder whose Pulumi.yaml says `name: {PROJECT_NAME}`"
            raise ProjectDirError(msg)
        return directory
    return search_upwards(cwd or Path.cwd()) or SHIPPED


_chosen: Path | None = None


def use(project: Path) -> Path:
    """Make `project` this process's project (`chosen` does it for one CLI command, before importing it).

    Its directory goes first on `sys.path`, then SHIPPED, so `components` and `policy` resolve to the
    project's own code and, where it has none, to the shipped program.
    """
    global _chosen
    _chosen = project
    for entry in reversed(dict.fromkeys([str(project), str(SHIPPED)])):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    return project


@contextmanager
def chosen(project: Path) -> Iterator[Path]:
    """`use(project)` for one command: `current()` answers `project` until the command returns.

    The choice is undone afterwards (a test or a library that runs several commands in one process gets no
    leftover); the `sys.path` entries stay, because the modules imported through them stay imported.
    """
    global _chosen
    before = _chosen
    use(project)
    try:
        yield project
    finally:
        _chosen = before


def importable_from_elsewhere() -> None:
    """`use(locate())` unless `policy` already imports (the host check's zipapp, a run from the checkout's root).

    For the entry points that do not start in `cli.main`: `python -m eks_hybrid_gpu.hostcheck` on a host.
    """
    from importlib.util import find_spec

    if find_spec("policy") is None:
        use(locate())


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a `python -m eks_hybrid_gpu.…` child: PYTHONPATH led by the project, then SHIPPED."""
    env = dict(os.environ if environ is None else environ)
    entries = [str(current()), str(SHIPPED), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(entries))
    return env


def current() -> Path:
    """The project the command acts on: the one `use` chose, else what `locate()` finds."""
    return _chosen if _chosen is not None else locate()


def of(explicit: Path | None) -> Path:
    """The project of a command: its `--project` (`explicit`), else what `current()` says."""
    return locate(explicit) if explicit is not None else current()


def stack_file(name: str, project: Path | None = None) -> Path:
    """`stacks/Pulumi.<name>.yaml` of the project."""
    # Imported here: this module runs before the chosen project (which holds the vocabulary) is on sys.path.
    from policy.gpu_allocation.vocab.stack_files import stack_file_name

    return (project or current()) / stack_file_name(name)


def stack_names(project: Path | None = None) -> list[str]:
    """The stacks of the project's `stacks/Pulumi.<name>.yaml` files, sorted: what a refusal of --stack offers."""
    found = ((project or current()) / "stacks").glob("Pulumi.*.yaml")
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in found)


def policy_pack(project: Path | None = None) -> Path:
    """The pack's executable entry point: the project's own `policy/analyzer`, else the shipped one."""
    own = (project or current()) / "policy" / "analyzer"
    return own if own.is_file() else SHIPPED / "policy" / "analyzer"


def shared_charts(project: Path | None = None) -> Path:
    """`../shared/charts` beside the project: the team's chart mirror next to a checkout."""
    return (project or current()).parent / "shared" / "charts"


def tool_file(relative: str) -> Path:
    """A file of the CLI's own tooling (e.g. `scripts/toolchain.sh`), always from SHIPPED."""
    return SHIPPED / relative
