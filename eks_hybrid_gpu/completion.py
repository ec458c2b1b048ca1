"""`eks-hybrid-gpu completion bash|zsh|fish`: the shell completion script, generated from the argparse parser.

The words come from the same parser `main` parses with (every command's `add_arguments`), so a new flag or command
completes without anyone editing a script. No dependency: bash reads `complete -F`, zsh the same through its
`bashcompinit`, fish its own `complete -c` lines. Load it as kubectl's: `source <(eks-hybrid-gpu completion bash)`.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from eks_hybrid_gpu.cli import parser as command_line
from eks_hybrid_gpu.cli import run_command

PROG: Final = "eks-hybrid-gpu"
SHELLS: Final = ("bash", "zsh", "fish")


@dataclass(frozen=True)
class Flag:
    """One option: its spellings, whether it takes a value, the values it allows, its help."""

    spellings: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...]
    help: str


@dataclass(frozen=True)
class Level:
    """One (sub)command of the line: the words that lead to it, its subcommands with their help, its flags."""

    path: tuple[str, ...]
    commands: dict[str, str]
    flags: tuple[Flag, ...]
    values: tuple[str, ...] = ()
    """The values a positional argument allows (`completion SHELL`)."""


def levels(root: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Level]:
    """Every (sub)command of `root`, depth first, as completion sees it."""
    commands: dict[str, str] = {}
    children: list[tuple[str, argparse.ArgumentParser]] = []
    flags: list[Flag] = []
    values: list[str] = []
    for action in root._actions:  # argparse's own record of what it parses: the only door to it
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                commands[name] = helps.get(name, "")
                children.append((name, child))
        elif action.option_strings and action.help != argparse.SUPPRESS:
            choices = tuple(str(c) for c in action.choices) if action.choices else ()
            flags.append(Flag(tuple(action.option_strings), action.nargs != 0, choices, action.help or ""))
        elif not action.option_strings and action.choices:
            values += [str(c) for c in action.choices]
    yield Level(path, commands, tuple(flags), tuple(values))
    for name, child in children:
        yield from levels(child, (*path, name))


def _words(items: Sequence[str]) -> str:
    return shlex.quote(" ".join(items))


def bash(all_levels: Sequence[Level]) -> str:
    """A `complete -F` function: subcommands, then the flags of the command typed so far and their values."""
    paths = [" ".join(level.path) for level in all_levels if level.path]
    known = "|".join(shlex.quote(f" {p}") for p in paths)
    lines = [
        f"# {PROG} completion for bash (and zsh through bashcompinit): source <({PROG} completion bash)",
        "_eks_hybrid_gpu() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" path="" i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "$path ${COMP_WORDS[i]}" in',
        f'            {known}) path="$path ${{COMP_WORDS[i]}}" ;;',
        "        esac",
        "    done",
        '    local words="" flags=""',
        '    case "$path" in',
    ]
    for level in all_levels:
        key = shlex.quote(" " + " ".join(level.path)) if level.path else '""'
        lines.append(f"        {key})")
        for flag in level.flags:
            if not flag.takes_value:
                continue
            spellings = "|".join(flag.spellings)
            if flag.choices:
                reply = f'COMPREPLY=($(compgen -W {_words(flag.choices)} -- "$cur"))'
            else:
                reply = 'COMPREPLY=($(compgen -f -- "$cur"))'
            lines.append(f'            case "$prev" in {spellings}) {reply}; return ;; esac')
        lines.append(f"            words={_words([*level.commands, *level.values])}")
        lines.append(f"            flags={_words([s for flag in level.flags for s in flag.spellings])}")
        lines.append("            ;;")
    lines += [
        "    esac",
        '    if [[ "$cur" == -* ]]; then',
        '        COMPREPLY=($(compgen -W "$flags" -- "$cur"))',
        "    else",
        '        COMPREPLY=($(compgen -W "$words" -- "$cur"))',
        "    fi",
        "}",
        f"complete -o default -F _eks_hybrid_gpu {PROG}",
    ]
    return "\n".join(lines) + "\n"


def zsh(all_levels: Sequence[Level]) -> str:
    """The bash function through zsh's bashcompinit: one generator, the same words in both shells."""
    head = f"#compdef {PROG}\n# {PROG} completion for zsh: source <({PROG} completion zsh)\n"
    return head + "autoload -U +X bashcompinit && bashcompinit\n" + bash(all_levels)


def _fish_text(text: str) -> str:
    return shlex.quote(" ".join(text.split())[:80])


def fish(all_levels: Sequence[Level]) -> str:
    """`complete -c` lines, each guarded by the subcommands typed so far."""
    lines = [f"# {PROG} completion for fish: {PROG} completion fish | source", f"complete -c {PROG} -f"]
    for level in all_levels:
        if level.path:
            seen = "; and ".join(f"__fish_seen_subcommand_from {word}" for word in level.path)
        else:
            seen = "__fish_use_subcommand"
        below = f"{seen}; and not __fish_seen_subcommand_from {' '.join(level.commands)}" if level.commands else seen
        guard = below if level.path else seen
        for name, summary in level.commands.items():
            lines.append(f"complete -c {PROG} -n {shlex.quote(guard)} -a {name} -d {_fish_text(summary)}")
        if level.values:
            lines.append(f"complete -c {PROG} -n {shlex.quote(guard)} -a {_words(level.values)}")
        for flag in level.flags:
            spelled = " ".join(
                f"-l {s[2:]}" if s.startswith("--") else f"-s {s[1:]}" if len(s) == 2 else f"-o {s[1:]}"
                for s in flag.spellings
            )
            values = f" -x -a {_words(flag.choices)}" if flag.choices else " -r -F" if flag.takes_value else ""
            lines.append(f"complete -c {PROG} -n {shlex.quote(guard)} {spelled}{values} -d {_fish_text(flag.help)}")
    return "\n".join(lines) + "\n"


def script(shell: str) -> str:
    """The completion script of `shell` for the whole command line."""
    all_levels = list(levels(command_line(every=True)))
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](all_levels)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu completion SHELL`."""
    parser.add_argument("shell", choices=SHELLS, help="the shell whose script to print")


def main(argv: Sequence[str]) -> int:
    """`eks-hybrid-gpu completion ARGV...`."""
    return run_command("completion", argv)


def run(args: argparse.Namespace) -> int:
    """Print the script; 0."""
    print(script(args.shell), end="")
    return 0
