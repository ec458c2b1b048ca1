"""A command's `pulumi up`, as `pulumi up` itself runs one: the plan first, one question, then the update.

`local up` and `simulate up` change a cluster through the engine. Without `--yes` they print the preview (with the
policy pack, so a refusal shows before anything changes) and ask on the terminal, as `pulumi up` does; with `--yes`
they update at once (the update's own output lists each step), as `pulumi up --yes --skip-preview` does. With no
terminal and no `--yes` the command has already refused (eks_hybrid_gpu.confirm.refusal) before it changed anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eks_hybrid_gpu import engine
from eks_hybrid_gpu.confirm import Confirm
from eks_hybrid_gpu.engine_interrupt import interruptible


def planned_up(stack: Any, confirm: Confirm | None, say: Callable[[str], None], where: str) -> Any | None:
    """The stack's `pulumi up` result; None when the question was answered no (nothing changed by the engine).

    `confirm` None: `--yes`, no preview and no question. `where` names the cluster the update changes, for the
    question. Ctrl-C inside the preview or the update: EngineInterrupted, once the engine has stopped.
    """
    packs = engine.policy_packs()
    if confirm is not None:
        say(f"Previewing the update of stack {stack.name} (the plan; nothing changes yet):")
        interruptible(
            f"the preview of stack {stack.name}",
            lambda: stack.preview(on_output=say, color="never", policy_packs=packs),
            changes=False,
        )
        if not confirm(f"Perform this update of stack {stack.name} on {where}?"):
            return None
    return interruptible(
        f"`pulumi up` of stack {stack.name}", lambda: stack.up(on_output=say, color="never", policy_packs=packs)
    )
