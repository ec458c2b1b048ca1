"""Refusals of a stack config: one line per problem with its config path and fix, capped, secrets redacted.

Pydantic's error types are translated into the project's own words here, so every refusal reads the same.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final, get_args

from pydantic import BaseModel, ValidationError

from cluster.findings import Problem, show
from components.config import StackConfig
from policy.gpu_allocation.vocab.labels import COMPUTE_TYPE_LABEL, DEFAULT_COHORT_LABEL_KEY, HYBRID, OWNERS

MAX_PER_KIND: Final = 10
"""Problems of one kind listed before the rest are summed up: 40 duplicate cohorts make 780 overlaps."""


def capped_lines(problems: list[Problem]) -> list[str]:
    """One line per problem, at most MAX_PER_KIND of each kind, then one line counting the rest."""
    counts = Counter(p.kind_key() for p in problems)
    shown: Counter[str] = Counter()
    lines: list[str] = []
    for problem in problems:
        key = problem.kind_key()
        shown[key] += 1
        if shown[key] <= MAX_PER_KIND:
            lines.append(f"  - {problem}")
        if shown[key] == MAX_PER_KIND and counts[key] > MAX_PER_KIND:
            lines.append(f"  - ...and {counts[key] - MAX_PER_KIND} more of the same kind")
    return lines


class StackConfigError(Exception):
    """The stack config is invalid; `problems` lists every problem found."""

    def __init__(self, problems: list[Problem], stack_file: str | None = None, subject: str | None = None) -> None:
        self.problems = problems
        where = f" in {stack_file}" if stack_file else ""
        if subject is None:
            head = f"The stack config{where} has {len(problems)} problem(s); nothing was changed:"
        else:
            head = f"{subject} do not fit the stack config{where}: {len(problems)} problem(s); nothing was changed:"
        super().__init__("\n".join([head, *capped_lines(problems)]))


_PLAIN_KEY: Final = re.compile(r"[A-Za-z0-9_./-]{1,253}", re.ASCII)


def _format_loc(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("none", "time-slicing", "mig", "[key]") or part.startswith("function-"):
            continue  # discriminator tags of the sharing union, pydantic's own markers
        elif not _PLAIN_KEY.fullmatch(part):
            out += f"[{show(part)}]"  # a user's key: escaped, so it cannot break the line or hide
        else:
            out += f".{part}" if out else part
    return out or "(the stack config)"


_PLAIN_TYPES: Final = {
    "bool_type": "true or false: write true or false without quotes",
    "bool_parsing": "true or false: write true or false without quotes",
    "int_type": "a whole number: write a whole number without quotes",
    "int_parsing": "a whole number: write a whole number without quotes",
    "int_from_float": "a whole number: write a number without a fraction",
    "string_type": "text: write it as a string",
    "dict_type": "a mapping: write it as key: value pairs",
    "model_type": "a mapping of settings: write it as key: value pairs",
    "model_attributes_type": "a mapping of settings: write it as key: value pairs",
    "tuple_type": "a list: write a list of cohorts, each with a name and an owner",
    "list_type": "a list: write it as a list",
}


def _pydantic_message(item: Mapping[str, Any]) -> str:
    """Pydantic's error, in the project's words: what the value is, what it should be, what to write."""
    kind = item["type"]
    context = item.get("ctx") or {}
    value = show(item.get("input"))
    if kind == "value_error":
        return str(item["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        return "is not a setting of this program; remove it or check its spelling"
    if kind == "missing":
        return "is required; add it to the stack file"
    if kind == "union_tag_invalid":
        return "sharing.mode must be one of none, time-slicing or mig"
    if kind == "union_tag_not_found":
        return "has no mode: set sharing.mode to none, time-slicing or mig"
    if kind in _PLAIN_TYPES:
        return f"is {value}, not {_PLAIN_TYPES[kind]}"
    if kind in {"greater_than_equal", "greater_than"}:
        bound = context.get("ge", context.get("gt"))
        word = "at least" if kind == "greater_than_equal" else "more than"
        return f"is {value}; it must be {word} {bound}: raise it"
    if kind in {"less_than_equal", "less_than"}:
        bound = context.get("le", context.get("lt"))
        word = "at most" if kind == "less_than_equal" else "less than"
        return f"is {value}; it must be {word} {bound}: lower it"
    if kind == "literal_error":
        return f"is {value}; use one of {context.get('expected', 'the documented values')}"
    return f"is {value}, which is not valid here ({item['msg']}): correct it"


def pydantic_problems(error: ValidationError) -> list[Problem]:
    """One problem per pydantic error, in the project's words, with its config path."""
    return [Problem(_format_loc(item["loc"]), _pydantic_message(item)) for item in error.errors(include_url=False)]


def _model_words(model: type[BaseModel], words: set[str]) -> set[str]:
    """Every setting name and Literal value of a model and the models inside it."""

    def walk(annotation: Any) -> None:
        if isinstance(annotation, str):
            words.add(annotation)
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            _model_words(annotation, words)
        for argument in get_args(annotation):
            walk(argument)

    for name, info in model.model_fields.items():
        words.update({name, info.alias or name})
        walk(info.annotation)
    return words


_NOT_SECRET: Final = frozenset(
    {*OWNERS, HYBRID, "true", "false", COMPUTE_TYPE_LABEL, DEFAULT_COHORT_LABEL_KEY} | _model_words(StackConfig, set())
)
"""Setting names and vocabulary a secret value may equal without the refusal's own wording being redacted."""


def _leaves(value: Any, depth: int = 0) -> Iterable[str]:
    if depth > 64:
        return  # refusals quote containers as "a list" / "a mapping": nothing deeper is ever echoed
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _leaves(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item, depth + 1)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def redact(problems: list[Problem], raw: Mapping[str, Any], secret_keys: Collection[str]) -> list[Problem]:
    """Refusals never echo a value set as a secret: it reads `the secret value at <path>` instead."""
    secrets = {leaf for key in secret_keys for leaf in _leaves(raw.get(key))}
    secrets -= _NOT_SECRET
    if not secrets:
        return problems
    ordered = sorted(secrets, key=len, reverse=True)
    redacted = []
    for problem in problems:
        message = problem.message
        for secret in ordered:
            message = message.replace(show(secret), f"the secret value at {problem.path}")
            message = message.replace(repr(secret), f"the secret value at {problem.path}")
            if len(secret) >= 4:  # also inside a longer word or path: over-redacting is the safe side
                message = message.replace(secret, "the secret value")
            elif len(secret) == 3:
                message = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", "the secret value", message)
        redacted.append(Problem(problem.path, message, problem.kind))
    return redacted
