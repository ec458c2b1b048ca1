"""`dra.extraSelector` is type-checked as the API server's CEL compiler checks it, against the DRA driver's types.

A condition must be boolean; `==` compares one type; `<`/`>` order numbers or strings; versions and quantities
compare through their methods; a method fits its receiver.
"""

from __future__ import annotations

import pytest

from policy.gpu_allocation.vocab.cel import DRIVER_ATTRIBUTES, fragment_problem

GPU = 'device.attributes["gpu.nvidia.com"]'
MEMORY = 'device.capacity["gpu.nvidia.com"].memory'
PCI = 'device.attributes["resource.kubernetes.io"]'


@pytest.mark.parametrize(
    "fragment",
    [
        f'{GPU}.productName == "NVIDIA H100 80GB HBM3"',
        f'{GPU}.productName.startsWith("NVIDIA H")',
        f'{GPU}.architecture == "Hopper" && {GPU}.brand == "Nvidia"',
        f'{PCI}.pcieRoot == "pci0000:00"',
        f'{PCI}.pciBusID.startsWith("0000:00:")',
        f'{GPU}.addressingMode == "None"',
        f'{GPU}.cudaDriverVersion.compareTo(semver("13.0.0")) >= 0',
        f'{GPU}.driverVersion.isGreaterThan(semver("550.0.0"))',
        f'{GPU}.cudaComputeCapability.compareTo(semver("9.0.0")) >= 0',
        # Kubernetes' CEL semver() is blang/semver's Parse: pre-releases and build metadata parse.
        f'{GPU}.driverVersion.compareTo(semver("580.0.0-rc.1")) >= 0',
        f'{GPU}.driverVersion.isGreaterThan(semver("580.0.0-alpha.0.beta+build.5"))',
        f'{MEMORY}.compareTo(quantity("40Gi")) >= 0',
        f'{MEMORY}.isGreaterThan(quantity("40Gi"))',
        f'!({GPU}.uuid == "GPU-6bd4d6e1-4195-52f0-0b57-52ec2a616d15")',
        'device.driver == "gpu.nvidia.com"',
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
        (f"{GPU}.uuid == 0", "compares a string with an int"),
        (f"{GPU}.productName == 1", "compares a string with an int"),
        (f'{MEMORY} >= quantity("40Gi")', "orders a quantity"),
        (f'{GPU}.driverVersion > semver("550.0.0")', "orders a version"),
        (f'{GPU}.productName.isGreaterThan(semver("1.0.0"))', "is called on a string"),
        (f'{MEMORY}.startsWith("4")', "is called on a quantity"),
        (f'{MEMORY}.isGreaterThan(semver("1.0.0"))', "compares a quantity with a version"),
        (f'{GPU}.cudaComputeCapability.compareTo(semver("9.0.0"))', "is an int, not a condition"),
        (f'{GPU}.driverVersion == "580.159.4"', 'compares through compareTo(semver("MAJOR.MINOR.PATCH")) == 0'),
        (f'{GPU}.driverVersion > semver("550.0.0")', 'use compareTo(semver("MAJOR.MINOR.PATCH")) > 0'),
    ],
)
def test_ill_typed_fragments_are_refused_with_the_reason(fragment: str, reason: str) -> None:
    problem = fragment_problem(fragment)
    assert problem is not None
    assert reason in problem


def test_the_table_names_the_driver_attributes() -> None:
    assert DRIVER_ATTRIBUTES["gpu.nvidia.com"]["productName"] == "string"
    assert DRIVER_ATTRIBUTES["gpu.nvidia.com"]["driverVersion"] == "version"
    assert DRIVER_ATTRIBUTES["resource.kubernetes.io"] == {"pciBusID": "string", "pcieRoot": "string"}
    assert "index" not in DRIVER_ATTRIBUTES["gpu.nvidia.com"]


KNOWN = (
    'device.attributes["gpu.nvidia.com"].addressingMode, device.attributes["gpu.nvidia.com"].architecture, '
    'device.attributes["gpu.nvidia.com"].brand, device.attributes["gpu.nvidia.com"].cudaComputeCapability, '
    'device.attributes["gpu.nvidia.com"].cudaDriverVersion, device.attributes["gpu.nvidia.com"].driverVersion, '
    'device.attributes["gpu.nvidia.com"].productName, device.attributes["gpu.nvidia.com"].type, '
    'device.attributes["gpu.nvidia.com"].uuid, device.attributes["resource.kubernetes.io"].pciBusID, '
    'device.attributes["resource.kubernetes.io"].pcieRoot'
)
MISSING = "a missing attribute is a CEL error on a real node and the device is never selected. It publishes "


