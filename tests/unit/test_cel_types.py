"""`dra.extraSelector` is type-checked as the API server's CEL compiler checks it, against the DRA driver's types.

A condition must be boolean; `==` compares one type; `<`/`>` order numbers or strings; versions and quantities
compare through their methods; a method fits its receiver.
"""

from __future__ import annotations

import pytest

from policy.gpu_allocation.vocab.cel import DRIVER_ATTRIBUTES, fragment_problem

GPU = 'device.attributes["gpu.nvidia.com"]'
MEMORY = 'device.capacity["gpu.nvidia.com"].memory'


@pytest.mark.parametrize(
    "fragment",
    [
        f'{GPU}.productName == "NVIDIA H100 80GB HBM3"',
        f'{GPU}.productName.startsWith("NVIDIA H")',
        f"{GPU}.index < 4",
        f'{GPU}.driverVersion.isGreaterThan(semver("550.0.0"))',
        f'{GPU}.cudaComputeCapability.compareTo(semver("9.0.0")) >= 0',
        f'{MEMORY}.compareTo(quantity("40Gi")) >= 0',
        f'{MEMORY}.isGreaterThan(quantity("40Gi"))',
        f"{GPU}.migEnabled",
        f"!{GPU}.migEnabled && {GPU}.minor != 0",
        'device.driver == "gpu.nvidia.com"',
        'device.attributes["example.com"].custom',  # an attribute the driver's table does not name: dyn
        'device.attributes["example.com"].custom == "x"',
    ],
)
def test_well_typed_fragments_pass(fragment: str) -> None:
    assert fragment_problem(fragment) is None


@pytest.mark.parametrize(
    ("fragment", "reason"),
    [
        (f"{GPU}.productName", "is a string, not a condition"),
        ("device.driver", "is a string, not a condition"),
        (MEMORY, "is a quantity, not a condition"),
        (f"{GPU}.driverVersion", "is a version, not a condition"),
        (f"{GPU}.index", "is an int, not a condition"),
        (f'{GPU}.index == "0"', "compares an int with a string"),
        (f"{GPU}.productName == 1", "compares a string with an int"),
        (f'{MEMORY} >= quantity("40Gi")', "orders a quantity"),
        (f'{GPU}.driverVersion > semver("550.0.0")', "orders a version"),
        (f'{GPU}.productName.isGreaterThan(semver("1.0.0"))', "is called on a string"),
        (f'{MEMORY}.startsWith("4")', "is called on a quantity"),
        (f'{MEMORY}.isGreaterThan(semver("1.0.0"))', "compares a quantity with a version"),
        (f'{GPU}.cudaComputeCapability.compareTo(semver("9.0.0"))', "is an int, not a condition"),
        (f'{GPU}.migEnabled == "true"', "compares a bool with a string"),
    ],
)
def test_ill_typed_fragments_are_refused_with_the_reason(fragment: str, reason: str) -> None:
    problem = fragment_problem(fragment)
    assert problem is not None
    assert reason in problem


def test_the_table_names_the_driver_attributes() -> None:
    assert DRIVER_ATTRIBUTES["gpu.nvidia.com"]["productName"] == "string"
    assert DRIVER_ATTRIBUTES["gpu.nvidia.com"]["driverVersion"] == "version"
    assert DRIVER_ATTRIBUTES["gpu.nvidia.com"]["index"] == "int"
