"""The policy pack's cost per real preview, this tree's pack beside another checkout's, in interleaved rounds.

`python -m bench.pack_cost [--against DIR] [--rounds N]`: one local API server, the local stack, and per round a
preview without a pack, with this tree's `policy/analyzer` and (with `--against`) with the other checkout's
`policy/analyzer` (the same program, engine, provider and cluster; only the pack differs), the order rotated each
round (`bench.run._rounds`). Then each pack's analyzer start-up (exec to serving), interleaved too. Figures are the
median [min-max] of the rounds; a ratio is the median pack preview over the median preview without it, and the
paired ratios (one per round) give its spread.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import machine
from bench.analyzer_startup import startup_seconds
from bench.run import _ratios, _rounds, _summaries
from bench.stats import summarize
from eks_hybrid_gpu import projectdir

ANALYZER_ROLE = "policy analyzer"


def run(rounds: int, against: Path | None) -> dict[str, Any]:
    """Interleaved previews of the local stack without a pack, with this tree's and with `against`'s."""
    from bench.engine_bench import EngineArea

    packs = {"ours+pack": projectdir.policy_pack()}
    if against is not None:
        packs["ours+pack (against)"] = against / "policy" / "analyzer"
    result: dict[str, Any] = {"load_start": machine.load(), "rounds": rounds, "against": str(against or "")}
    with EngineArea() as area:
        area.operation("local", "preview", policy_pack=packs["ours+pack"])  # warm-up: CLI, provider, analyzer

        def preview(pack: Path | None) -> Callable[[], Any]:
            return lambda: area.operation("local", "preview", policy_pack=pack)

        variants = {"ours": preview(None), **{name: preview(pack) for name, pack in packs.items()}}
        found = _rounds(rounds, variants, "preview of the local stack")
    result["previews"] = {name: _summaries(runs) for name, runs in found.items()}
    result["ratios"] = {name: _ratios(found[name], found["ours"]) for name in packs}
    starts: dict[str, list[float]] = {name: [] for name in packs}
    for _ in range(max(5, rounds)):
        for name, pack in packs.items():
            starts[name].append(startup_seconds(pack))
    result["analyzer_startup_s"] = {name: summarize(values).as_dict() for name, values in starts.items()}
    result["load_end"] = machine.load()
    return result


def _s(summary: dict[str, float], digits: int = 2) -> str:
    return f"{summary['median']:.{digits}f} [{summary['min']:.{digits}f}-{summary['max']:.{digits}f}]"


def render(result: dict[str, Any]) -> str:
    """The table: wall and CPU per variant, the analyzer's CPU, each pack's ratios and start-up."""
    lines = [
        f"pack cost: real `pulumi preview` of the local stack, {result['rounds']} interleaved rounds "
        f"(load {result['load_start']} -> {result['load_end']})",
        f"{'variant':<24}{'wall s':>22}{'CPU s':>22}{'analyzer CPU s':>22}",
    ]
    for name, summary in result["previews"].items():
        analyzer = summary["cpu_by_role_s"].get(ANALYZER_ROLE)
        lines.append(
            f"{name:<24}{_s(summary['wall_s']):>22}{_s(summary['cpu_s']):>22}{(_s(analyzer) if analyzer else '-'):>22}"
        )
    for name, ratio in result["ratios"].items():
        start = result["analyzer_startup_s"][name]
        lines.append(
            f"{name} / ours: wall {ratio['wall']:.2f} (per round {_s(ratio['paired_wall'])}), CPU {ratio['cpu']:.2f}; "
            f"analyzer start-up {_s(start, 3)} s"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run, print, write the JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.pack_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, default=None, help="another checkout whose policy/ pack to compare")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--json", type=Path, default=None, help="where to write the results (default: none)")
    args = parser.parse_args(argv)
    if args.against is not None and not (args.against / "policy" / "analyzer").is_file():
        print(f"--against {args.against}: no policy/analyzer there; give a checkout of this project", file=sys.stderr)
        return 2
    result = run(args.rounds, args.against)
    result["table"] = render(result)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(result["table"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
