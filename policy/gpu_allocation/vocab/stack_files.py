"""Where a stack's config file lives in the project, and the stack names that find it: built here only.

The program names it in its refusals, the commands read and write it, and the host check's package must stay
standard library only, so the path lives in the leaf vocabulary every layer may import.

A stack is named as the Pulumi CLI takes it: `prod`, `myorg/prod` or `myorg/myproject/prod`. Its config file is
`Pulumi.<stack>.yaml` after the last segment, as Pulumi's own (`pulumi config` of `myorg/myproject/prod` reads
`Pulumi.prod.yaml`).
"""

import re
from typing import TYPE_CHECKING, Optional, Tuple

if TYPE_CHECKING:
    from typing import Final

STACKS_DIR: "Final" = "stacks"
"""The project folder that holds `Pulumi.<stack>.yaml`, one per stack."""

_SEGMENT: "Final" = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}"
STACK_REF: "Final" = re.compile(rf"(?:(?P<org>{_SEGMENT})/(?:(?P<project>{_SEGMENT})/)?)?(?P<stack>{_SEGMENT})")
"""`[ORG/][PROJECT/]STACK`, each segment Pulumi's name grammar (letters, digits, '-', '_', '.'; up to 100),
starting with a letter or digit: never `.`, `..` or an empty segment. Full-matched; the ranges are ASCII."""

STACK_REF_RULE: "Final" = (
    "STACK, ORG/STACK or ORG/PROJECT/STACK, each part letters, digits, '-', '_' and '.', at most 100 characters, "
    "starting with a letter or digit"
)


def stack_parts(ref: str) -> "Optional[Tuple[Optional[str], Optional[str], str]]":
    """(org, project, stack) of a stack name as Pulumi takes it, or None when it is not one.

    `a/b` is ORG/STACK, as `pulumi stack select a/b` reads it; `a/b/c` is ORG/PROJECT/STACK.
    """
    found = STACK_REF.fullmatch(ref)
    if found is None or ".." in ref:
        return None
    return found.group("org"), found.group("project"), found.group("stack")


def short_name(stack: str) -> str:
    """The stack's own name, without ORG/ or ORG/PROJECT/: what names its file, and its stack in a private backend."""
    return stack.rsplit("/", 1)[-1]


def stack_file_name(stack: str) -> str:
    """`stacks/Pulumi.<stack>.yaml`, relative to the project; an org-qualified name's file is its last segment's."""
    return f"{STACKS_DIR}/Pulumi.{short_name(stack)}.yaml"
