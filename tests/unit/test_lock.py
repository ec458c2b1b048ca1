"""requirements.lock holds every pin of pyproject.toml with hashes: a pin changed without scripts/lock.sh fails."""

from __future__ import annotations

import re
import tomllib

import pytest

from eks_hybrid_gpu.mocks import ROOT

pytestmark = pytest.mark.unit


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


def test_every_pin_of_pyproject_is_locked_at_its_version_with_hashes() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    locked = _locked()
    for pin in pins:
        name, version = pin.split("==")
        assert locked.get(_normal(name), ("missing", 0))[0] == version, (
            f"{pin} is not in requirements.lock at that version: run scripts/lock.sh and commit requirements.lock"
        )
    assert all(hashes > 0 for _version, hashes in locked.values())
    assert "setuptools" in locked  # the build backend of bootstrap's --no-build-isolation install
