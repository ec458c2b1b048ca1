"""The one version reader, which the host check imports too: SemVer order, EKS builds, tool output."""

from __future__ import annotations

import itertools

import pytest
import semver

from eks_hybrid_gpu import chartmirror
from eks_hybrid_gpu.hostcheck import parse as host_parse
from policy.gpu_allocation.rules.dra.driver_gates import dra_minor
from policy.gpu_allocation.rules.drivers.chart_versions import version_problem
from policy.gpu_allocation.vocab import grammar, versioning

pytestmark = pytest.mark.unit

TABLE = [
    "0.5.0",
    "v0.5.0",
    "0.5.0-rc.1",
    "0.5.0-rc.2",
    "0.5.0-rc.10",
    "0.5.0-alpha",
    "0.5.0-alpha.1",
    "0.5.0-alpha.beta",
    "0.5.0-beta.11",
    "0.5.0+build.7",
    "0.4.1",
    "0.20.0",
    "v26.7.0",
    "1.0.0-01",
    "v1.34.4-eks-3025e55",
    "v1.34.2-eks-abc",
    "v1.31.9-eks-1",
    "v1.31.9+k3s1",
    "1.7.27-0ubuntu1~24.04.1",
    "2.0.5-1",
    "1.34",
    "v1.34",
    "1.34.x",
    "latest",
    "^0.5.0",
    "",
    "0.20.0\n",
    "\uff10.\uff12\uff10.\uff10",
    "v1.34.4-" + "a" * 130,
]
"""Versions as charts, clusters, kubelets and tools write them, and what is no version."""

SEMVER_ONLY = [v for v in TABLE if versioning.parse_exact(v) and "eks" not in v]


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations(SEMVER_ONLY, 2)))
def test_order_is_semver_precedence(a: str, b: str) -> None:
    left, right = versioning.parse_exact(a), versioning.parse_exact(b)
    assert left is not None
    assert right is not None
    ours = (left > right) - (left < right)
    assert ours == semver.Version.parse(a.removeprefix("v")).compare(b.removeprefix("v"))


@pytest.mark.parametrize(
    ("text", "release", "prerelease", "build"),
    [
        ("v1.34.4-eks-3025e55", (1, 34, 4), (), "eks-3025e55"),
        ("v1.34.2-eks-abc", (1, 34, 2), (), "eks-abc"),
        ("0.5.0-rc.1", (0, 5, 0), ("rc", 1), ""),
        ("2.0.5-1", (2, 0, 5), (1,), ""),
        ("v1.31.9+k3s1", (1, 31, 9), (), "k3s1"),
    ],
)
def test_eks_builds_are_releases_and_pre_releases_are_not(
    text: str, release: tuple[int, int, int], prerelease: tuple[object, ...], build: str
) -> None:
    found = versioning.parse(text)
    assert found is not None
    assert (found.release, found.prerelease, found.build) == (release, prerelease, build)


def test_an_eks_build_meets_its_release_floor_and_a_pre_release_does_not() -> None:
    floor = versioning.parse("1.34.2")
    assert floor is not None
    assert versioning.parse("v1.34.2-eks-abc") == floor
    assert versioning.parse("v1.34.2-eks-abc") >= floor  # type: ignore[operator]
    assert versioning.parse("1.34.2-rc.1") < floor  # type: ignore[operator]


def test_minor_only_needs_partial() -> None:
    assert versioning.parse("1.34") is None
    assert versioning.parse("1.34", partial=True) == versioning.parse("1.34.0")


def test_chart_mirror_takes_a_release_above_its_release_candidate() -> None:
    chosen, notice = chartmirror.pick_version("c", "0.6.0", ["0.5.0-rc.1", "0.5.0", "0.4.1", "0.10.0-rc.1"], local=True)
    assert chosen == "0.10.0-rc.1"
    chosen, notice = chartmirror.pick_version("c", "0.6.0", ["0.5.0-rc.1", "0.5.0", "0.4.1"], local=True)
    assert chosen == "0.5.0"
    assert notice is not None
    assert "uses c 0.5.0 instead" in notice


@pytest.mark.parametrize(
    ("version", "allow", "problem"),
    [
        ("0.5.0", False, None),
        ("v26.7.0", False, None),
        ("0.5.0+build.1", False, None),
        ("0.5.0-rc.1", False, "is a pre-release"),
        ("0.5.0-rc.1", True, None),
        ("0.5", True, "is a range or tag, not an exact version (no ^, ~, >, *, x, latest)"),
    ],
)
def test_chart_pins_read_pre_releases_through_the_reader(version: str, allow: bool, problem: str | None) -> None:
    assert version_problem("dra-driver-nvidia-gpu", version, allow_prerelease=allow) == problem


def test_grammar_and_driver_gates_use_the_reader() -> None:
    assert grammar.EXACT_VERSION is versioning.SEMVER
    assert dra_minor("v0.6.0-rc.1")[0] == (0, 6)
    assert dra_minor("0.5")[0] == (0, 5)


def test_the_host_check_reads_tool_output_through_the_reader() -> None:
    assert host_parse.find_tool_version("NVIDIA Container Toolkit CLI version 1.17.8\ncommit: abc") == "1.17.8"
    assert host_parse.find_tool_version("containerd github.com/containerd/containerd v1.7.27-1 abc") == "1.7.27-1"
    assert host_parse.version_tuple("1.18.0-rc.1") == (1, 18, 0)
    assert host_parse.find_tool_version("no version here") is None
