"""Property: arbitrary JSON anywhere in the stack config is accepted or refused by the program's own refusal,
never a crash (AttributeError, KeyError, RecursionError, ...)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config import CONFIG_KEYS
from components.refusals import StackConfigError
from components.stack_loader import load_stack_config
from eks_hybrid_gpu.mocks import ROOT
from policy.gpu_allocation.vocab.labels import DEFAULT_COHORT_LABEL_KEY
from tests.support import charts
from tests.support.configs import (
    DIGEST_IMAGE,
    DRA_COHORT,
    OPERATOR_COHORT,
    PLUGIN_COHORT,
    RunProgram,
    _base_config,
    cohort,
)

pytestmark = [pytest.mark.unit, pytest.mark.charts]

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=40)
    | st.sampled_from(
        [
            "",
            "plugin",
            "0.20.0",
            "40Gi",
            "mig",
            "time-slicing",
            "gpu-operator",
            "true",
            "\n",
            "\x00",
            "a\nb",
            "dra\r\n",
            "x" * 300,
        ]
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=16,
)

RICH = _base_config(
    cluster={"source": "local", "kubernetesVersion": "1.34.4", "preflight": False, "context": "ctx"},
    cohorts=[
        cohort(
            PLUGIN_COHORT,
            sharing={"mode": "mig", "migStrategy": "mixed", "gpuModel": "A100-40GB", "migProfile": "1g.5gb"},
        ),
        cohort(DRA_COHORT),
        cohort(
            OPERATOR_COHORT, nodeSelector={"eks.amazonaws.com/compute-type": "hybrid", DEFAULT_COHORT_LABEL_KEY: "op"}
        ),
    ],
    operator={"mode": "cluster-policy", "devicePluginEnabled": False},
    charts={"devicePlugin": {"version": "0.20.0", "source": {"archive": "{device_plugin}"}}},
    namespaces={"workloads": "ai"},
    dra={"largeGpuMemory": "40Gi", "featureGates": {"DynamicMIG": True}, "extraSelector": 'device.driver == "x"'},
    runtimeClass={"name": "nvidia"},
    smokeJobs={"approvedCohort": "plugin", "runAsUser": 1000, "image": DIGEST_IMAGE},
)
"""A config that sets every section, so replacing any one of its values reaches every validator.

Its device-plugin archive is filled in by `rich()` (tests/support/charts.py), so PATHS exist at collection.
"""


def rich() -> dict[str, Any]:
    """RICH with the pinned device-plugin archive's path."""
    raw = copy.deepcopy(RICH)
    raw["charts"]["devicePlugin"]["source"]["archive"] = str(charts.device_plugin())
    return raw


def test_the_rich_config_is_valid() -> None:
    assert len(load_stack_config(rich(), ROOT).cohorts) == 3


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


PATHS = [p for p in _paths(RICH) if p]


def _replaced(path: tuple[Any, ...], new: Any) -> dict[str, Any]:
    raw = rich()
    target: Any = raw
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = new
    return raw


def _refusal(raw: dict[str, Any]) -> StackConfigError | None:
    """The program's own refusal of `raw`, or None when it is accepted; any other exception fails the test."""
    try:
        load_stack_config(raw, ROOT)
    except StackConfigError as error:
        return error
    return None


def _accepted_or_refused(raw: dict[str, Any]) -> None:
    refusal = _refusal(raw)
    if refusal is None:
        return
    assert refusal.problems
    for problem in refusal.problems:
        assert problem.path
        assert "\n" not in str(problem)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(CONFIG_KEYS), value=JSON)
def test_any_json_under_a_top_level_key(key: str, value: Any) -> None:
    _accepted_or_refused({**rich(), key: value})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=JSON)
def test_any_json_at_any_nested_setting(path: tuple[Any, ...], value: Any) -> None:
    _accepted_or_refused(_replaced(path, value))


@settings(max_examples=100, deadline=None)
@given(raw=st.dictionaries(st.sampled_from([*CONFIG_KEYS, "smokeJob", ""]), JSON, max_size=6))
def test_any_json_document(raw: dict[str, Any]) -> None:
    _accepted_or_refused(raw)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(PATHS), value=JSON)
def test_the_program_refuses_with_a_run_error_only(run: RunProgram, path: tuple[Any, ...], value: Any) -> None:
    raw = _replaced(path, value)
    # The program reads a null config value as unset.
    refusal = _refusal({key: item for key, item in raw.items() if item is not None})
    if refusal is None:
        run(raw)
        return
    with pytest.raises(pulumi.RunError) as caught:
        run(raw)
    assert str(caught.value).splitlines()[1:] == str(refusal).splitlines()[1:]


SECRET_PATHS = [p for p in PATHS if p[0] in {"cluster", "cohorts", "charts"}]


@settings(max_examples=300, deadline=None)
@given(
    path=st.sampled_from(SECRET_PATHS),
    secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._/:@\n ", min_size=3, max_size=30),
)
def test_a_secret_value_never_appears_in_a_refusal(path: tuple[Any, ...], secret: str) -> None:
    value = "Zq" + secret
    try:
        load_stack_config(_replaced(path, value), ROOT, secret_keys=(path[0],))
    except StackConfigError as error:
        text = str(error)
    else:
        return
    assert value not in text
    assert ascii(value)[1:-1] not in text
