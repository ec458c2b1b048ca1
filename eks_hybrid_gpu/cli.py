"""`eks-hybrid-gpu`: the project's commands."""

from __future__ import annotations

import sys

USAGE = """usage: eks-hybrid-gpu <command> [args]

commands:
  local up|down|status   run the main job on the local default (loopback API server + pulumi up)
  hostcheck [--owner ...] [--json]
                         check a GPU host before it joins a cohort (run on the host)
"""


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a command; each command module is imported only when used."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "local":
        from eks_hybrid_gpu import local  # noqa: PLC0415

        return local.main(rest)
    if command == "hostcheck":
        from eks_hybrid_gpu.hostcheck import main as hostcheck  # noqa: PLC0415

        return hostcheck(rest)
    print(f"unknown command '{command}'\n\n{USAGE}", file=sys.stderr)
    return 2
