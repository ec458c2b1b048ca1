"""Policy tests without an engine: build validation args, collect violations.

Props are sent through the same path the engine uses: a protobuf ``Struct`` (so every
number becomes a float), ``deserialize_properties`` and ``unknown_checking_proxy`` (so
unknown sentinels raise on access), exactly as ``_PolicyAnalyzerServicer.Analyze`` does."""

from __future__ import annotations

from collections.abc import Iterator

import pulumi
import pytest

from tests.support.policy_harness import (
    Harness,
)


@pytest.fixture(scope="session")
def harness() -> Harness:
    return Harness()


@pytest.fixture(autouse=True)
def no_stack_config() -> Iterator[None]:
    """Each test starts with no stack config, as an analyzer of a stack without config does.

    The pack reads the stack's config from ``pulumi.runtime`` (where the engine's ``PULUMI_CONFIG`` lands), and
    ``run_program`` leaves the last program's config there; a test that wants one sets it itself.
    """
    pulumi.runtime.set_all_config({})
    yield
    pulumi.runtime.set_all_config({})
