#!/usr/bin/env python3
"""Run every benchmark, print the table and write the JSON (issue 8).

    .venv/bin/python -m bench [--quick] [--json PATH] [--no-engine] [--no-construction] [--scaling 8,32]
                              [--no-live-read] [--live-sizes 5/4,55/512]
    bench/run.py ...                                   (the same)

See bench/README.md for what each figure measures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
if (
    __name__ == "__main__"
    and VENV_PYTHON.exists()
    and Path(sys.prefix).resolve() != VENV_PYTHON.parent.parent.resolve()
):
    # `bench/run.py` started by another interpreter: the workers need the project's virtual environment.
    os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]])  # noqa: S606
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import at_5000, live_read, machine, preview_at_scale, wait_requests  # noqa: E402
from bench.stats import fit_exponent, segment_exponents, summarize  # noqa: E402
from eks_hybrid_gpu import engine  # noqa: E402

DEFAULT_JSON = ROOT / "bench" / "results" / "latest.json"
COHORT_POINTS = (1, 8, 32, 128)
MIB = 1024 * 1024


def _progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- construction


def construction(points: Sequence[int], repeats: int) -> dict[str, Any]:
    """Construction under mocks: one fresh worker per run, `repeats` runs per cohort count."""
    rows = []
    for cohorts in points:
        runs = []
        for rep in range(repeats):
            _progress(f"construction: {cohorts} cohort(s), run {rep + 1}/{repeats}")
            result = subprocess.run(
                [sys.executable, "-m", "bench.construct", str(cohorts)],
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
            )
            runs.append(json.loads(result.stdout.strip().splitlines()[-1]))
        rows.append(
            {
                "cohorts": cohorts,
                "registrations": runs[-1]["registrations"],
                "wall_s": summarize([r["wall_s"] for r in runs]).as_dict(),
                "cpu_s": summarize([r["cpu_s"] for r in runs]).as_dict(),
                "gc_s": summarize([r["gc_s"] for r in runs]).as_dict(),
                "peak_bytes": summarize([r["peak_bytes"] for r in runs]).as_dict(),
                "runs": runs,
            }
        )
    for row in rows:
        row["cpu_without_gc_s"] = summarize([r["cpu_s"] - r["gc_s"] for r in row["runs"]]).as_dict()
    xs = [float(row["cohorts"]) for row in rows]
    growth = {}
    for figure in ("wall_s", "cpu_s", "cpu_without_gc_s", "peak_bytes"):
        ys = [row[figure]["median"] for row in rows]
        fit = fit_exponent(xs, ys)
        growth[figure] = {
            "exponent": fit.exponent,
            "r_squared": fit.r_squared,
            "segments": segment_exponents(xs, ys),
        }
    return {"repeats": repeats, "points": rows, "growth": growth}


# ---------------------------------------------------------------- engine


PROGRAM_ROLE = "program (worker python)"
ROLES = (PROGRAM_ROLE, "pulumi CLI", "kubernetes provider", "policy analyzer")


def _summaries(results: list[Any]) -> dict[str, Any]:
    memory: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for result in results:
        for role, kib in result.peak_by_role_kib.items():
            memory.setdefault(role, []).append(kib * 1024)
        for role, seconds in result.cpu_by_role_s.items():
            cpu.setdefault(role, []).append(seconds)
        cpu.setdefault(PROGRAM_ROLE, []).append(result.program_cpu_s)
    return {
        "wall_s": summarize([r.wall_s for r in results]).as_dict(),
        "cpu_s": summarize([r.cpu_s for r in results]).as_dict(),
        "engine_cpu_s": summarize([r.engine_cpu_s for r in results]).as_dict(),
        "peak_tree_bytes": summarize([r.peak_tree_kib * 1024 for r in results]).as_dict(),
        "peak_by_role_bytes": {role: summarize(values).as_dict() for role, values in sorted(memory.items())},
        "cpu_by_role_s": {role: summarize(values).as_dict() for role, values in sorted(cpu.items())},
        "changes": results[-1].changes,
        "samples": [r.samples for r in results],
        "runs": [
            {
                "wall_s": r.wall_s,
                "program_cpu_s": r.program_cpu_s,
                "engine_cpu_s": r.engine_cpu_s,
                "peak_tree_bytes": r.peak_tree_kib * 1024,
                "worker_setup_s": r.setup_s,
            }
            for r in results
        ],
    }


def _ratios(numerator: list[Any], denominator: list[Any]) -> dict[str, Any]:
    """Ratio of the medians, and the spread of the per-round (interleaved, so paired) ratios."""
    paired = [a.wall_s / b.wall_s for a, b in zip(numerator, denominator, strict=True)]
    median_ratio = summarize([a.wall_s for a in numerator]).median / summarize([b.wall_s for b in denominator]).median
    cpu_ratio = summarize([a.cpu_s for a in numerator]).median / summarize([b.cpu_s for b in denominator]).median
    return {"wall": median_ratio, "paired_wall": summarize(paired).as_dict(), "cpu": cpu_ratio}


def _rounds(repeats: int, variants: dict[str, Callable[[], Any]], label: str) -> dict[str, list[Any]]:
    """`repeats` rounds of every variant, the order rotated each round so that load drifts hit all alike."""
    names = list(variants)
    results: dict[str, list[Any]] = {name: [] for name in names}
    for rep in range(repeats):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for name in order:
            _progress(f"{label}: {name}, round {rep + 1}/{repeats}")
            results[name].append(variants[name]())
    return results


def _capture(area: Any, stack: str, record: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """One untimed preview of `stack` that captures its Kubernetes objects (and, with `record`, the policy
    requests, through the recording pack). It doubles as the warm-up of CLI, provider and analyzer.
    """
    from bench.engine_bench import RECORDING_PACK

    objects_file = area.base / f"{stack}.objects.json"
    _progress(f"capture: preview of stack {stack}" + (" with the recording policy pack" if record else ""))
    preview = area.operation(
        stack, "preview", policy_pack=RECORDING_PACK if record else None, record=record, capture=objects_file
    )
    objects = json.loads(objects_file.read_text())
    return objects_file, {
        "preview_wall_s": preview.wall_s,
        "steps": preview.changes,
        "objects": len(objects),
        "object_kinds": sorted({f"{o.get('apiVersion')}/{o.get('kind')}" for o in objects}),
    }


def _compare(area: Any, stack: str, objects_file: Path, repeats: int, label: str) -> dict[str, Any]:
    """Interleaved previews of `stack` without and with the pack and of its ConfigGroup baseline."""
    from eks_hybrid_gpu import projectdir

    baseline = f"{stack}-configgroup"
    projectdir.stack_file(baseline, area.work_dir).write_text("config: {}\n")
    variants: dict[str, Callable[[], Any]] = {
        "ours": lambda: area.operation(stack, "preview"),
        "ours+pack": lambda: area.operation(stack, "preview", policy_pack=projectdir.policy_pack()),
        "configgroup": lambda: area.operation(baseline, "preview", program="configgroup", objects=objects_file),
    }
    results = _rounds(repeats, variants, label)
    return {
        "previews": {name: _summaries(found) for name, found in results.items()},
        "ratios": {
            "policy_pack": _ratios(results["ours+pack"], results["ours"]),
            "abstraction": _ratios(results["ours"], results["configgroup"]),
            "abstraction_with_pack": _ratios(results["ours+pack"], results["configgroup"]),
        },
    }


def engine_benchmarks(repeats: int, policy_repeats: int, scaling: Sequence[int]) -> dict[str, Any]:
    """Capture run, interleaved previews, policy replay and the same comparison for bigger stacks."""
    from bench.analyzer_startup import startup_seconds
    from bench.engine_bench import EngineArea
    from bench.policy_cost import measure as policy_measure

    report: dict[str, Any] = {}
    with EngineArea() as area:
        report["cluster_start_s"] = area.cluster_start_s
        assert area.toolchain is not None
        pulumi_binary = next(
            (str(Path(p) / "pulumi") for p in area.toolchain.path_entries if (Path(p) / "pulumi").exists()), None
        )
        report["pulumi_cli"] = machine.pulumi_version(pulumi_binary) if pulumi_binary else None
        record = area.base / "policy-requests.jsonl"
        objects_file, report["capture"] = _capture(area, "local", record)
        report.update(_compare(area, "local", objects_file, repeats, "preview of the local stack"))

        _progress("policy: analyzer start-up")
        report["analyzer_startup_s"] = summarize([startup_seconds() for _ in range(max(3, repeats))]).as_dict()
        _progress("policy: replaying the recorded requests")
        report["policy"] = policy_measure(record, policy_repeats)

        growth = []
        for cohorts in scaling:
            name = f"synthetic-{cohorts}"
            area.add_synthetic_stack(name, cohorts)
            objects_file, capture = _capture(area, name)
            found = _compare(area, name, objects_file, max(1, repeats - 1), f"preview of {cohorts} cohorts")
            growth.append({"cohorts": cohorts, "capture": capture, **found})
        report["growth"] = growth
    return report


# ---------------------------------------------------------------- table


def _s(summary: dict[str, float], scale: float = 1.0, digits: int = 2) -> str:
    return (
        f"{summary['median'] * scale:.{digits}f} "
        f"[{summary['min'] * scale:.{digits}f}–{summary['max'] * scale:.{digits}f}]"
    )


def render(results: dict[str, Any]) -> str:
    """The human-readable table."""
    m = results["machine"]
    lines = [
        f"eks-hybrid-gpu benchmarks, {results['finished']} ({'--quick' if results['quick'] else 'full'} run, "
        f"{results['runtime_s']:.0f} s)",
        f"machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Linux {m['kernel']}; "
        f"Python {m['python']}; pulumi CLI {m['pulumi_cli']}, SDK {m['pulumi_sdk']}, "
        f"pulumi-kubernetes {m['pulumi_kubernetes_sdk']}, pulumi-policy {m['pulumi_policy_sdk']}",
        "load (os.getloadavg, 1/5/15 min): start {}, end {}; other work on the machine shares the 2 cores".format(
            "/".join(map(str, results["load_start"])), "/".join(map(str, results["load_end"]))
        ),
        "figures: median [min–max] of the runs",
        "",
    ]
    c = results.get("construction")
    if not c:
        lines += ["1. construction benchmark skipped (--no-construction)", ""]
    else:
        lines += _construction_lines(c)
    lines += _engine_lines(results.get("engine"))
    lines += ["", *live_read.lines(results.get("live_read"))]
    if results.get("waits"):
        lines += ["", "6. " + "\n".join(wait_requests.lines(results["waits"]))]
    if results.get("preview_at_scale"):
        lines += ["", "7. " + "\n".join(preview_at_scale.lines(results["preview_at_scale"]))]
    if results.get("at_5000"):
        lines += ["", "8. " + "\n".join(at_5000.lines(results["at_5000"]))]
    return "\n".join(lines)


def _construction_lines(c: dict[str, Any]) -> list[str]:
    lines = [
        f"1. Program construction under Pulumi mocks (validation + component graph; fresh interpreter per run, "
        f"{c['repeats']} runs)",
        f"{'cohorts':>8} {'resources':>10} {'wall s':>22} {'CPU s':>22} {'of it GC s':>12} {'peak MiB':>22}",
    ]
    for row in c["points"]:
        lines.append(
            f"{row['cohorts']:>8} {row['registrations']:>10} {_s(row['wall_s'], digits=3):>22} "
            f"{_s(row['cpu_s'], digits=3):>22} {row['gc_s']['median']:>12.3f} "
            f"{_s(row['peak_bytes'], 1 / MIB, 1):>22}"
        )
    g = c["growth"]
    seg = ", ".join(f"{x:.2f}" for x in g["wall_s"]["segments"])
    lines += [
        f"growth exponent 1→128 cohorts (least squares, log-log): wall {g['wall_s']['exponent']:.2f} "
        f"(r² {g['wall_s']['r_squared']:.3f}), CPU {g['cpu_s']['exponent']:.2f}, "
        f"peak memory {g['peak_bytes']['exponent']:.2f}",
        f"  local exponents between neighbouring points (1→8, 8→32, 32→128): wall {seg}; CPU without GC "
        + ", ".join(f"{x:.2f}" for x in g["cpu_without_gc_s"]["segments"]),
        "",
    ]
    return lines


def _engine_lines(e: dict[str, Any] | None) -> list[str]:
    if not e:
        return ["2.-4. engine benchmarks skipped (--no-engine)"]
    lines: list[str] = []
    p = e["previews"]
    runs = p["ours"]["wall_s"]["runs"]
    lines += [
        f"2. Real `pulumi preview` of the local stack (2 cohorts, {sum(p['ours']['changes'].values())} steps) "
        f"against one local Kubernetes {engine.default_kube_version().removeprefix('v')} API server, empty cluster; "
        f"{runs} interleaved rounds",
        f"{'variant':<36} {'wall s':>20} {'CPU s':>20} {'peak tree MiB':>22}",
    ]
    names = {
        "ours": "ours, no policy pack",
        "ours+pack": "ours + policy pack",
        "configgroup": f"ConfigGroup baseline ({e['capture']['objects']} objects)",
    }
    for key, label in names.items():
        row = p[key]
        lines.append(
            f"{label:<36} {_s(row['wall_s']):>20} {_s(row['cpu_s']):>20} {_s(row['peak_tree_bytes'], 1 / MIB, 0):>22}"
        )
    lines.append(
        f"  {'by process, median CPU s / peak MiB':<34}" + "".join(f"{role.split(' (')[0]:>20}" for role in ROLES)
    )
    for key, label in names.items():
        cells = []
        for role in ROLES:
            cpu_s = p[key]["cpu_by_role_s"].get(role)
            mem = p[key]["peak_by_role_bytes"].get(role)
            cells.append(f"{cpu_s['median']:.2f} / {mem['median'] / MIB:.0f}" if cpu_s and mem else "–")
        lines.append(f"  {label.split(' (')[0]:<34}" + "".join(f"{cell:>20}" for cell in cells))
    r = e["ratios"]
    lines += [
        f"policy pack's cost   (ours + pack / ours):        wall {r['policy_pack']['wall']:.2f} "
        f"(per round {_s(r['policy_pack']['paired_wall'])}), CPU {r['policy_pack']['cpu']:.2f}",
        f"abstraction overhead (ours / ConfigGroup):        wall {r['abstraction']['wall']:.2f} "
        f"(per round {_s(r['abstraction']['paired_wall'])}), CPU {r['abstraction']['cpu']:.2f}",
        f"both                 (ours + pack / ConfigGroup): wall {r['abstraction_with_pack']['wall']:.2f}, "
        f"CPU {r['abstraction_with_pack']['cpu']:.2f}",
        "",
    ]
    pol = e["policy"]
    lines += [
        f"3. Policy evaluation, replayed on the {pol['resources']} Analyze + {pol['stack_requests']} AnalyzeStack "
        f"requests the engine sent during the capture preview ({pol['resource_policies']} resource + "
        f"{pol['stack_policies']} stack policies; median of {pol['repeats']} replays)",
        f"  per resource, analyzer (SDK deserialization per policy + validators): "
        f"{_s(pol['per_resource_analyzer_s'], 1000)} ms; validators alone: "
        f"{_s(pol['per_resource_validators_s'], 1000)} ms",
        f"  all resources: analyzer {pol['all_resources_analyzer_s'] * 1000:.0f} ms, validators "
        f"{pol['all_resources_validators_s'] * 1000:.0f} ms; stack policies: analyzer "
        f"{pol['stack_analyzer_s']['median'] * 1000:.0f} ms, validators "
        f"{pol['stack_validators_s']['median'] * 1000:.0f} ms",
        f"  live analyzer during the capture preview: {pol['live_analyze_total_s'] * 1000:.0f} ms over all Analyze "
        f"calls; analyzer start-up (exec to serving): {_s(e['analyzer_startup_s'])} s",
        "",
    ]
    growth = e.get("growth") or []
    if growth:
        lines += [
            "4. Both ratios as the stack grows (synthetic stacks: n-1 device-plugin cohorts + 1 dra cohort; "
            "previews as in 2.)",
            f"{'cohorts':>8} {'steps':>6} {'objects':>8} {'ours wall s':>20} {'+ pack wall s':>20} "
            f"{'ConfigGroup wall s':>20} {'pack':>6} {'abstr.':>7} {'pack CPU':>9} {'abstr. CPU':>11}",
        ]
        for cohorts, objects, row in [
            (2, e["capture"]["objects"], e),
            *[(g["cohorts"], g["capture"]["objects"], g) for g in growth],
        ]:
            pv, rt = row["previews"], row["ratios"]
            lines.append(
                f"{cohorts:>8} {sum(pv['ours']['changes'].values()):>6} {objects:>8} {_s(pv['ours']['wall_s']):>20} "
                f"{_s(pv['ours+pack']['wall_s']):>20} {_s(pv['configgroup']['wall_s']):>20} "
                f"{rt['policy_pack']['wall']:>6.2f} {rt['abstraction']['wall']:>7.2f} "
                f"{rt['policy_pack']['cpu']:>9.2f} {rt['abstraction']['cpu']:>11.2f}"
            )
    return lines


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Run, print, write."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 runs per construction point, 1 per preview")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"where to write the results ({DEFAULT_JSON})")
    parser.add_argument("--no-engine", action="store_true", help="only the construction benchmark (no engine)")
    parser.add_argument("--no-construction", action="store_true", help="only the engine benchmarks")
    parser.add_argument(
        "--scaling",
        default=None,
        help="comma-separated cohort counts of synthetic stacks whose previews show how both ratios grow "
        "(default 8; none with --quick; '' for none)",
    )
    parser.add_argument("--no-live-read", action="store_true", help="skip the live read at scale (section 5)")
    parser.add_argument(
        "--preview-at-scale",
        action="store_true",
        help="also time pulumi preview at 5 and 505 nodes (section 7; about 10 min on 2 cores)",
    )
    parser.add_argument(
        "--at-5000",
        action="store_true",
        help="also read and preview at 5,005 nodes / 150,000 pods (section 8; about 10 min, 4 GiB on 2 cores)",
    )
    parser.add_argument("--no-waits", action="store_true", help="skip the requests a move-host wait sends (section 6)")
    parser.add_argument(
        "--live-sizes",
        default=None,
        help="nodes/pods sizes of the live read at scale, comma-separated (default "
        + ",".join(f"{n}/{p}" for n, p in live_read.SIZES)
        + "; the first three with --quick)",
    )
    args = parser.parse_args(argv)
    construct_repeats, preview_repeats = (2, 1) if args.quick else (5, 3)
    scaling_text = args.scaling if args.scaling is not None else ("" if args.quick else "8")
    scaling = [int(x) for x in scaling_text.split(",") if x.strip()]

    started = time.perf_counter()
    results: dict[str, Any] = {"quick": args.quick, "load_start": machine.load()}
    if not args.no_construction:
        results["construction"] = construction(COHORT_POINTS, construct_repeats)
    if not args.no_engine:
        results["engine"] = engine_benchmarks(preview_repeats, 2 if args.quick else 5, scaling)
    if not args.no_live_read:
        quick_sizes = live_read.SIZES[:3] if args.quick else live_read.SIZES
        sizes = live_read.parse_sizes(args.live_sizes) if args.live_sizes is not None else list(quick_sizes)
        results["live_read"] = live_read.run(
            sizes,
            1 if args.quick else 3,
            idle_at_largest=not args.quick,
            gpu_node_pods=live_read.GPU_NODE_PODS[:2] if args.quick else live_read.GPU_NODE_PODS,
        )
    if args.preview_at_scale:
        results["preview_at_scale"] = preview_at_scale.run()
    if args.at_5000:
        results["at_5000"] = at_5000.run()
    if not args.no_waits:
        results["waits"] = wait_requests.run(6.0 if args.quick else wait_requests.SECONDS)
    results["machine"] = machine.describe((results.get("engine") or {}).get("pulumi_cli"))
    results["load_end"] = machine.load()
    results["runtime_s"] = time.perf_counter() - started
    results["finished"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    table = render(results)
    results["table"] = table
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(table)
    print(f"\n(results written to {args.json})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
