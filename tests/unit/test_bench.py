"""The pure parts of the benchmarks: statistics, the growth fit, the synthetic stacks, state parsing."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from bench import at_5000, live_read
from bench.engine_bench import role_of
from bench.engine_worker import step_objects
from bench.proctree import descendants, memory_kib
from bench.stats import fit_exponent, ratio, segment_exponents, summarize
from bench.synthetic import synthetic_cohorts, synthetic_config, synthetic_document
from components.refusals import StackConfigError
from components.stack_loader import load_stack_config
from eks_hybrid_gpu.mocks import ROOT
from policy.gpu_allocation.rules import props as k8s_props
from policy.gpu_allocation.rules.ownership.single_owner import _first_of_each
from policy.gpu_allocation.vocab.labels import DEFAULT_COHORT_LABEL_KEY, PROJECT
from policy.gpu_allocation.vocab.selectors import Placement, placements_overlap

pytestmark = pytest.mark.unit


def test_summary_is_median_min_max() -> None:
    summary = summarize([3.0, 1.0, 2.0, 10.0])
    assert (summary.median, summary.min, summary.max, summary.runs) == (2.5, 1.0, 10.0, 4)
    assert summarize([4.0]).as_dict() == {"median": 4.0, "min": 4.0, "max": 4.0, "runs": 1}
    assert ratio(summarize([6.0]), summarize([3.0])) == 2.0
    with pytest.raises(ValueError, match="no measurements"):
        summarize([])


@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0])
def test_fit_recovers_a_power_law(exponent: float) -> None:
    xs = [1.0, 8.0, 32.0, 128.0]
    fit = fit_exponent(xs, [3.0 * x**exponent for x in xs])
    assert fit.exponent == pytest.approx(exponent)
    assert fit.coefficient == pytest.approx(3.0)
    assert fit.r_squared == pytest.approx(1.0)


def test_fit_of_fixed_cost_plus_linear_is_sublinear() -> None:
    xs = [1.0, 8.0, 32.0, 128.0]
    fit = fit_exponent(xs, [1.0 + 0.01 * x for x in xs])
    assert 0 < fit.exponent < 1
    assert fit.r_squared < 1


def test_fit_refuses_what_has_no_slope() -> None:
    with pytest.raises(ValueError, match="positive"):
        fit_exponent([1.0, 2.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="at least two"):
        fit_exponent([1.0], [1.0])
    with pytest.raises(ValueError, match="equal"):
        fit_exponent([2.0, 2.0], [1.0, 3.0])


def test_segment_exponents() -> None:
    xs = [1.0, 8.0, 32.0]
    assert segment_exponents(xs, [1.0, 8.0, 64.0]) == pytest.approx([1.0, 1.5])
    assert segment_exponents([1.0, 4.0], [2.0, 2.0]) == [0.0]
    assert math.isclose(segment_exponents([2.0, 4.0], [1.0, 4.0])[0], 2.0)


@pytest.mark.charts
@pytest.mark.parametrize("cohorts", [1, 2, 8, 32, 128])
def test_synthetic_stacks_pass_config_validation(cohorts: int) -> None:
    config = load_stack_config(synthetic_config(cohorts), ROOT)
    owners = [c.owner for c in config.cohorts]
    assert len(owners) == cohorts
    assert owners.count("dra") == (0 if cohorts == 1 else 1)
    assert owners.count("device-plugin") == (1 if cohorts == 1 else cohorts - 1)
    values = {c.selector(config.cohort_label_key)[DEFAULT_COHORT_LABEL_KEY] for c in config.cohorts}
    assert len(values) == cohorts  # disjoint selectors, through the cohort label value
    assert all(c.host_driver_verified for c in config.cohorts)


@pytest.mark.charts
def test_synthetic_stack_keeps_the_local_stack_settings() -> None:
    config = synthetic_config(8)
    assert config["cluster"]["source"] == "local"
    assert "archive" in config["charts"]["devicePlugin"]["source"]
    document = synthetic_document(8)
    assert document["config"][f"{PROJECT}:cohorts"] == synthetic_cohorts(8)
    assert f"{PROJECT}:cluster" in document["config"]


def test_a_synthetic_stack_without_cohorts_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one cohort"):
        synthetic_cohorts(0)


@pytest.mark.charts
def test_two_dra_cohorts_would_be_refused() -> None:
    """The generator adds one dra cohort because validation allows no more."""
    config = synthetic_config(3)
    config["cohorts"] = [*config["cohorts"], {**config["cohorts"][-1], "name": "dra-b"}]
    with pytest.raises(StackConfigError, match="second dra cohort"):
        load_stack_config(config, ROOT)


def _step(type_: str, custom: bool, inputs: dict[str, Any] | None) -> SimpleNamespace:
    new = SimpleNamespace(type=type_, custom=custom, inputs=inputs)
    return SimpleNamespace(resource_pre_event=SimpleNamespace(metadata=SimpleNamespace(new=new)))


def test_captured_objects_are_the_inputs_of_kubernetes_custom_resources() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}
    events = [
        SimpleNamespace(resource_pre_event=None),
        _step("pulumi:pulumi:Stack", False, {}),
        _step("pulumi:providers:kubernetes", True, {"kubeconfig": "x"}),
        _step("eks-hybrid-gpu:smoke:SmokeJob", False, {}),
        _step("kubernetes:helm.sh/v4:Chart", False, {"chart": "c"}),
        _step("kubernetes:batch/v1:Job", True, job),
    ]
    assert step_objects(events) == [job]


def test_process_roles() -> None:
    assert role_of(10, 10, "python3.11") == "program (worker python)"
    assert role_of(11, 10, "pulumi") == "pulumi CLI"
    assert role_of(12, 10, "pulumi-resource") == "kubernetes provider"
    assert role_of(13, 10, "python3.11") == "policy analyzer"


def test_the_process_tree_of_this_process() -> None:
    assert descendants(os.getpid())[0] == os.getpid()
    own = memory_kib(os.getpid())
    assert own is not None
    assert own > 0


# ---------------------------------------------------------------- the performance fixes the benchmark led to

SENTINELS = sorted(k8s_props._SENTINELS)
LEAVES = st.one_of(st.text(max_size=5), st.sampled_from(SENTINELS), st.integers(), st.booleans(), st.none())
PROPS = st.recursive(
    LEAVES,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=25,
)


def _plain_item_by_item(value: Any) -> Any:
    """policy.gpu_allocation.rules.props.plain before the fast path: every read goes through the proxy."""
    if isinstance(value, str):
        return k8s_props.UNKNOWN if value in k8s_props._SENTINELS else value
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key in list(value):
            try:
                result[str(key)] = _plain_item_by_item(value[key])
            except UnknownValueError:
                result[str(key)] = k8s_props.UNKNOWN
        return result
    if isinstance(value, Sequence):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                items.append(_plain_item_by_item(value[index]))
            except UnknownValueError:
                items.append(k8s_props.UNKNOWN)
        return items
    return value


@given(st.dictionaries(st.text(max_size=4), PROPS, max_size=5))
def test_plain_copies_proxied_props_as_item_by_item_reads_do(props: dict[str, Any]) -> None:
    assert k8s_props.plain(unknown_checking_proxy(props)) == _plain_item_by_item(unknown_checking_proxy(props))
    assert k8s_props.plain(props) == _plain_item_by_item(props)


SELECTORS = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]), max_size=3)
SOURCED = st.lists(st.tuples(SELECTORS.map(Placement.of), st.text(max_size=3)), max_size=6)


@given(SOURCED, SOURCED)
def test_first_overlap_is_found_among_first_occurrences(first: list[Any], second: list[Any]) -> None:
    def overlap(a_list: list[Any], b_list: list[Any]) -> Any:
        return next(((a, b) for a in a_list for b in b_list if placements_overlap(a[0], b[0])), None)

    assert overlap(_first_of_each(first), _first_of_each(second)) == overlap(first, second)


def test_live_sizes_are_nodes_slash_pods() -> None:
    assert live_read.parse_sizes("5/4, 55/512,") == [(5, 4), (55, 512)]
    assert live_read.parse_sizes(",".join(f"{n}/{p}" for n, p in live_read.SIZES)) == list(live_read.SIZES)


def _live_row(nodes: int, pods: int, scale: float) -> dict[str, Any]:
    """One size's figures: the whole reads grow by `scale`, the scoped ones stay."""

    def mode(grows: float, kept_pods: int) -> dict[str, Any]:
        wall = {"median": 0.1 * grows, "min": 0.1 * grows, "max": 0.1 * grows, "runs": 1}
        return {
            "wall_s": wall,
            "peak_rss_bytes": {**wall, "median": 70.0 * 2**20 * grows},
            "bytes_read": int(2**20 * grows),
            "requests": 11,
            "kept": {"nodes": 5, "pods": kept_pods},
        }

    modes = {m: mode(scale, pods) if "whole" in m else mode(1.0, 4) for m in live_read.MODES}
    return {"nodes": nodes, "pods": pods, "same_answers": {"preflight": True, "inspect": False}, "modes": modes}


