"""The shared value grammars and the CEL fragment checker on their own: whole-match, ASCII, with lengths."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest

from policy.gpu_allocation.vocab import grammar
from policy.gpu_allocation.vocab.cel import MAX_DEPTH, MAX_LENGTH, fragment_problem
from policy.gpu_allocation.vocab.mig import is_tabulated_profile, mig_resource_name, tabulated_profiles

pytestmark = pytest.mark.unit

SUBDOMAIN_253 = ".".join(["a" * 63] * 3) + "." + "b" * 61

CASES: list[tuple[Callable[[object], bool], object, bool]] = [
    (grammar.is_dns_label, "a" * 63, True),
    (grammar.is_dns_label, "a" * 64, False),
    (grammar.is_dns_label, "gpu-system\n", False),
    (grammar.is_dns_label, "-gpu", False),
    (grammar.is_dns_label, "gpu_system", False),
    (grammar.is_dns_label, 7, False),
    (grammar.is_dns_subdomain, SUBDOMAIN_253, True),
    (grammar.is_dns_subdomain, SUBDOMAIN_253 + "b", False),
    (grammar.is_dns_subdomain, "a" * 64 + ".b", False),
    (grammar.is_label_key, SUBDOMAIN_253 + "/" + "n" * 63, True),
    (grammar.is_label_key, "example.com/" + "n" * 64, False),
    (grammar.is_label_key, "Example.com/name", False),
    (grammar.is_label_key, "a/b/c", False),
    (grammar.is_label_key, "name\n", False),
    (grammar.is_label_value, "", True),
    (grammar.is_label_value, "v" * 63, True),
    (grammar.is_label_value, "v" * 64, False),
    (grammar.is_label_value, "dra\n", False),
    (grammar.is_exact_version, "0.20.0", True),
    (grammar.is_exact_version, "v26.7.0", True),
    (grammar.is_exact_version, "1.0.0-rc.1+build.5", True),
    (grammar.is_exact_version, "1.0.0-01", False),
    (grammar.is_exact_version, "\uff10.\uff12\uff10.\uff10", False),
    (grammar.is_exact_version, "0.20.0\n", False),
    (grammar.is_exact_version, "0.20", False),
    (grammar.is_digest_image, "gpu-smoke@sha256:" + "a" * 64, True),
    (grammar.is_digest_image, "localhost:5000/a/b:1.0@sha256:" + "a" * 64, True),
    (grammar.is_digest_image, "registry/gpu@sha256:" + "A" * 64, False),
    (grammar.is_digest_image, "registry/gpu:1.0", False),
    (grammar.is_digest_image, "a" * 256 + "@sha256:" + "a" * 64, False),
    (grammar.is_oci_chart, "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", True),
    (grammar.is_oci_chart, "oci://mirror:5000/nvdp", True),
    (grammar.is_oci_chart, "registry.k8s.io/nvdp", False),
    (grammar.is_oci_chart, "oci://mirror", False),
    (grammar.is_helm_repo_url, "https://nvidia.github.io/k8s-device-plugin", True),
    (grammar.is_helm_repo_url, "https://user:t0k%40n@charts.example.com/x", True),
    (grammar.is_helm_repo_url, "ftp://charts.example.com", False),
    (grammar.is_helm_repo_url, "https://charts.example.com/a b", False),
    (grammar.is_quantity, "40Gi", True),
    (grammar.is_quantity, "4e10", True),
    (grammar.is_quantity, ".5Mi", True),
    (grammar.is_quantity, "40 Gi", False),
    (grammar.is_quantity, " 40Gi", False),
    (grammar.is_quantity, "40GiB", False),
    (grammar.is_path, "charts/a.tgz", True),
    (grammar.is_path, "c" * 255 + ".tgz", False),
    (grammar.is_path, "a\x00b", False),
    (grammar.is_path, "", False),
    (grammar.is_path, "/" + "a/" * 2100, False),
]


@pytest.mark.parametrize(("check", "value", "valid"), CASES, ids=lambda v: repr(v)[:40])
def test_grammar(check: Callable[[object], bool], value: object, valid: bool) -> None:
    assert check(value) is valid


def test_credentials_in_a_repo_url_are_recognised() -> None:
    assert grammar.url_has_credentials("https://robot:token@charts.example.com/nvidia")
    assert not grammar.url_has_credentials("https://charts.example.com/nvidia")


def test_one_quantity_grammar_parses_what_it_accepts() -> None:
    assert grammar.parse_quantity("40Gi") == Fraction(40 * 2**30)
    assert grammar.parse_quantity("4e10") == Fraction(4 * 10**10)
    assert grammar.parse_quantity("\u0664\u0660Gi") is None


@pytest.mark.parametrize(
    "fragment",
    [
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H200"',
        'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("80Gi"))',
        '!(device.driver == "a" || device.driver == "b") && '
        'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))',
        'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("565.0.0")) >= 0',
        "(" * (MAX_DEPTH - 1) + "true" + ")" * (MAX_DEPTH - 1),
    ],
)
def test_fragment_accepted(fragment: str) -> None:
    assert fragment_problem(fragment) is None


@pytest.mark.parametrize(
    ("fragment", "reason"),
    [
        (
            "true) || (true",
            "the ')' at position 5 closes a parenthesis the fragment did not open, so it would escape the class's own "
            "condition",
        ),
        ("true ||", "ends early: expected more"),
        ("", "is empty: remove it or write a condition"),
        ('device.driver == "x" true', "'true' at position 22 follows a complete expression"),
        (
            'device.driver == "x\\")',
            "the string at position 18 is not closed, or holds more than 256 characters or characters other than "
            "letters, digits, spaces and ._/:+=-",
        ),
        ("device.name == 1", "device.name at position 8 is not a device field: use driver, attributes or capacity"),
        (
            "1 == 1 || 7",
            "'7' at position 11 is an int, not a condition: the API server refuses a selector that is not boolean; "
            "compare it with ==, <, >, ... or a method",
        ),
        (
            'device.attributes["gpu.nvidia.com"].uuid.matches("a")',
            "method matches at position 42 is not allowed: use one of compareTo, contains, endsWith, isGreaterThan, "
            "isLessThan, startsWith",
        ),
        ("true \u2227 false", "character U+2227 at position 6 is not allowed in the fragment"),
        ("(" * (MAX_DEPTH + 1) + "true" + ")" * (MAX_DEPTH + 1), f"nests deeper than {MAX_DEPTH} levels"),
        ("true && " * 200 + "true", f"is 1604 characters long; the limit is {MAX_LENGTH}"),
    ],
)
def test_fragment_refused_with_the_reason(fragment: str, reason: str) -> None:
    assert fragment_problem(fragment) == reason


def test_mig_resource_names_are_what_the_device_plugin_advertises() -> None:
    assert mig_resource_name("1g.5gb") == "nvidia.com/mig-1g.5gb"
    assert mig_resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert all(is_tabulated_profile(p) for p in tabulated_profiles())
    assert not is_tabulated_profile("1g.5gb\n")
    assert not is_tabulated_profile("9g.999gb")
