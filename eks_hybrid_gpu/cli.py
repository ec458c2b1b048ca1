"""`eks-hybrid-gpu`: the project's commands."""

from __future__ import annotations

import sys

USAGE = """usage: eks-hybrid-gpu <command> [args]

commands:
  local up [--chart-mirror DIR] | down | status
                         run the main job on the local default (loopback cluster with simulated
                         GPU nodes run by kwok + pulumi up)
  hostcheck [--owner ...] [--json]
                         check a GPU host before it joins a cohort (run on the host)
  simulate start|stop|apply|clear|show|finish|reap|preview|up|destroy [...]
                         simulated GPU cohorts on the local cluster, to rehearse a cohort change
  inspect [--kubeconfig PATH] [--context C] [--namespace NS] [--json]
                         DRA ResourceSlices and ResourceClaims, and which owner serves each GPU node
  smoke [--kubeconfig PATH] [--context C] [--out DIR] [--verify-cleanup] [--json]
                         smoke Job state, results captured before their TTL, claim release check
  review [--stack NAME] [--base REF] [--out DIR] [--chart-mirror DIR]
                         render the stack at the working tree and at REF: sorted object tree, diff, summary.md
"""


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a command; each command module is imported only when used."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "local":
        from eks_hybrid_gpu import local

        return local.main(rest)
    if command == "hostcheck":
        from eks_hybrid_gpu.hostcheck import main as hostcheck

        return hostcheck(rest)
    if command == "simulate":
        from eks_hybrid_gpu import simulate

        return simulate.main(rest)
    if command == "inspect":
        from eks_hybrid_gpu import inspect

        return inspect.main(rest)
    if command == "smoke":
        from eks_hybrid_gpu import smoke

        return smoke.main(rest)
    if command == "review":
        from eks_hybrid_gpu.review import main as review

        return review(rest)
    print(f"unknown command '{command}'\n\n{USAGE}", file=sys.stderr)
    return 2
