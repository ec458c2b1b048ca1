"""Policy tests without an engine: build validation args, collect violations.

Props are sent through the same path the engine uses: a protobuf ``Struct`` (so every
number becomes a float), ``deserialize_properties`` and ``unknown_checking_proxy`` (so
unknown sentinels raise on access), exactly as ``_PolicyAnalyzerServicer.Analyze`` does."""

from __future__ import annotations

import pytest

from tests.support.policy_harness import (
    Harness,
)


@pytest.fixture(scope="session")
def harness() -> Harness:
    return Harness()