def test_the_live_read_table_shows_every_mode_the_growth_and_the_idle_rates() -> None:
    rows = [_live_row(5, 4, 1.0), _live_row(55, 512, 8.0)]
    idle = {"5/4": {"before": {"requests_per_s": 11.4, "requests": 114, "seconds": 10.0}}}
    report = {"sizes": rows, "growth": live_read.growth(rows), "idle_device_manager": idle, "repeats": 1}

    text = "\n".join(live_read.lines(report))

    assert text.count("preflight-scoped") == 3  # two sizes and the growth line
    assert "    5/4      inspect-whole" in text
    assert text.count("NO") == 4  # inspect's answers differed at both sizes
    assert "preflight-scoped   wall 0.00, peak RSS 0.00, bytes read 0.00" in text
    assert "at 5/4: before (lists every 0.25 s) 11.40 req/s (114 in 10 s)" in text
    assert live_read.lines(None) == ["5. live read at scale skipped (--no-live-read)"]


def _series_row(gpu_node_pods: int) -> dict[str, Any]:
    """Scoped reads whose wall and bytes grow with the GPU nodes' pods, and whose RSS stays."""
    wall = {"median": 0.001 * gpu_node_pods, "min": 0.001 * gpu_node_pods, "max": 0.001 * gpu_node_pods, "runs": 1}
    mode = {
        "wall_s": wall,
        "cpu_s": {**wall, "median": 0.0005 * gpu_node_pods},
        "peak_rss_bytes": {**wall, "median": 80.0 * 2**20},
        "bytes_read": 4096 * gpu_node_pods,
        "kept": {"nodes": 5, "pods": gpu_node_pods},
    }
    return {"gpu_node_pods": gpu_node_pods, "modes": dict.fromkeys(live_read.SCOPED_MODES, mode)}