@pytest.mark.parametrize(
    ("fragment", "problem"),
    [
        (
            f"{GPU}.index == 0",
            f'device.attributes["gpu.nvidia.com"].index at position 1 is not an attribute the NVIDIA DRA driver '
            f"publishes on a full GPU; {MISSING}{KNOWN}",
        ),
        (
            f'{GPU}.pcieRoot == "pci0000:00"',
            f'device.attributes["gpu.nvidia.com"].pcieRoot at position 1 is not an attribute the NVIDIA DRA driver '
            f'publishes on a full GPU (it is device.attributes["resource.kubernetes.io"].pcieRoot); {MISSING}{KNOWN}',
        ),
        (
            f'{GPU}.profile == "3g.71gb"',
            f'device.attributes["gpu.nvidia.com"].profile at position 1 is not an attribute the NVIDIA DRA driver '
            f'publishes on a full GPU (only MIG devices carry it, and hybrid-large-gpu selects type == "gpu"); '
            f"{MISSING}{KNOWN}",
        ),
        (
            'device.attributes["example.com"].custom',
            'device.attributes["example.com"].custom at position 1 is not an attribute the NVIDIA DRA driver '
            f"publishes on a full GPU; {MISSING}{KNOWN}",
        ),
        (
            f"{GPU}.migEnabled",
            f'device.attributes["gpu.nvidia.com"].migEnabled at position 1 is not an attribute the NVIDIA DRA driver '
            f"publishes on a full GPU; {MISSING}{KNOWN}",
        ),
        (
            'device.capacity["gpu.nvidia.com"].multiprocessors.isGreaterThan(quantity("100"))',
            'device.capacity["gpu.nvidia.com"].multiprocessors at position 1 is not a capacity the NVIDIA DRA driver '
            'publishes on a full GPU; it publishes device.capacity["gpu.nvidia.com"].memory',
        ),
        (
            f'{GPU}.driverVersion.compareTo(semver("580.159.04")) >= 0',
            'semver("580.159.04") at position 61 is not a version Kubernetes\' CEL parses: write MAJOR.MINOR.PATCH '
            "without leading zeros or a v (a -PRERELEASE and +BUILD may follow), as the driver publishes versions "
            "(NVML's driver 580.159.04 is "
            'semver("580.159.4"), compute capability 9.0 is semver("9.0.0"))',
        ),
        (
            f'{MEMORY}.isGreaterThan(quantity("141GB!"))',
            "the string at position 65 is not closed, or holds more than 256 characters or characters other than "
            "letters, digits, spaces and ._/:+=-",
        ),
        (
            f'{MEMORY}.isGreaterThan(quantity("141 Gi"))',
            'quantity("141 Gi") at position 56 is not a Kubernetes quantity; write it like 40Gi',
        ),
    ],
)
def test_unknown_attributes_and_unparsable_literals_are_refused_naming_the_real_ones(
    fragment: str, problem: str
) -> None:
    assert fragment_problem(fragment) == problem


def test_the_real_h200_passes_a_selector_written_from_its_slice() -> None:
    selector = (
        f'{GPU}.productName == "NVIDIA H200" && {GPU}.cudaComputeCapability.compareTo(semver("9.0.0")) >= 0 && '
        f'{GPU}.driverVersion.isGreaterThan(semver("565.0.0")) && {PCI}.pcieRoot.startsWith("pci0000:") && '
        f'{MEMORY}.compareTo(quantity("143771Mi")) >= 0'
    )
    assert fragment_problem(selector) is None


@pytest.mark.parametrize(
    "literal",
    ["v580.0.0", "580.0", "580.0.0-01", "580.0.0-", "580.0.0+", "18446744073709551616.0.0", "580.0.0-rc..1"],
)
def test_semver_literals_cel_refuses_are_refused(literal: str) -> None:
    problem = fragment_problem(f'{GPU}.driverVersion.compareTo(semver("{literal}")) >= 0')
    assert problem is not None
    assert f'semver("{literal}")' in problem
    assert "is not a version Kubernetes' CEL parses" in problem
