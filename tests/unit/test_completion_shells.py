"""Shell completion against the whole argparse tree, derived from it: no list of commands or flags is written here.

bash runs for real: the script is sourced, `complete -p` must show it registered, and every (sub)command's words,
flags and flag values are completed through COMP_WORDS as bash fills it. zsh and fish are not installed on this
machine (no package provides them): their scripts are checked as text, level by level, against the same tree.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from eks_hybrid_gpu import cli, completion

pytestmark = pytest.mark.unit

PROG = completion.PROG
LEVELS = list(completion.levels(cli.parser(every=True)))
MARK = "--8<--"


def _cases() -> list[tuple[list[str], list[str]]]:
    """(COMP_WORDS, what bash must offer) for every level's words, flags and each flag's values."""
    cases = []
    for level in LEVELS:
        words = [PROG, *level.path]
        cases.append(([*words, ""], [*level.commands, *level.values]))
        spellings = [s for flag in level.flags for s in flag.spellings]
        cases.append(([*words, "-"], spellings))
        for flag in level.flags:
            if flag.choices:
                cases.extend(([*words, spelling, ""], list(flag.choices)) for spelling in flag.spellings)
    return cases


def _bash(program: str) -> str:
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout


def test_sourcing_the_bash_script_registers_it() -> None:
    printed = shlex.join([sys.executable, "-m", "eks_hybrid_gpu", "completion", "bash"])
    assert _bash(f"complete -p {PROG} || echo none").strip() == "none"
    shown = _bash(f"source <({printed})\ncomplete -p {PROG}").strip()
    assert shown == f"complete -o default -F _eks_hybrid_gpu {PROG}"


def test_bash_completes_every_level_of_the_parser() -> None:
    cases = _cases()
    assert len(cases) > 2 * len(LEVELS)  # every level's words and flags, and the flags' values
    program = [completion.script("bash")]
    for words, _ in cases:
        quoted = " ".join(shlex.quote(w) for w in words)
        program.append(
            f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; COMPREPLY=(); _eks_hybrid_gpu; "
            f'printf "%s\\n" "${{COMPREPLY[@]}}"; echo {shlex.quote(MARK)}'
        )
    replies = _bash("\n".join(program)).split(MARK + "\n")[:-1]
    assert len(replies) == len(cases)
    wrong = [
        (words, reply.split(), expected)
        for (words, expected), reply in zip(cases, replies, strict=True)
        if reply.split() != expected
    ]
    assert wrong == []


def test_the_zsh_script_is_the_bash_function_through_bashcompinit() -> None:
    script = completion.script("zsh")
    assert script.startswith(f"#compdef {PROG}\n")
    assert "autoload -U +X bashcompinit && bashcompinit\n" in script
    assert script.endswith(completion.script("bash"))  # every level's words: the bash test above covers them


def _fish_lines(guard_words: tuple[str, ...]) -> list[str]:
    """The `complete` lines of the fish script whose condition is the one of the level at `guard_words`."""
    found = []
    for line in completion.script("fish").splitlines():
        parts = shlex.split(line)
        if "-n" not in parts:
            continue
        condition = parts[parts.index("-n") + 1]
        seen = [c.split()[-1] for c in condition.split("; and ") if c.startswith("__fish_seen_subcommand_from")]
        if tuple(seen) == guard_words or (not guard_words and condition == "__fish_use_subcommand"):
            found.append(line)
    return found


@pytest.mark.parametrize("level", LEVELS, ids=lambda level: " ".join(level.path) or "(top)")
def test_the_fish_script_offers_each_levels_commands_flags_and_values_under_its_condition(
    level: completion.Level,
) -> None:
    lines = [shlex.split(line) for line in _fish_lines(level.path)]
    offered = {parts[parts.index("-a") + 1] for parts in lines if "-a" in parts}
    assert set(level.commands) <= offered
    if level.values:
        assert " ".join(level.values) in offered
    for flag in level.flags:
        spelled = [
            ("-l", s[2:]) if s.startswith("--") else ("-s", s[1:]) if len(s) == 2 else ("-o", s[1:])
            for s in flag.spellings
        ]
        matching = [parts for parts in lines if all(_has(parts, pair) for pair in spelled)]
        assert len(matching) == 1, (level.path, flag.spellings)
        if flag.choices:
            parts = matching[0]
            assert parts[parts.index("-a") + 1].split() == list(flag.choices)


def _has(parts: list[str], pair: tuple[str, str]) -> bool:
    return any(parts[i : i + 2] == list(pair) for i in range(len(parts) - 1))
