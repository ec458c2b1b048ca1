"""Where a stack's config file lives in the project: built here only.

The program names it in its refusals, the commands read and write it, and the host check's package must stay
standard library only, so the path lives in the leaf vocabulary every layer may import.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Final

STACKS_DIR: "Final" = "stacks"
"""The project folder that holds `Pulumi.<stack>.yaml`, one per stack."""


def stack_file_name(stack: str) -> str:
    """`stacks/Pulumi.<stack>.yaml`, relative to the project."""
    return f"{STACKS_DIR}/Pulumi.{stack}.yaml"
