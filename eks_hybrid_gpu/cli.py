"""`eks-hybrid-gpu`: one argparse command line with a subcommand per tool.

Each command module defines `add_arguments(parser)` and `run(args) -> int`. Only the chosen command's module is
imported (the host check runs on GPU hosts with the standard library alone; `local` and `review` load the
Pulumi engine), so the top-level help lists the commands from the table below without importing them.

Every command takes `--project DIR` (anywhere on the line); `main` settles the project (eks_hybrid_gpu.projectdir)
before it imports the command, because the command modules import `components` and `policy` from the project.
The flags commands share (`SHARED_FLAGS`) are taken before the command too, as kubectl and pulumi take them:
`eks-hybrid-gpu --kubeconfig X inspect` is `eks-hybrid-gpu inspect --kubeconfig X`.

Ctrl-C (SIGINT) stops every command with one line and exit code 130, as a shell reports it; a command that has
more to say about where it stopped (`migrate`: the phase recorded in the cluster) says it in that line itself, and
one stopped inside its `pulumi up` (eks_hybrid_gpu.engine_interrupt) names it and the same command to run again.
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Final, NoReturn

from eks_hybrid_gpu import projectdir
from eks_hybrid_gpu.engine_interrupt import EngineInterrupted
from eks_hybrid_gpu.projectdir import ProjectDirError

COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "local": ("eks_hybrid_gpu.local", "run the main job on the local default (control plane, kwok nodes, pulumi up)"),
    "hostcheck": (
        "eks_hybrid_gpu.hostartifact",
        "check a GPU host before it joins a cohort (run on the host), or write it for one with --artifact PATH",
    ),
    "simulate": ("eks_hybrid_gpu.simulate.cli", "simulated GPU cohorts on the local cluster, to rehearse a change"),
    "inspect": ("eks_hybrid_gpu.inspection", "who owns and who really publishes each GPU node; DRA slices and claims"),
    "move-host": ("eks_hybrid_gpu.movehost", "move a GPU host between cohorts in order: cordon, drain, relabel, wait"),
    "migrate": ("eks_hybrid_gpu.migrate", "change a cohort's owner in order: remove, wait, install; never two at once"),
    "smoke": ("eks_hybrid_gpu.smoke", "smoke Job state, results captured before their TTL, claim release check"),
    "review": ("eks_hybrid_gpu.review", "render the stack at the working tree and at a git ref: tree, diff, summary"),
    "completion": ("eks_hybrid_gpu.completion", "print the shell completion script: bash, zsh or fish"),
}
"""Subcommand -> (module defining add_arguments and run, one-line help)."""


def version() -> str:
    """The installed distribution's version (what `pip show eks-hybrid-gpu` says)."""
    try:
        return metadata.version("eks-hybrid-gpu")
    except metadata.PackageNotFoundError:
        return "unknown (not installed: run scripts/bootstrap.sh or pip install .)"


USAGE_LINE_MAX: Final = 400
"""A usage error longer than this (an argument of megabytes echoed back) is cut."""


def _printable(text: str) -> str:
    """The text on one line: control and other unprintable characters escaped as Python escapes them."""
    escaped = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return escaped if len(escaped) <= USAGE_LINE_MAX else escaped[: USAGE_LINE_MAX - 3] + "..."


class Parser(argparse.ArgumentParser):
    """argparse whose usage error is one line — what is wrong, every echoed value escaped, where --help is — exit 2.

    argparse's own prints the whole usage block first, and echoes an unrecognized argument raw (a newline or a NUL
    byte in it reaches the terminal or the log as is).
    """

    def error(self, message: str) -> NoReturn:
        """Print the one line and exit 2, as argparse exits on a usage error."""
        self.exit(2, f"{self.prog}: {_printable(message)}; see `{self.prog} --help`\n")


PROJECT_HELP = (
    f"the Pulumi project (the folder of its {projectdir.PROJECT_FILE}; default: the first one from the working "
    "directory upwards, else the project this package ships)"
)


def _project_option(argv: Sequence[str]) -> tuple[Path | None, list[str]]:
    """`--project DIR` wherever it stands (also after a nested command such as `simulate fleet`), and the rest.

    It is read before the command's module, and so `components`, is imported.
    """
    early = Parser(prog="eks-hybrid-gpu", add_help=False, allow_abbrev=False)
    early.add_argument("--project", type=Path, metavar="DIR")
    known, rest = early.parse_known_args(argv)
    project: Path | None = known.project
    return project, rest


