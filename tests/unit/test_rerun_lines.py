"""A rerun line acts on what the interrupted run acted on: the same cluster, context, ledger, stack and waits.

`move-host` and `migrate` print the command that continues after an interruption. Without `--context` it would
continue against the kubeconfig's current context, which may be another cluster by then.
"""

from __future__ import annotations

import argparse

from eks_hybrid_gpu import migrate, movehost


def _parse(module: object, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)  # type: ignore[attr-defined]
    return parser.parse_args(argv)


def test_move_host_rerun_keeps_every_flag_that_names_the_cluster() -> None:
    flags = ["--to", "dra", "--drain", "--kubeconfig", "/k", "--context", "prod-east"]
    args = _parse(movehost, ["n1", *flags, "--ledger", "team/ledger", "--timeout", "30"])
    assert movehost.MoveRequest.from_args(args).rerun() == (
        "eks-hybrid-gpu move-host n1 --to dra --drain --kubeconfig /k --context prod-east --ledger team/ledger "
        "--timeout 30.0"
    )


def test_move_host_rerun_leaves_defaults_out() -> None:
    assert (
        movehost.MoveRequest.from_args(_parse(movehost, ["n1", "--to", "dra"])).rerun()
        == "eks-hybrid-gpu move-host n1 --to dra"
    )


def test_migrate_rerun_keeps_every_flag_that_names_the_cluster_and_the_charts() -> None:
    args = _parse(
        migrate,
        [
            "--stack",
            "s",
            "--cohort",
            "c",
            "--to",
            "dra",
            "--context",
            "prod-east",
            "--chart-mirror",
            "/m",
            "--timeout=30",
        ],
    )
    assert migrate.MigrateRequest.from_args(args).rerun() == (
        "eks-hybrid-gpu migrate --stack s --cohort c --to dra --chart-mirror /m --context prod-east --timeout 30.0"
    )
    plain = _parse(migrate, ["--stack", "s", "--cohort", "c", "--to", "dra"])
    assert migrate.MigrateRequest.from_args(plain).rerun() == "eks-hybrid-gpu migrate --stack s --cohort c --to dra"
