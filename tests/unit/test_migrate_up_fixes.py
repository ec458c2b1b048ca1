"""The fixes `migrate` adds to a failed `pulumi up` for what an interrupted update leaves behind."""

from __future__ import annotations

import pytest

from eks_hybrid_gpu.migrate.runner import with_fix

pytestmark = pytest.mark.unit
HINT = "`pulumi cancel --cwd /p --stack s --yes`"


def test_a_locked_stack_names_the_cancel_command() -> None:
    text = with_fix("error: the stack is currently locked by 1 lock(s)", HINT)
    assert text.endswith(f"clear its lock with {HINT}")


def test_a_server_side_apply_conflict_names_the_orphan_and_the_rerun() -> None:
    said = 'resource "urn:x" was not successfully created: Server-Side Apply field conflict detected.'
    text = with_fix(said, HINT)
    assert text.startswith(said)
    assert "left the object it was creating outside the stack's state" in text
    assert "delete it, then run the same command again" in text
    assert HINT not in text


def test_any_other_failure_is_left_as_it_is() -> None:
    assert with_fix("error: update failed", HINT) == "error: update failed"
