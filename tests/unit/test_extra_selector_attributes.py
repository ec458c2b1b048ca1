"""`dra.extraSelector` is checked against the attributes the real NVIDIA DRA driver publishes on a full GPU.

A selector naming an attribute a real node's devices do not carry is a CEL error there, and the device is never
selected: the config refuses it at preview, with the config path, the bad attribute and the ones that exist.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.refusals import StackConfigError
from components.stack_loader import load_stack_config
from eks_hybrid_gpu.mocks import ROOT
from policy.gpu_allocation.vocab.cel import fragment_problem
from policy.gpu_allocation.vocab.dra_attributes import FULL_GPU_ATTRIBUTES, MIG_ATTRIBUTES
from tests.support.configs import DRA_COHORT, _base_config

pytestmark = pytest.mark.unit

DRA_CLUSTER = {"source": "local", "kubernetesVersion": "1.34.4", "preflight": False}
PATH = "eks-hybrid-gpu:dra.extraSelector"
PUBLISHED = (
    'It publishes device.attributes["gpu.nvidia.com"].addressingMode, device.attributes["gpu.nvidia.com"].architecture'
)


def _problems(selector: str) -> list[str]:
    raw = _base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"extraSelector": selector})
    try:
        load_stack_config(raw, ROOT)
    except StackConfigError as error:
        return [str(problem) for problem in error.problems]
    return []


@pytest.mark.parametrize(
    ("selector", "start", "hint"),
    [
        (
            'device.attributes["gpu.nvidia.com"].index == 0',
            f'{PATH}: device.attributes["gpu.nvidia.com"].index at position 1 is not an attribute the NVIDIA DRA '
            "driver publishes on a full GPU; a missing attribute is a CEL error on a real node",
            None,
        ),
        (
            'device.attributes["gpu.nvidia.com"].pcieRoot == "pci0000:00"',
            f'{PATH}: device.attributes["gpu.nvidia.com"].pcieRoot at position 1 is not an attribute',
            '(it is device.attributes["resource.kubernetes.io"].pcieRoot)',
        ),
    ],
)
def test_an_attribute_no_real_gpu_carries_is_refused_naming_the_real_ones(
    selector: str, start: str, hint: str | None
) -> None:
    (problem,) = _problems(selector)

    assert problem.startswith(start)
    assert PUBLISHED in problem
    assert 'device.attributes["resource.kubernetes.io"].pcieRoot' in problem
    assert problem.endswith("; select on what the driver publishes, as a real node's ResourceSlice shows it")
    if hint:
        assert hint in problem


def test_a_version_literal_the_api_server_cannot_parse_is_refused() -> None:
    (problem,) = _problems('device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("580.159.04")) >= 0')

    assert problem.startswith(f'{PATH}: semver("580.159.04") at position 61 is not a version Kubernetes\' CEL parses')
    assert 'semver("580.159.4")' in problem


def test_a_version_compared_with_a_string_names_compare_to() -> None:
    (problem,) = _problems('device.attributes["gpu.nvidia.com"].driverVersion == "580.159.4"')

    assert 'a version compares through compareTo(semver("MAJOR.MINOR.PATCH")) == 0' in problem


def test_selectors_written_from_the_real_slice_are_accepted() -> None:
    assert (
        _problems(
            'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00" && '
            'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("580.159.4")) >= 0'
        )
        == []
    )


REFERENCE = re.compile(r'device\.attributes\["([^"]*)"\]\.([A-Za-z_][A-Za-z0-9_]*)')
NAMES = sorted({n for table in (FULL_GPU_ATTRIBUTES, MIG_ATTRIBUTES) for names in table.values() for n in names})
DOMAINS = ["gpu.nvidia.com", "resource.kubernetes.io", "example.com", "", "gpu.nvidia.com/x"]


@st.composite
def attribute_comparisons(draw: Any) -> str:
    """A comparison on a real or made-up attribute, in any domain, against a literal of any type."""
    domain = draw(st.sampled_from(DOMAINS))
    name = draw(st.sampled_from([*NAMES, "index", "minor", "migEnabled", "pcieBusID", "numaNode"]))
    literal = draw(st.sampled_from(['"x"', "0", 'semver("9.0.0")', 'semver("9.0")', "true"]))
    op = draw(st.sampled_from(["==", "!=", ".compareTo", ".startsWith"]))
    if op.startswith("."):
        return f'device.attributes["{domain}"].{name}{op}({literal})' + (" >= 0" if op == ".compareTo" else "")
    return f'device.attributes["{domain}"].{name} {op} {literal}'


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(attribute_comparisons(), min_size=1, max_size=3), join=st.sampled_from([" && ", " || "]))
def test_an_accepted_selector_names_only_published_full_gpu_attributes(parts: list[str], join: str) -> None:
    fragment = join.join(parts)
    if fragment_problem(fragment) is not None:
        return
    for domain, name in REFERENCE.findall(fragment):
        assert name in FULL_GPU_ATTRIBUTES.get(domain, {}), fragment
    assert 'semver("9.0")' not in fragment


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    selector=st.text(max_size=80)
    | st.builds(lambda a, b: a + b, attribute_comparisons(), st.sampled_from(["", ")", " || (true", "\n", "\x00"]))
)
def test_hostile_selectors_are_accepted_or_refused_in_one_line_naming_the_path(selector: str) -> None:
    problems = _problems(selector)

    for problem in problems:
        assert problem.startswith(f"{PATH}: ")
        assert "\n" not in problem