SHARED_FLAGS: Final[dict[str, bool]] = {
    "--kubeconfig": True,
    "--context": True,
    "--namespace": True,
    "-o": True,
    "--output": True,
    "--json": False,
    "--timeout": True,
    "--request-timeout": True,
    "--yes": False,
    "-y": False,
    "--dry-run": False,
}
"""The flags several commands share -> whether each takes a value: accepted before the command as after it."""


def _shared_flags_behind(argv: Sequence[str]) -> list[str]:
    """The line with the shared flags that stand before the command moved behind it (before a `--`, if any).

    Only `SHARED_FLAGS` move: the value a flag takes is known without importing the command, so `--context local
    inspect` reads `local` as the context. A command that has no such flag refuses it as argparse does (exit 2).
    """
    moved: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        flag, glued = token.split("=", 1)[0], "=" in token
        if token.startswith("-o") and not token.startswith("--") and len(token) > 2:  # -ojson
            flag, glued = "-o", True
        if flag not in SHARED_FLAGS:
            break
        width = 2 if SHARED_FLAGS[flag] and not glued else 1
        moved += argv[i : i + width]
        i += width
    rest = list(argv[i:])
    end = rest.index("--") if "--" in rest else len(rest)
    return [*rest[:end], *moved, *rest[end:]]


def parser(chosen: str | None = None, *, every: bool = False) -> argparse.ArgumentParser:
    """The command line; the arguments of `chosen` (the only module imported) are filled in, or of `every` command.

    `every` imports each command's module: for `completion`, which prints the whole line's words.
    """
    root = Parser(
        prog="eks-hybrid-gpu",
        description="One NVIDIA GPU allocation owner per node cohort on EKS Hybrid Nodes: the day-2 commands.",
        epilog=f"The shared flags ({', '.join(SHARED_FLAGS)}) may also stand before the command. "
        "Shell completion: eks-hybrid-gpu completion bash|zsh|fish.",
    )
    root.add_argument("--version", action="version", version=f"eks-hybrid-gpu {version()}")
    root.add_argument("--project", type=Path, metavar="DIR", help=PROJECT_HELP)
    sub = root.add_subparsers(dest="command", required=True, metavar="<command>")
    for name, (module, summary) in COMMANDS.items():
        command = sub.add_parser(name, help=summary, description=summary)
        command.add_argument("--project", type=Path, metavar="DIR", help=PROJECT_HELP)
        if every or name == chosen:
            importlib.import_module(module).add_arguments(command)
    return root


INTERRUPTED_EXIT_CODE: Final = 130
"""Exit code after Ctrl-C (SIGINT): 128 + 2, what a shell reports for a command SIGINT stopped."""


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, then run the chosen command; a usage error exits 2 and --help 0, as argparse does; Ctrl-C 130."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(args_list)
    except KeyboardInterrupt as stop:
        print(interrupted_line(args_list, stop), file=sys.stderr, flush=True)
        return INTERRUPTED_EXIT_CODE


def interrupted_line(args_list: Sequence[str], stop: KeyboardInterrupt) -> str:
    """The one line after Ctrl-C: the command; inside an engine run, what stopped and the same command to re-run."""
    named = next((a for a in args_list if a in COMMANDS), None)
    line = f"eks-hybrid-gpu{' ' + named if named else ''}: interrupted (Ctrl-C)"
    if not isinstance(stop, EngineInterrupted):
        return line
    again = shlex.join(["eks-hybrid-gpu", *args_list])
    if not stop.changes:
        return f"{line} during {stop.what}; nothing was changed: run `{again}` again to start over"
    return (
        f"{line} during {stop.what}; the engine stopped after the steps in flight and recorded them: run "
        f"`{again}` again to go on from there"
    )


def _main(argv: list[str]) -> int:
    try:
        project, args_list = _project_option(argv)
        args_list = _shared_flags_behind(args_list)
        located = projectdir.locate(project)
    except ProjectDirError as error:
        print(f"eks-hybrid-gpu: {error}", file=sys.stderr)
        return 2
    except SystemExit as stop:  # `--project` without a value
        return stop.code if isinstance(stop.code, int) else 2
    with projectdir.chosen(located):
        chosen = next((a for a in args_list[:1] if a in COMMANDS), None)
        try:
            args = parser(chosen).parse_args(args_list)
        except SystemExit as stop:
            return stop.code if isinstance(stop.code, int) else 2
        args.project = project
        code: int = importlib.import_module(COMMANDS[args.command][0]).run(args)
        return code


def run_command(name: str, argv: Sequence[str]) -> int:
    """`eks-hybrid-gpu NAME ARGV...`: what each command module's own `main(argv)` does."""
    return main([name, *argv])
