"""requirements.lock is the tested set: each runtime range is locked at its lower bound, each dev pin exactly.

A bound or pin changed without scripts/lock.sh fails here, and so does a runtime range without an upper bound.
"""

from __future__ import annotations

import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from eks_hybrid_gpu.mocks import ROOT

pytestmark = pytest.mark.unit

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
RELOCK = "run scripts/lock.sh and commit requirements.lock"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked() -> dict[str, tuple[str, int]]:
    """Package -> (version, number of hashes) as requirements.lock lists them."""
    text = (ROOT / "requirements.lock").read_text()
    found = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        head = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", block)
        if head:
            found[_normal(head.group(1))] = (head.group(2), block.count("--hash=sha256:"))
    return found


def _lower_bound(requirement: Requirement) -> str:
    """The version a requirement's `>=` or `==` names (each runtime requirement has exactly one)."""
    (bound,) = [s.version for s in requirement.specifier if s.operator in (">=", "==")]
    return bound


@pytest.mark.parametrize("line", PROJECT["project"]["dependencies"])
def test_each_runtime_range_is_locked_at_its_lower_bound_and_stops_before_a_major(line: str) -> None:
    requirement = Requirement(line)
    locked = _locked().get(_normal(requirement.name), ("missing", 0))[0]
    assert locked == _lower_bound(requirement), f"{line}: requirements.lock holds {locked}; {RELOCK}"
    operators = {s.operator for s in requirement.specifier}
    assert operators in ({">=", "<"}, {"=="}), f"{line}: give it a tested lower bound and an upper bound"
    for upper in (Version(s.version) for s in requirement.specifier if s.operator == "<"):
        assert upper > Version(locked)
        assert upper.release[1:] in ((), (0,), (0, 0)), f"{line}: the upper bound is a major release"


@pytest.mark.parametrize(
    "line", [*PROJECT["project"]["optional-dependencies"]["dev"], *PROJECT["build-system"]["requires"]]
)
def test_each_dev_pin_and_the_build_backend_are_locked_at_their_version(line: str) -> None:
    requirement = Requirement(line)
    assert _locked().get(_normal(requirement.name), ("missing", 0))[0] == _lower_bound(requirement), (
        f"{line} is not in requirements.lock at that version: {RELOCK}"
    )


def test_every_locked_package_has_hashes() -> None:
    locked = _locked()
    assert all(hashes > 0 for _version, hashes in locked.values())
    assert "setuptools" in locked  # the build backend of bootstrap's --no-build-isolation install
