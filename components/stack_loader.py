"""Loading the stack config: the model's field problems and the cross-field problems reported together.

Nothing is registered until this passes, so an invalid stack never half-applies.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cluster.findings import Problem
from components.config import CohortConfig, StackConfig
from components.refusals import StackConfigError, pydantic_problems, redact
from components.validation import ClusterFacts, validate


def _parse(
    raw: Mapping[str, Any], context: Mapping[str, Any]
) -> tuple[StackConfig | None, list[Problem], set[str], list[int] | None]:
    """The model, or field problems plus the best partial model of the settings that did parse.

    The partial model drops each failed top-level key (its defaults stand in) and each failed cohort, so that
    cross-field problems elsewhere are reported in the same run; `index_map` maps kept cohorts to their index.
    """
    try:
        return StackConfig.model_validate(dict(raw), context=context), [], set(), None
    except ValidationError as error:
        problems = pydantic_problems(error)
        failed = {str(item["loc"][0]) for item in error.errors() if item["loc"]}
    partial = {key: value for key, value in raw.items() if key not in failed}
    index_map: list[int] | None = None
    cohorts = raw.get("cohorts")
    if "cohorts" in failed:
        if not isinstance(cohorts, list):
            return None, problems, failed, None
        index_map = []
        kept = []
        for index, item in enumerate(cohorts):
            try:
                CohortConfig.model_validate(item)
            except ValidationError:
                continue
            index_map.append(index)
            kept.append(item)
        partial["cohorts"] = kept
    try:
        return StackConfig.model_validate(partial, context=context), problems, failed, index_map
    except ValidationError:
        return None, problems, failed, index_map


def load_stack_config(
    raw: Mapping[str, Any],
    project_dir: Path,
    facts: ClusterFacts | None = None,
    stack_file: str | None = None,
    secret_keys: Collection[str] = (),
) -> StackConfig:
    """Parse and validate raw config values (keys without the project namespace) or raise StackConfigError.

    Field problems and the cross-field problems of the settings that still parse are reported together;
    values of `secret_keys` never appear in the refusal.
    """
    config, problems, failed, index_map = _parse(raw, {"secret_keys": frozenset(secret_keys)})
    if config is not None:
        cross = validate(config, project_dir, facts, index_map)
        if index_map is not None:
            # The approved cohort may be one that failed the model: the model's own problem says so.
            cross = [p for p in cross if p.path != "smokeJobs.approvedCohort"]
        cross = [p for p in cross if re.split(r"[.\[]", p.path, maxsplit=1)[0] not in failed - {"cohorts"}]
        problems = [*problems, *(p for p in cross if p not in problems)]
    if problems or config is None:
        raise StackConfigError(redact(problems, raw, secret_keys), stack_file)
    return config