def test_the_gpu_node_series_fits_its_exponent_against_the_gpu_nodes_pods_and_shows_every_row() -> None:
    rows = [_series_row(n) for n in (4, 104, 504)]
    growth = live_read.series_growth(rows)
    assert growth["preflight-scoped"]["wall_s"] == pytest.approx(1.0)
    assert growth["inspect-scoped"]["peak_rss_bytes"] == pytest.approx(0.0, abs=1e-9)
    assert live_read.series_growth(rows[:1]) == {}  # one point fits no slope

    text = "\n".join(live_read.gpu_node_lines({"nodes": 505, "pods": 15079, "rows": rows, "growth": growth}))

    assert "at 505 nodes" in text
    assert "    504 preflight-scoped      0.504 [0.504–0.504]  0.252" in text  # wall, then the reader's own CPU
    assert text.count("inspect-scoped") == 4  # three rows and the exponent line
    assert "exponent against the GPU nodes' pods, preflight-scoped: wall 1.00, peak RSS 0.00, bytes read 1.00" in text
    assert live_read.gpu_node_lines(None) == []


def test_a_static_padding_node_weighs_what_an_eks_kubelets_node_does_and_selects_no_cohort() -> None:
    node, status = at_5000.static_node("static-node-00001")
    size = len(json.dumps({**node, **status}))
    assert 8 * 1024 < size < 16 * 1024  # the module's "about 11 KiB"
    labels = node["metadata"]["labels"]
    assert labels[live_read.PADDING_LABEL] == "true"
    assert not [k for k in labels if "nvidia" in k or ("eks-hybrid-gpu" in k and "bench" not in k)]
    assert "kwok.x-k8s.io/node" not in (node["metadata"].get("annotations") or {})  # no kubelet behind it


