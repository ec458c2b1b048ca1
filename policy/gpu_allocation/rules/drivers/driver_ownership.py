"""driver-ownership-consistent and driver-verification-declared: who owns the GPU driver next to the Operator.

Seed: "driver.enabled=false is appropriate only if the host driver is already verified" and "This path assumes the
host driver root is / ... An Operator-installed driver typically uses a different root; do not copy this value into
that deployment".
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urljoin

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab.labels import DRA, GPU_OPERATOR, PROJECT
from ...vocab.owners import GPU_OPERATOR_KIND
from ..declare import stack_policy
from ..findings import report_findings
from ..installations import Installation
from ..ledger import Ledger
from ..props import UNKNOWN, config_strings, show, string_list
from ..stack_view import INSTALL_KINDS, StackView, not_applicable_unless_unreadable, reads_gpu_objects

_VERIFIED_KEY: Final = "hostDriverVerified"
_VERIFIED_COHORTS: Final = {"verifiedCohorts": string_list([], "Operator cohorts whose host driver was verified.")}
"""The config both driver policies read: Operator cohorts reviewed as having a verified host driver."""
_DRIVER_PATH: Final = f"{PROJECT}:operator.driverEnabled"


def _verified_path(cohort: str) -> str:
    return f"{PROJECT}:cohorts[i].{_VERIFIED_KEY} (cohort '{cohort}')"


def _operator_cohort_verification(ledger: Ledger | None, verified_config: tuple[str, ...]) -> dict[str, Any]:
    """Operator cohort -> True/False/None (None: the stack does not say)."""
    if ledger is None or not ledger.known:
        return {}
    result: dict[str, Any] = {}
    for name, entry in sorted(ledger.cohorts.items()):
        if entry.get("owner") != GPU_OPERATOR:
            continue
        if name in verified_config:
            result[name] = True
            continue
        recorded = entry.get(_VERIFIED_KEY)
        result[name] = recorded if isinstance(recorded, bool) else None
    return result


def _driver_disabled(operator: Installation) -> bool:
    return operator.operand_enabled("driver") is False


def _driver_managed(operator: Installation) -> bool:
    if operator.values is UNKNOWN:
        return False
    return operator.operand_enabled("driver") is True


def driver_ownership_consistent_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse an unverified host driver, and DRA root / next to an Operator driver."""
    view = StackView.from_args(args, INSTALL_KINDS)
    operators = view.by_owner(GPU_OPERATOR)
    dra_installs = view.by_owner(DRA)
    if not operators:
        not_applicable_unless_unreadable(args, view, "the stack installs no GPU Operator", report_violation)
        return
    verified_config = config_strings(args.get_config(), "verifiedCohorts", ())
    verification = _operator_cohort_verification(view.ledger(), verified_config)
    for operator in operators:
        if not _driver_disabled(operator):
            continue
        for cohort, verified in verification.items():
            if verified is not False:
                continue
            report_violation(
                f"{operator.resource.describe} sets driver.enabled=false but cohort "
                f"'{cohort}' declares {_VERIFIED_KEY}: false. Without an Operator "
                "driver the GPUs need a verified host driver (being on premises does "
                f"not imply one exists). Verify it with nvidia-smi and set "
                f"{_verified_path(cohort)} to true, or set {_DRIVER_PATH} to true.",
                operator.resource.urn,
            )
    _check_driver_root(operators, dra_installs, report_violation)
    report_findings(view.problems(reads_gpu_objects), report_violation)


def _check_driver_root(
    operators: list[Installation], dra_installs: list[Installation], report_violation: ReportViolation
) -> None:
    managing = [o for o in operators if _driver_managed(o)]
    if not managing:
        return
    for install in dra_installs:
        root = install.driver_root()
        if root.value != "/":
            continue
        report_violation(
            f"{root.subject} is {show(root.value)}"
            f"{' (chart default)' if root.defaulted else ''} while "
            f"{managing[0].resource.describe} manages the driver (driver.enabled is "
            f"{show(managing[0].setting('driver', 'enabled'))}, default true). An "
            "Operator-installed driver lives under /run/nvidia/driver, so the DRA "
            "plugin would prepare devices against a host driver that is not the one in "
            f"use. Set {_DRIVER_PATH} to false with a verified host driver, or keep the "
            "DRA cohort out of an Operator-managed driver deployment.",
            install.resource.urn,
        )


DRIVER_OWNERSHIP_CONSISTENT = stack_policy(
    "driver-ownership-consistent",
    (
        "The GPU Operator disables its driver only for cohorts that declare a verified "
        "host driver, and a DRA driver root of / is never combined with an "
        "Operator-managed driver."
    ),
    driver_ownership_consistent_validator,
    severity=Severity.HIGH,
    remediation=(
        f"Set {PROJECT}:cohorts[i].hostDriverVerified only after verifying the host "
        f"driver; otherwise keep {_DRIVER_PATH} true. Do not reuse the standalone DRA "
        "nvidiaDriverRoot / next to an Operator-managed driver."
    ),
    url=urljoin(GPU_OPERATOR_KIND.docs_url, "getting-started.html"),
    tags=["drivers", GPU_OPERATOR],
    config=_VERIFIED_COHORTS,
)


def driver_verification_declared_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Ask for a review when driver.enabled=false and verification is not declared."""
    view = StackView.from_args(args, INSTALL_KINDS)
    operators = [o for o in view.by_owner(GPU_OPERATOR) if _driver_disabled(o)]
    if not operators:
        not_applicable_unless_unreadable(args, view, "no GPU Operator with driver.enabled=false", report_violation)
        return
    verified_config = config_strings(args.get_config(), "verifiedCohorts", ())
    verification = _operator_cohort_verification(view.ledger(), verified_config)
    unknown = sorted(c for c, v in verification.items() if v is None)
    if verification and not unknown:
        return
    cohorts = ", ".join(f"'{c}'" for c in unknown) or "the Operator cohort"
    for operator in operators:
        report_violation(
            f"{operator.resource.describe} sets driver.enabled=false, but the stack "
            f"does not show whether {cohorts} has a verified host driver (no "
            f"{_VERIFIED_KEY} in the ledger, not in verifiedCohorts). Review: verify "
            "the driver and toolkit on every host (nvidia-smi), then set "
            f"{PROJECT}:cohorts[i].{_VERIFIED_KEY} to true or list the cohort in this "
            "policy's verifiedCohorts.",
            operator.resource.urn,
        )


DRIVER_VERIFICATION_DECLARED = stack_policy(
    "driver-verification-declared",
    (
        "When the GPU Operator's driver is disabled, the stack should show that every "
        "Operator cohort has a verified host driver (review otherwise)."
    ),
    driver_verification_declared_validator,
    severity=Severity.MEDIUM,
    remediation=(
        "Verify the driver/toolkit on the hosts, then record it in "
        f"{PROJECT}:cohorts[i].hostDriverVerified or in this policy's verifiedCohorts."
    ),
    url=urljoin(GPU_OPERATOR_KIND.docs_url, "getting-started.html"),
    tags=["drivers", GPU_OPERATOR, "review"],
    level=EnforcementLevel.ADVISORY,
    config=_VERIFIED_COHORTS,
)
