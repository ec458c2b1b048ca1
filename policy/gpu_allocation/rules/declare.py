"""One declaration of a policy: the fields every rule of the pack sets, in one place.

Each rule module declares its policy right under its validator; this helper keeps the shape the house asks of every
declaration (``../shared/STYLE.md``, "one ``<rule>_validator`` per policy": kebab-case name, one-sentence description,
an explicit enforcement level, ``remediation_steps``, ``url`` and ``severity``) so that a new rule states only what
is its own. A policy with nothing to tune but its level gets an empty config schema: a team still sets that level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ResourceValidation,
    ResourceValidationPolicy,
    Severity,
    StackValidation,
    StackValidationPolicy,
)


def stack_policy(
    name: str,
    description: str,
    validate: StackValidation,
    *,
    remediation: str,
    url: str,
    tags: Sequence[str],
    severity: Severity,
    level: EnforcementLevel = EnforcementLevel.MANDATORY,
    config: Mapping[str, Any] | None = None,
) -> StackValidationPolicy:
    """A stack policy of the pack; ``config``: its ``PolicyConfigSchema`` properties (none: only its level)."""
    fields = _fields(remediation, url, tags, severity, level, config)
    return StackValidationPolicy(name=name, description=description, validate=validate, **fields)


def resource_policy(
    name: str,
    description: str,
    validate: ResourceValidation | list[ResourceValidation],
    *,
    remediation: str,
    url: str,
    tags: Sequence[str],
    severity: Severity,
    level: EnforcementLevel = EnforcementLevel.MANDATORY,
    config: Mapping[str, Any] | None = None,
) -> ResourceValidationPolicy:
    """A resource policy of the pack, declared as :func:`stack_policy` declares a stack policy."""
    fields = _fields(remediation, url, tags, severity, level, config)
    return ResourceValidationPolicy(name=name, description=description, validate=validate, **fields)


def _fields(
    remediation: str,
    url: str,
    tags: Sequence[str],
    severity: Severity,
    level: EnforcementLevel,
    config: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The keyword arguments both kinds of policy take, the same way."""
    return {
        "enforcement_level": level,
        "severity": severity,
        "config_schema": PolicyConfigSchema(properties=dict(config or {})),
        "remediation_steps": remediation,
        "url": url,
        "tags": list(tags),
    }