def test_the_5000_node_table_shows_both_reads_and_the_previews() -> None:
    wall = {"median": 0.5, "min": 0.4, "max": 0.6, "runs": 3}
    read = {"wall_s": wall, "peak_rss_bytes": {**wall, "median": 90.0 * 2**20}, "bytes_read": 2**20, "requests": 20}
    report = {
        "nodes": 5005,
        "pods": 150000,
        "grow_s": 400.0,
        "reads": {mode: {**read, "kept": {"nodes": 5, "pods": 4}} for mode in at_5000.SCOPED_MODES},
        "previews": {"walls": {"preflight": [3.1, 3.2, 3.3], "control": [2.9, 2.9, 3.0]}, "preflight_s": 0.61},
    }
    text = "\n".join(at_5000.lines(report))
    assert "At 5005 nodes / 150000 pods" in text
    assert text.count("-scoped") == 2
    assert "preflight 3.20 s [3.10–3.30], control 2.90 s [2.90–3.00]; the preflight inside it 0.61 s" in text
    assert at_5000.lines(None) == []


def test_a_reads_runs_become_medians_of_the_timed_figures_and_the_last_runs_counts() -> None:
    def run(wall: float, requests: int) -> dict[str, Any]:
        return {
            "wall_s": wall,
            "cpu_s": wall / 2,
            "peak_rss_bytes": 80.0 * 2**20,
            "rss_after_imports_bytes": 68.0 * 2**20,
            "bytes_read": 1000,
            "requests": requests,
            "answers": 2,
            "kept": {"nodes": 5, "pods": 4},
        }

    figures = live_read.read_figures([run(0.3, 12), run(0.1, 12), run(0.2, 13)])
    assert figures["wall_s"]["median"] == pytest.approx(0.2)
    assert (figures["wall_s"]["min"], figures["wall_s"]["max"]) == (pytest.approx(0.1), pytest.approx(0.3))
    assert figures["cpu_s"]["median"] == pytest.approx(0.1)
    assert figures["requests"] == 13  # the last run's count
    assert "0.200 [0.100–0.300]  0.100             80      0.00" in live_read.read_cells(figures)


def test_the_pack_cost_table_names_each_pack_its_ratio_and_its_start_up() -> None:
    from bench.pack_cost import render

    def summary(median: float) -> dict[str, float]:
        return {"median": median, "min": median - 0.1, "max": median + 0.1, "runs": 5}

    previews = {
        "ours": {"wall_s": summary(2.0), "cpu_s": summary(2.2), "cpu_by_role_s": {}},
        "ours+pack": {
            "wall_s": summary(2.4),
            "cpu_s": summary(2.7),
            "cpu_by_role_s": {"policy analyzer": summary(0.4)},
        },
    }
    result = {
        "rounds": 5,
        "load_start": (1.0, 1.0, 1.0),
        "load_end": (2.0, 2.0, 2.0),
        "previews": previews,
        "ratios": {"ours+pack": {"wall": 1.2, "cpu": 1.23, "paired_wall": summary(1.2)}},
        "analyzer_startup_s": {"ours+pack": summary(0.3)},
    }
    table = render(result)
    assert "ours+pack                     2.40 [2.30-2.50]" in table
    assert "0.40 [0.30-0.50]" in table
    assert "ours+pack / ours: wall 1.20 (per round 1.20 [1.10-1.30]), CPU 1.23; analyzer start-up 0.300" in table
