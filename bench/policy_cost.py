"""The policy pack's evaluation cost per resource, replayed on the requests the real engine sent.

`bench/analyzer` recorded every Analyze (one resource) and AnalyzeStack (the whole stack) request of the
capture run's `pulumi up`. Here each is replayed in-process, without gRPC and without an engine:

- analyzer: the pack's servicer handles the request exactly as in the analyzer process (for each
  policy: protobuf Struct -> dict, `deserialize_properties`, the unknown-checking proxy, then the
  policy's validate). This is what the analyzer spends per resource once it is running.
- validators: the pack's own code only. The validation args are built once per resource, as the
  servicer builds them, and then each `policy.gpu_allocation.pack.build_policies()` resource policy's validate is timed
  on them (stack policies: on the StackValidationArgs). The difference to the analyzer figure is the
  SDK's per-policy deserialization.
Each figure is the median over `repeats` replays; per-resource figures are then summarized over the
resources (median, min, max).
"""

from __future__ import annotations

import base64
import functools
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from pulumi.runtime.proto import analyzer_pb2
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from bench.stats import summarize
from policy.gpu_allocation.pack import PACK_NAME, build_policies
from policy.gpu_allocation.rules.sdk_internals import (
    AnalyzerServicer,
    NotApplicable,
    share_deserialization_per_request,
)


def load_records(path: Path) -> tuple[list[Any], list[Any], list[float]]:
    """(Analyze requests, AnalyzeStack requests, seconds the live analyzer took per Analyze request)."""
    resources, stacks, live = [], [], []
    for line in path.read_text().splitlines():
        item = json.loads(line)
        raw = base64.b64decode(item["request"])
        if item["method"] == "Analyze":
            resources.append(analyzer_pb2.AnalyzeRequest.FromString(raw))
            live.append(float(item["seconds"]))
        else:
            stacks.append(analyzer_pb2.AnalyzeStackRequest.FromString(raw))
    return resources, stacks, live


def _servicer() -> Any:
    share_deserialization_per_request()  # as the pack's serve() does before it serves
    return AnalyzerServicer(PACK_NAME, "0.1.0", build_policies(), EnforcementLevel.ADVISORY)


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _validate(policy: Any, args: Any) -> None:
    try:
        policy.validate(args, lambda message, urn=None: None)
    except (NotApplicable, UnknownValueError):
        pass


def _resource_args(servicer: Any, request: Any) -> ResourceValidationArgs:
    props = unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(request.properties)))
    return ResourceValidationArgs(
        request.type,
        props,
        request.urn,
        request.name,
        servicer._get_resource_options(request),
        servicer._get_provider_resource(request),
        None,
    )


def _stack_args(servicer: Any, request: Any) -> StackValidationArgs:
    by_urn: dict[str, PolicyResource] = {}
    parents: dict[str, str] = {}
    for item in request.resources:
        props = unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(item.properties)))
        by_urn[item.urn] = PolicyResource(
            item.type,
            props,
            item.urn,
            item.name,
            servicer._get_resource_options(item),
            servicer._get_provider_resource(item),
            None,
            [],
            {},
        )
        if item.parent:
            parents[item.urn] = item.parent
    for urn, parent in parents.items():
        if parent in by_urn:
            by_urn[urn].parent = by_urn[parent]
    return StackValidationArgs(list(by_urn.values()), None)


def measure(record: Path, repeats: int) -> dict[str, Any]:
    """Replay the recorded requests `repeats` times; per-resource and per-stack costs."""
    resources, stacks, live = load_records(record)
    servicer = _servicer()
    policies = build_policies()
    resource_policies = [p for p in policies if isinstance(p, ResourceValidationPolicy)]
    stack_policies = [p for p in policies if isinstance(p, StackValidationPolicy)]

    analyzer_runs: list[list[float]] = [[] for _ in resources]
    validator_runs: list[list[float]] = [[] for _ in resources]
    prepared = [_resource_args(servicer, request) for request in resources]
    stack_analyzer: list[float] = []
    stack_validators: list[float] = []
    stack_prepared = [_stack_args(servicer, request) for request in stacks]

    def analyze(request: Any) -> None:
        servicer.Analyze(request, None)

    def validate_resource(args: ResourceValidationArgs) -> None:
        for policy in resource_policies:
            _validate(policy, args)

    def analyze_stacks() -> None:
        for request in stacks:
            servicer.AnalyzeStack(request, None)

    def validate_stacks() -> None:
        for args in stack_prepared:
            for policy in stack_policies:
                _validate(policy, args)

    for _ in range(repeats):
        for i, request in enumerate(resources):
            analyzer_runs[i].append(_timed(functools.partial(analyze, request)))
            validator_runs[i].append(_timed(functools.partial(validate_resource, prepared[i])))
        if stacks:
            stack_analyzer.append(_timed(analyze_stacks))
            stack_validators.append(_timed(validate_stacks))
    per_resource_analyzer = [statistics.median(runs) for runs in analyzer_runs]
    per_resource_validators = [statistics.median(runs) for runs in validator_runs]
    slowest = sorted(zip(per_resource_validators, (r.type for r in resources), strict=True), reverse=True)[:5]
    return {
        "resources": len(resources),
        "resource_policies": len(resource_policies),
        "stack_policies": len(stack_policies),
        "stack_requests": len(stacks),
        "repeats": repeats,
        "per_resource_analyzer_s": summarize(per_resource_analyzer).as_dict() if resources else None,
        "per_resource_validators_s": summarize(per_resource_validators).as_dict() if resources else None,
        "all_resources_analyzer_s": sum(per_resource_analyzer),
        "all_resources_validators_s": sum(per_resource_validators),
        "stack_analyzer_s": summarize(stack_analyzer).as_dict() if stack_analyzer else None,
        "stack_validators_s": summarize(stack_validators).as_dict() if stack_validators else None,
        "live_analyze_s": summarize(live).as_dict() if live else None,
        "live_analyze_total_s": sum(live),
        "slowest_validated_types": [{"type": t, "seconds": s} for s, t in slowest],
    }
