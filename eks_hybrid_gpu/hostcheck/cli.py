"""`eks-hybrid-gpu hostcheck`: step one of adding a GPU host to a cohort."""

import argparse
import sys
from pathlib import Path
from typing import Any, List, Optional, TextIO, cast

from eks_hybrid_gpu.hostcheck import collect, consumer_checks, floors, labels, report, stamp
from eks_hybrid_gpu.outputs import add_output_option, document_text
from policy.gpu_allocation.vocab.labels import (
    ALLOCATOR_LABEL,
    DEFAULT_COHORT_LABEL_KEY,
    DEVICE_PLUGIN,
    DRA,
    GPU_OPERATOR,
)

DESCRIPTION = (
    "Check a prepared NVIDIA GPU host against the compatibility floors of one allocation owner "
    "and print its inventory and node labels. The floors are compatibility floors, not "
    "recommendations. Exit 0 pass, 1 a floor not met, 2 cannot inspect."
)


def _driver_root(value: str) -> str:
    """An absolute folder without `..`: the DRA driver joins it with its search folders."""
    if not value.startswith("/") or ".." in value.split("/") or "\x00" in value:
        msg = f"{value!r} is not an absolute folder; give the chart's nvidiaDriverRoot, e.g. / or /run/nvidia/driver"
        raise argparse.ArgumentTypeError(msg)
    return value


class _Version(argparse.Action):
    """`--version` on one line, unwrapped (argparse's own version action wraps at the terminal's width)."""

    def __init__(self, option_strings: List[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=kwargs.get("help"))

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(stamp.line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The command line on its own, for `python -m eks_hybrid_gpu.hostcheck` on a host."""
    parser = argparse.ArgumentParser(prog="eks-hybrid-gpu hostcheck", description=DESCRIPTION)
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser, owner_required: bool = True) -> None:
    """`eks-hybrid-gpu hostcheck` options (`owner_required` False where another option can stand instead)."""
    parser.add_argument("--version", action=_Version, help="print the host check's version on one line and exit")
    parser.add_argument("--owner", required=owner_required, choices=floors.OWNERS, help="the cohort's allocation owner")
    add_output_option(parser, ("table", "json", "yaml"))
    parser.add_argument(
        "--mig",
        choices=("disabled", "enabled"),
        default="disabled",
        help="MIG mode the cohort expects on every GPU (default: disabled, full-GPU allocation)",
    )
    parser.add_argument("--cohort-label-key", default=DEFAULT_COHORT_LABEL_KEY)
    parser.add_argument("--cohort-label-value", help=f"default: the owner ({GPU_OPERATOR} for both Operator modes)")
    parser.add_argument(
        "--allocator",
        choices=(DEVICE_PLUGIN, DRA),
        help=(
            f"the cohort's {ALLOCATOR_LABEL} value, where its nodeSelector holds one (a DRA cohort that kept "
            "nvidia.com/gpu through migrate: dra); printed with the labels, to set when the host joins"
        ),
    )
    parser.add_argument("--root", type=Path, default=Path("/"), help="host filesystem root, e.g. /host in a Pod")
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("--nvidia-ctk", default="nvidia-ctk")
    parser.add_argument("--containerd", default="containerd")
    parser.add_argument("--containerd-config", default="/etc/containerd/config.toml")
    parser.add_argument(
        "--nvidia-driver-root",
        default="/",
        type=_driver_root,
        help="the DRA chart's nvidiaDriverRoot (default /): where the DRA owners' driver looks for libnvidia-ml.so.1",
    )
    parser.add_argument(
        "--cdi-dir",
        action="append",
        dest="cdi_dirs",
        help=("CDI spec directory (repeatable; default: containerd's cdi_spec_dirs, else /etc/cdi and /var/run/cdi)"),
    )


def check(
    sources: collect.Sources,
    owner: floors.Owner,
    mig: floors.MigExpectation = "disabled",
    cohort_key: str = DEFAULT_COHORT_LABEL_KEY,
    cohort_value: Optional[str] = None,
    allocator: Optional[str] = None,
) -> report.Outcome:
    """Inspect the host and judge it against the owner's floors."""
    facts = collect.collect(sources)
    error = floors.cannot_inspect(facts, owner)
    if error is not None:
        return report.Outcome(owner, mig, facts, (), error, {})
    value = cohort_value or floors.COHORT_VALUES[owner]
    return report.Outcome(
        owner,
        mig,
        facts,
        tuple(consumer_checks.extend(floors.evaluate(facts, owner, mig), facts, owner)),
        None,
        labels.node_labels(facts.gpu.gpus, cohort_key, value, allocator),
    )


def root_problem(root: Path) -> Optional[str]:
    """Why `--root` cannot be a host's /, in one line naming it; None when it is a folder."""
    if root.is_dir():
        return None
    what = "does not exist" if not root.exists() and not root.is_symlink() else "is not a directory"
    return (
        f"--root {root} {what}: give the folder where the host's / is (/ on the host itself, e.g. /host in a Pod "
        "that mounts it); nothing was checked"
    )


def main(
    argv: Optional[List[str]] = None,
    sources: Optional[collect.Sources] = None,
    stdout: Optional[TextIO] = None,
) -> int:
    """Run the host check; `sources` replaces the host for tests (its runner and root are kept)."""
    return run(build_parser().parse_args(argv), sources, stdout)


def run(args: argparse.Namespace, sources: Optional[collect.Sources] = None, stdout: Optional[TextIO] = None) -> int:
    """Check this host against the owner's floors and print the table, or the inventory as JSON or YAML."""
    if sources is None:
        problem = root_problem(args.root)
        if problem is not None:
            print(f"eks-hybrid-gpu hostcheck: {problem}", file=sys.stderr)
            return report.EXIT_CANNOT_INSPECT
    base = sources or collect.Sources()
    sources = collect.Sources(
        runner=base.runner,
        root=args.root if sources is None else base.root,
        nvidia_smi=args.nvidia_smi,
        nvidia_ctk=args.nvidia_ctk,
        containerd=args.containerd,
        containerd_config=args.containerd_config,
        cdi_dirs=tuple(args.cdi_dirs) if args.cdi_dirs else None,
        hostname=base.hostname,
        nvidia_driver_root=args.nvidia_driver_root,
    )
    outcome = check(
        sources,
        cast(floors.Owner, args.owner),
        cast(floors.MigExpectation, args.mig),
        args.cohort_label_key,
        args.cohort_label_value,
        args.allocator,
    )
    out = stdout or sys.stdout
    if args.output in ("json", "yaml"):
        out.write(document_text(report.inventory(outcome), args.output) + "\n")
    else:
        out.write(report.table(outcome))
    return outcome.exit_code
