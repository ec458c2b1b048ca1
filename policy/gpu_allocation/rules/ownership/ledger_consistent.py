"""ownership-ledger-consistent: a stack built by this program carries the ledger, and it agrees with what is rendered.

The ledger is this program's contract (the cohort -> owner map the day-2 commands read); a stack this program did
not build needs none.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)
from pulumi_policy.proxy import UnknownValueError

from ...vocab import labels as vocab
from ...vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR, PROJECT
from ...vocab.ledger import beside_of
from ...vocab.owners import GPU_OPERATOR_KIND
from ..declare import stack_policy
from ..findings import LABELS_NOTE, report_findings
from ..installations import Installation
from ..ledger import Ledger
from ..props import UNKNOWN, compact_json, show, string_map
from ..resource import Resource
from ..stack_view import StackView
from .cohorts import cohort_path
from .scope import gpu_stack, reads_ownership


def _check_ledger(
    view: StackView,
    ledger: Ledger | None,
    require_ledger: bool,
    report: ReportViolation,
) -> None:
    stamped = [r for r in view.resources if r.owner and r.cohort and not r.is_ledger]
    installs = view.installations()
    if ledger is None:
        # The ledger is this program's contract: only a stack holding objects an owner of this program created
        # (stamped with owner and cohort) has one to keep.
        if require_ledger and stamped:
            message = (
                f"The stack installs GPU allocation owners but has no ledger ConfigMap "
                f"'{vocab.LEDGER_NAME}' (label {vocab.LEDGER_LABEL}=true), so the "
                "cohort -> owner map cannot be checked. Deploy the program's ledger, "
                "or set requireLedger=false in this policy's config (ownership-ledger-consistent)."
            )
            report(message, None)
        return
    if not ledger.known:
        return
    where = ledger.resource.describe
    if ledger.error is not None:
        message = (
            f"{where} {ledger.error}: data['{vocab.LEDGER_KEY}'] must hold "
            '{"cohorts": {...}, "operatorMode": ...}. Redeploy the ledger from the '
            f"typed stack config ({PROJECT}:cohorts)."
        )
        report(message, ledger.resource.urn)
        return
    _check_ledger_rendered(stamped, ledger, report)
    _check_ledger_owners(view, installs, ledger, report)


def _check_ledger_rendered(stamped: list[Resource], ledger: Ledger, report: ReportViolation) -> None:
    where = ledger.resource.describe
    reported: set[tuple[str, str]] = set()
    for resource in stamped:
        cohort = resource.cohort or ""
        entry = ledger.cohorts.get(cohort)
        path = resource.config_path("", cohort_path(cohort, ""))
        problem: tuple[str, str] | None = None
        beside = beside_of(entry) if entry is not None else None
        if entry is not None and beside is not None and beside[0] == resource.owner != entry.get("owner"):
            entry = {**entry, "owner": beside[0], "nodeSelector": beside[1]}  # installed beside, one node at a time
        if entry is None:
            problem = ("missing", f"cohort '{cohort}' is not in {where}")
        elif entry.get("owner") != resource.owner:
            problem = (
                "owner",
                f"owner label {show(resource.owner)} disagrees with {where}, which "
                f"records owner {show(entry.get('owner'))} for cohort '{cohort}'",
            )
        else:
            selector = resource.stamped_selector
            recorded = string_map(entry.get("nodeSelector"))
            if selector is not None and recorded is not None and selector != recorded:
                problem = (
                    "selector",
                    f"annotation {vocab.SELECTOR_ANNOTATION} {compact_json(selector)} "
                    f"disagrees with {where}, which records nodeSelector "
                    f"{compact_json(recorded)} for cohort '{cohort}'",
                )
            sharing = resource.annotation(vocab.SHARING_ANNOTATION)
            recorded_sharing = entry.get("sharing")
            if (
                problem is None
                and isinstance(sharing, str)
                and isinstance(recorded_sharing, str)
                and sharing != recorded_sharing
            ):
                problem = (
                    "sharing",
                    f"annotation {vocab.SHARING_ANNOTATION} {show(sharing)} disagrees "
                    f"with {where}, which records sharing {show(recorded_sharing)} for "
                    f"cohort '{cohort}'",
                )
        if problem is None or (cohort, problem[0]) in reported:
            continue
        reported.add((cohort, problem[0]))
        message = (
            f"{resource.describe}: {problem[1]}. The ledger must agree with what is "
            f"rendered; redeploy both from {path} instead of editing either by hand. "
            f"{LABELS_NOTE}"
        )
        report(message, resource.urn)


def _check_ledger_owners(
    view: StackView,
    installs: list[Installation],
    ledger: Ledger,
    report: ReportViolation,
) -> None:
    where = ledger.resource.describe
    rendered_owners = {r.owner for r in view.resources if r.owner}
    rendered_owners |= {i.owner for i in installs}
    operator_cohorts = []
    for name, entry in sorted(ledger.cohorts.items()):
        owner = entry.get("owner")
        beside = beside_of(entry)
        if beside is not None and beside[0] not in rendered_owners:
            message = (
                f"{where} records owner '{beside[0]}' beside cohort '{name}' (migrate, one node at a time), but "
                "nothing in this stack installs it. Redeploy the ledger with the program, or finish the migration "
                f"with `eks-hybrid-gpu migrate --stack STACK --cohort {name} --to {beside[0]}`."
            )
            report(message, ledger.resource.urn)
        if owner == GPU_OPERATOR:
            operator_cohorts.append(name)
        if owner not in vocab.OWNERS:
            message = (
                f"{where} records owner {show(owner)} for cohort '{name}', which is "
                f"not one of {', '.join(vocab.OWNERS)}. Set "
                f"{cohort_path(name, '.owner')} to a valid owner."
            )
            report(message, ledger.resource.urn)
        elif owner not in rendered_owners:
            message = (
                f"{where} records owner '{owner}' for cohort '{name}', but nothing in "
                "this stack installs that owner, so the ledger disagrees with what is "
                f"rendered. Redeploy the ledger from {cohort_path(name, '.owner')}."
            )
            report(message, ledger.resource.urn)
    if len(operator_cohorts) > 1:
        message = (
            f"{where} records {len(operator_cohorts)} GPU Operator cohorts "
            f"({', '.join(operator_cohorts)}); the Operator cannot be pinned to a cohort, "
            "so a cluster has at most one Operator-owned cohort. Merge them or move "
            f"the others to {DEVICE_PLUGIN}/{DRA} in {PROJECT}:cohorts[i].owner."
        )
        report(message, ledger.resource.urn)
    operators = [i for i in installs if i.owner == GPU_OPERATOR]
    recorded = ledger.operator_mode
    for operator in operators:
        mode = operator.mode
        if mode is UNKNOWN or mode == "both":
            continue
        if recorded != mode:
            message = (
                f"{where} records operatorMode {show(recorded)} but "
                f"{operator.resource.describe} renders {show(mode)}. Set "
                f"{PROJECT}:operator.mode and redeploy both from the same config."
            )
            report(message, operator.resource.urn)
    if not operators and recorded is not None:
        message = (
            f"{where} records operatorMode {show(recorded)} but this stack installs no "
            f"GPU Operator. Remove {PROJECT}:operator.mode or install the Operator."
        )
        report(message, ledger.resource.urn)


def ownership_ledger_consistent_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse a ledger that disagrees with what is rendered, and a program stack without one."""
    if not any(_stamped(r) for r in args.resources):
        args.not_applicable(
            "the ledger is this program's contract: the stack holds no object stamped by eks-hybrid-gpu"
        )
        return
    view = gpu_stack(args, report_violation)
    if view is None:
        return
    require_ledger = args.get_config().get("requireLedger", True) is not False
    ledger = view.ledger()
    _check_ledger(view, ledger, require_ledger, report_violation)
    # The ledger's own unreadable data is reported by _check_ledger in its words.
    report_findings(
        (
            f
            for f in view.problems(reads_ownership)
            if ledger is None or ledger.error is None or f.urn != ledger.resource.urn
        ),
        report_violation,
    )


