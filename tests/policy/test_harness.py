"""The harness's verdicts can fail: ``passes()`` refuses a policy that did not apply, ``not_applicable()`` one that did.

Without this a clean-case test could pass because the policy stopped recognising its input.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy

from tests.support.policy_harness import Harness, Item, not_applicable, passes

pytestmark = pytest.mark.policy

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-system"}}


PROBE = {"description": "A probe of the harness.", "enforcement_level": EnforcementLevel.MANDATORY}


def _resource_policy(validate: Callable[..., Any]) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(name="harness-probe", validate=validate, **PROBE)


def _stack_policy(validate: Callable[..., Any]) -> StackValidationPolicy:
    return StackValidationPolicy(name="harness-stack-probe", validate=validate, **PROBE)


def _skips(args: Any, report_violation: Any) -> None:
    args.not_applicable("not a probe target")


def _judges_clean(args: Any, report_violation: Any) -> None:
    assert args.props["metadata"]["name"] == "gpu-system"


def _refuses(args: Any, report_violation: Any) -> None:
    report_violation("gpu-system: refused.", None)


def test_passes_fails_when_the_policy_did_not_apply(harness: Harness) -> None:
    outcome = harness.manifest_check(_resource_policy(_skips), NAMESPACE)
    assert outcome.violations == []  # what a test that checked only for violations would have accepted
    assert not outcome.applied
    with pytest.raises(AssertionError, match="the policy did not apply: 'not a probe target'"):
        passes(outcome)
    with pytest.raises(AssertionError, match=r"did not apply \(the namespace\)"):
        harness.passes(outcome, "the namespace")
    assert not_applicable(outcome) == "not a probe target"


def test_passes_fails_on_a_violation(harness: Harness) -> None:
    outcome = harness.manifest_check(_resource_policy(_refuses), NAMESPACE)
    assert outcome.applied
    with pytest.raises(AssertionError, match=r"gpu-system: refused\."):
        passes(outcome)


def test_not_applicable_fails_when_the_policy_applied(harness: Harness) -> None:
    outcome = harness.manifest_check(_resource_policy(_judges_clean), NAMESPACE)
    passes(outcome)
    with pytest.raises(AssertionError, match="the policy applied"):
        not_applicable(outcome)


def test_stack_policies_record_applicability_too(harness: Harness) -> None:
    items = [Item("kubernetes:core/v1:Namespace", NAMESPACE, "gpu-system")]
    skipped = harness.stack(_stack_policy(_skips), items)
    with pytest.raises(AssertionError, match="did not apply"):
        passes(skipped)
    assert not_applicable(skipped) == "not a probe target"
    passes(harness.stack(_stack_policy(lambda args, report: None), items))


def test_an_async_validator_is_refused_not_passed(harness: Harness) -> None:
    """Its verdict would sit unrun in the coroutine, so 'no violation' would mean nothing."""

    class Later:
        def __await__(self) -> Generator[None, None, None]:
            yield None

    with pytest.raises(AssertionError, match="harness-probe returned an awaitable"):
        harness.manifest_check(_resource_policy(lambda args, report: Later()), NAMESPACE)