def _stamped(resource: Any) -> bool:
    """A stamp without copying the props: the ledger label or any eks-hybrid-gpu.io/ label or annotation."""
    try:
        metadata = resource.props.get("metadata") or {}
        tables = [metadata.get("labels") or {}, metadata.get("annotations") or {}]
        prefix = f"{vocab.LABEL_PREFIX}/"
        return any(isinstance(key, str) and key.startswith(prefix) for table in tables for key in table)
    except (UnknownValueError, AttributeError, TypeError):
        return False


OWNERSHIP_LEDGER_CONSISTENT = stack_policy(
    "ownership-ledger-consistent",
    "A stack built by this program carries the ownership ledger, and the ledger agrees with what is rendered.",
    ownership_ledger_consistent_validator,
    severity=Severity.HIGH,
    remediation=(
        f"Redeploy the ledger and the rendered objects from the same typed stack config ({PROJECT}:cohorts); "
        "never edit either by hand. Stacks this program did not build need no ledger."
    ),
    url=GPU_OPERATOR_KIND.docs_url,
    tags=["ownership", "ledger"],
    config={
        "requireLedger": {
            "type": "boolean",
            "default": True,
            "description": "Refuse a stack with stamped GPU objects but without the ledger ConfigMap.",
        }
    },
)
