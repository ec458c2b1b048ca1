"""The typed stack config on its own: `load_stack_config` and `StackConfig`, without Pulumi."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from components import versions
from components.config import CONFIG_KEYS, ChartPin, Mig, NoSharing, StackConfig, TimeSlicing
from components.refusals import StackConfigError
from components.stack_loader import load_stack_config
from components.validation import ClusterFacts
from eks_hybrid_gpu.mocks import ROOT, stack_config
from tests.support import charts
from tests.support.configs import (
    AUTO_MODE_OPERATOR,
    DRA_COHORT,
    DRA_TOO_OLD,
    OPERATOR_COHORT,
    PLUGIN_COHORT,
    SEVERAL_PROBLEMS,
    SEVERAL_PROBLEMS_CONFIG,
    InvalidCase,
    _base_config,
    cohort,
    expected_problems,
    invalid_params,
    selector_for,
)

pytestmark = pytest.mark.unit

EKS_FACTS = ClusterFacts(kubernetes_version="1.34", auto_mode=False)


def _problems(raw: dict[str, Any], facts: ClusterFacts | None = None) -> list[str]:
    with pytest.raises(StackConfigError) as caught:
        load_stack_config(raw, ROOT, facts)
    return [str(p) for p in caught.value.problems]


# ---------------------------------------------------------------- valid configs


def test_base_config_gets_the_reviewed_defaults() -> None:
    config = load_stack_config(_base_config(), ROOT)

    assert config.charts.device_plugin == ChartPin(version="0.20.0")
    assert config.charts.dra_driver == ChartPin(version="0.5.0")
    assert config.charts.gpu_operator == ChartPin(version="v26.7.0")
    assert (config.namespaces.device_plugin, config.namespaces.dra_driver) == ("gpu-system", "gpu-dra-system")
    assert (config.namespaces.gpu_operator, config.namespaces.workloads) == ("gpu-operator", "ai-workloads")
    assert config.smoke_jobs.image == versions.SMOKE_IMAGE_PLACEHOLDER
    assert config.smoke_jobs.image == "registry.example.invalid/approved/gpu-smoke@sha256:" + "0" * 64
    assert config.smoke_jobs.approved_cohort is None
    assert config.smoke_jobs.active_deadline_seconds == 120
    assert config.smoke_jobs.ttl_seconds_after_finished == 600
    assert config.smoke_jobs.run_as_user == 65532
    assert config.smoke_jobs.probe is False
    assert config.runtime_class.name == "nvidia"
    assert config.runtime_class.hosts_have_nvidia_handler is False
    assert config.dra.large_gpu_memory == "40Gi"
    assert config.dra.feature_gates == {}
    assert config.dra.extra_selector is None
    assert config.operator.mode == "cluster-policy"
    assert config.operator.driver_enabled is False
    assert config.operator.toolkit_enabled is False
    assert config.operator.nfd_enabled is False
    assert config.cohort_label_key == "workload.example.com/gpu-allocation"
    assert config.cluster.preflight is False
    assert isinstance(config.cohorts, tuple)
    assert isinstance(config.cohorts[0].sharing, NoSharing)


def test_default_selector_is_hybrid_plus_the_owner_label_sorted_by_key() -> None:
    config = load_stack_config(_base_config(cohorts=[PLUGIN_COHORT, DRA_COHORT]), ROOT)

    assert list(config.cohorts[0].selector(config.cohort_label_key).items()) == [
        ("eks.amazonaws.com/compute-type", "hybrid"),
        ("workload.example.com/gpu-allocation", "device-plugin"),
    ]
    assert config.cohorts[1].selector(config.cohort_label_key) == selector_for("dra")


def test_explicit_selector_replaces_the_default() -> None:
    chosen = {"workload.example.com/gpu-allocation": "h200-a", "eks.amazonaws.com/compute-type": "hybrid"}
    config = load_stack_config(_base_config(cohorts=[cohort(PLUGIN_COHORT, nodeSelector=chosen)]), ROOT)

    assert list(config.cohorts[0].selector(config.cohort_label_key)) == [
        "eks.amazonaws.com/compute-type",
        "workload.example.com/gpu-allocation",
    ]
    assert config.cohorts[0].selector(config.cohort_label_key)["workload.example.com/gpu-allocation"] == "h200-a"


def test_custom_cohort_label_key_drives_the_default_selector() -> None:
    config = load_stack_config(_base_config(cohortLabelKey="example.com/gpu-owner"), ROOT)

    assert config.cohorts[0].selector(config.cohort_label_key) == {
        "eks.amazonaws.com/compute-type": "hybrid",
        "example.com/gpu-owner": "device-plugin",
    }


def test_sharing_variants_parse_to_their_models() -> None:
    raw = _base_config(
        cohorts=[
            cohort(PLUGIN_COHORT, sharing={"mode": "time-slicing", "replicas": 4}),
            cohort(
                PLUGIN_COHORT,
                name="mig",
                nodeSelector=selector_for("mig"),
                sharing={"mode": "mig", "migStrategy": "mixed", "gpuModel": "A100-40GB", "migProfile": "1g.5gb"},
            ),
        ]
    )
    config = load_stack_config(raw, ROOT)

    sliced, mig = config.cohorts
    assert isinstance(sliced.sharing, TimeSlicing)
    assert (sliced.sharing.replicas, sliced.sharing.rename_by_default) == (4, True)
    assert sliced.sharing.fail_requests_greater_than_one is True
    assert sliced.sharing_label == "time-slicing"
    assert isinstance(mig.sharing, Mig)
    assert (mig.sharing.mig_strategy, mig.sharing.mig_profile) == ("mixed", "1g.5gb")
    assert mig.sharing_label == "mig-mixed"
    assert config.cohorts_of("device-plugin") == [(0, sliced), (1, mig)]
    assert config.cohorts_of("dra") == []


@pytest.mark.parametrize("version", ["1.34.2", "1.34.4", "v1.34.2-eks-4f9d2c1", "1.35.0"])
def test_dra_accepts_declared_versions_from_1_34_2(version: str) -> None:
    raw = _base_config(cluster={"source": "local", "kubernetesVersion": version}, cohorts=[DRA_COHORT])

    assert load_stack_config(raw, ROOT).cohorts[0].owner == "dra"


@pytest.mark.parametrize("version", ["1.34", "1.35"])
def test_dra_accepts_eks_minor_versions_from_1_34(version: str) -> None:
    raw = _base_config(cluster={"source": "eks", "name": "hybrid-gpu", "region": "us-west-2"}, cohorts=[DRA_COHORT])

    config = load_stack_config(raw, ROOT, ClusterFacts(kubernetes_version=version, auto_mode=False))

    assert config.cluster.source == "eks"


def test_eks_facts_override_the_declared_version() -> None:
    raw = _base_config(
        cluster={"source": "eks", "name": "hybrid-gpu", "region": "us-west-2", "kubernetesVersion": "1.34.4"},
        cohorts=[DRA_COHORT],
    )

    assert _problems(raw, ClusterFacts(kubernetes_version="1.33", auto_mode=False)) == [
        "eks-hybrid-gpu:cluster.kubernetesVersion: " + DRA_TOO_OLD.format(version="1.33")
    ]


def test_declared_minor_only_version_is_not_enough_for_dra() -> None:
    raw = _base_config(cluster={"source": "local", "kubernetesVersion": "1.34"}, cohorts=[DRA_COHORT])

    assert _problems(raw) == ["eks-hybrid-gpu:cluster.kubernetesVersion: " + DRA_TOO_OLD.format(version="1.34")]


def test_device_plugin_needs_no_kubernetes_version() -> None:
    config = load_stack_config(_base_config(cluster={"source": "local"}), ROOT)

    assert config.cluster.kubernetes_version is None


def test_operator_with_disjoint_standalone_cohort_is_valid() -> None:
    raw = _base_config(cohorts=[OPERATOR_COHORT, PLUGIN_COHORT], operator={"devicePluginEnabled": False})

    config = load_stack_config(raw, ROOT)

    assert [c.owner for c in config.cohorts] == ["gpu-operator", "device-plugin"]


def test_approving_a_cohort_with_a_digest_image_is_valid() -> None:
    image = "registry.example.com/approved/gpu-smoke@sha256:" + "ab" * 32
    config = load_stack_config(_base_config(smokeJobs={"approvedCohort": "plugin", "image": image}), ROOT)

    assert config.smoke_jobs.approved_cohort == "plugin"
    assert config.smoke_jobs.image == image


@pytest.mark.charts
def test_archive_matching_its_pin_is_valid() -> None:
    archive = os.path.relpath(charts.dra_driver(), ROOT)
    raw = _base_config(cohorts=[DRA_COHORT], charts={"draDriver": {"version": "0.4.1", "source": {"archive": archive}}})

    source = load_stack_config(raw, ROOT).charts.dra_driver.source
    assert source is not None
    assert source.archive == archive


def test_unused_chart_source_is_not_checked() -> None:
    raw = _base_config(charts={"draDriver": {"version": "0.5.0", "source": {"archive": "charts/missing.tgz"}}})

    assert load_stack_config(raw, ROOT).cohorts_of("dra") == []


@pytest.mark.parametrize("version", ["0.20.0", "v26.7.0", "0.5.0-rc.1"])
def test_chart_pin_accepts_exact_versions(version: str) -> None:
    assert ChartPin(version=version).version == version


@pytest.mark.parametrize("version", ["^0.20", "~0.20.0", ">=0.20.0", "0.20", "latest", "0.20.*"])
def test_chart_pin_refuses_ranges(version: str) -> None:
    raw = _base_config(charts={"devicePlugin": {"version": version}})

    assert _problems(raw) == [
        f"eks-hybrid-gpu:charts.devicePlugin.version: '{version}' is not an exact chart version; pin one release "
        "such as 0.20.0"
    ]


@pytest.mark.parametrize(
    "stack",
    ["local", "device-plugin", "dra", "mixed", "operator-cluster-policy", "operator-gpu-cluster"],
)
def test_example_stack_files_are_valid(stack: str) -> None:
    raw = stack_config(stack)
    facts = EKS_FACTS if raw["cluster"]["source"] == "eks" else None

    config = load_stack_config(raw, ROOT, facts)

    assert all(c.host_driver_verified for c in config.cohorts)


def test_config_keys_are_the_stack_file_keys() -> None:
    assert CONFIG_KEYS == (
        "cluster",
        "cohortLabelKey",
        "cohorts",
        "operator",
        "charts",
        "namespaces",
        "dra",
        "runtimeClass",
        "smokeJobs",
        "cohortLabelGuard",
    )


@pytest.mark.parametrize("value", ["false", 0, None, [True]])
def test_cohort_label_guard_is_a_strict_bool(value: object) -> None:
    with pytest.raises(ValidationError, match="cohortLabelGuard"):
        StackConfig.model_validate(_base_config(cohortLabelGuard=value))


def test_cohort_label_guard_is_on_by_default() -> None:
    assert StackConfig.model_validate(_base_config()).cohort_label_guard is True
    assert StackConfig.model_validate(_base_config(cohortLabelGuard=False)).cohort_label_guard is False


def test_model_is_frozen() -> None:
    config = StackConfig.model_validate(_base_config())

    with pytest.raises(Exception, match="frozen"):
        config.cohort_label_key = "x"  # type: ignore[misc]


# ---------------------------------------------------------------- invalid configs


@pytest.mark.parametrize("case", invalid_params())
def test_invalid_config_is_refused_with_exact_problems(case: InvalidCase) -> None:
    assert _problems(case.config) == expected_problems(case, str(ROOT))


def test_dra_on_eks_1_33_is_refused() -> None:
    raw = _base_config(cluster={"source": "eks", "name": "hybrid-gpu", "region": "us-west-2"}, cohorts=[DRA_COHORT])

    assert _problems(raw, ClusterFacts(kubernetes_version="1.33", auto_mode=False)) == [
        "eks-hybrid-gpu:cluster.kubernetesVersion: " + DRA_TOO_OLD.format(version="1.33")
    ]


def test_operator_on_auto_mode_cluster_is_refused() -> None:
    raw = _base_config(
        cluster={"source": "eks", "name": "hybrid-gpu", "region": "us-west-2"}, cohorts=[OPERATOR_COHORT]
    )

    assert _problems(raw, ClusterFacts(kubernetes_version="1.34", auto_mode=True)) == [AUTO_MODE_OPERATOR]


def test_declared_auto_mode_refuses_the_operator_too() -> None:
    raw = _base_config(cluster={"source": "local", "autoMode": True}, cohorts=[OPERATOR_COHORT])

    assert _problems(raw) == [AUTO_MODE_OPERATOR]


def test_eks_facts_auto_mode_off_wins_over_declared_on() -> None:
    raw = _base_config(
        cluster={"source": "eks", "name": "hybrid-gpu", "region": "us-west-2", "autoMode": True},
        cohorts=[OPERATOR_COHORT],
    )

    assert load_stack_config(raw, ROOT, EKS_FACTS).cohorts[0].owner == "gpu-operator"


def test_several_problems_are_all_listed_at_once() -> None:
    assert _problems(SEVERAL_PROBLEMS_CONFIG) == SEVERAL_PROBLEMS


def test_several_field_level_problems_are_all_listed_at_once() -> None:
    raw = _base_config(
        cluster={"source": "local", "regoin": "us-west-2"},
        charts={"devicePlugin": {"version": "^0.20"}},
        smokeJobs={"image": "registry.example.com/approved/gpu-smoke:1.0"},
    )

    assert _problems(raw) == [
        "eks-hybrid-gpu:cluster.regoin: is not a setting of this program; remove it or check its spelling",
        "eks-hybrid-gpu:charts.devicePlugin.version: '^0.20' is not an exact chart version; pin one release such "
        "as 0.20.0",
        "eks-hybrid-gpu:smokeJobs.image: 'registry.example.com/approved/gpu-smoke:1.0' is not pinned by digest; a "
        "tag can move under an approved test. Use registry/repo@sha256:<64 hex digits>",
    ]


def test_error_text_names_the_stack_file_and_counts_the_problems() -> None:
    with pytest.raises(StackConfigError) as caught:
        load_stack_config(SEVERAL_PROBLEMS_CONFIG, ROOT, stack_file="stacks/Pulumi.test.yaml")

    assert str(caught.value) == "\n".join(
        [
            "The stack config in stacks/Pulumi.test.yaml has 6 problem(s); nothing was changed:",
            *(f"  - {p}" for p in SEVERAL_PROBLEMS),
        ]
    )


def test_missing_cohorts_is_required() -> None:
    assert _problems({"cluster": {"source": "local"}}) == [
        "eks-hybrid-gpu:cohorts: is required; add it to the stack file"
    ]


# Field-level problems inside a cohort: each is the only problem reported (no spurious
# "Tuple should have at least 1 item" line after it).
COHORT_FIELD_CASES = [
    pytest.param(
        cohort(PLUGIN_COHORT, nodeSelectors=selector_for("device-plugin")),
        "eks-hybrid-gpu:cohorts[0].nodeSelectors: is not a setting of this program; remove it or check its spelling",
        id="unknown-cohort-key",
    ),
    pytest.param(
        cohort(PLUGIN_COHORT, hostDriverVerified="true"),
        "eks-hybrid-gpu:cohorts[0].hostDriverVerified: is 'true', not true or false: write true or false without "
        "quotes",
        id="string-for-bool",
    ),
    pytest.param(
        cohort(PLUGIN_COHORT, sharing={"mode": "time-slicing", "replicas": "4"}),
        "eks-hybrid-gpu:cohorts[0].sharing.replicas: is '4', not a whole number: write a whole number without quotes",
        id="string-for-int",
    ),
    pytest.param(
        cohort(PLUGIN_COHORT, sharing={"mode": "time-slicing", "replicas": 1}),
        "eks-hybrid-gpu:cohorts[0].sharing.replicas: is 1; it must be at least 2: raise it",
        id="one-replica",
    ),
    pytest.param(
        cohort(PLUGIN_COHORT, sharing={"mode": "mps"}),
        "eks-hybrid-gpu:cohorts[0].sharing: sharing.mode must be one of none, time-slicing or mig",
        id="unknown-sharing-mode",
    ),
    pytest.param(
        cohort(PLUGIN_COHORT, name="Plugin_1"),
        "eks-hybrid-gpu:cohorts[0].name: 'Plugin_1' is not a DNS label of at most 40 characters; use lower-case "
        "letters, digits and '-'",
        id="name-not-a-dns-label",
    ),
    pytest.param(
        cohort(PLUGIN_COHORT, owner="kai-scheduler"),
        "eks-hybrid-gpu:cohorts[0].owner: is 'kai-scheduler'; use one of 'device-plugin', 'dra' or 'gpu-operator'",
        id="unknown-owner",
    ),
]


@pytest.mark.parametrize(("bad_cohort", "problem"), COHORT_FIELD_CASES)
def test_cohort_field_problem_is_reported_first(bad_cohort: dict[str, Any], problem: str) -> None:
    problems = _problems(_base_config(cohorts=[bad_cohort]))

    assert problems[0] == problem


@pytest.mark.parametrize(("bad_cohort", "problem"), COHORT_FIELD_CASES)
def test_cohort_field_problem_is_the_only_problem(bad_cohort: dict[str, Any], problem: str) -> None:
    assert _problems(_base_config(cohorts=[bad_cohort])) == [problem]


def test_empty_cohort_list_is_refused() -> None:
    with pytest.raises(StackConfigError) as caught:
        load_stack_config(_base_config(cohorts=[]), ROOT)

    # Only the path is pinned: the wording is pydantic's and may change with the min_length fix above.
    assert [p.path for p in caught.value.problems] == ["cohorts"]


@pytest.mark.parametrize(
    ("section", "value", "problem"),
    [
        (
            "cluster",
            {"source": "local", "kubernetesVersion": "latest"},
            "eks-hybrid-gpu:cluster.kubernetesVersion: 'latest' is not a Kubernetes version; write it as 1.34.4",
        ),
        (
            "cluster",
            {"source": "kubeconfig"},
            "eks-hybrid-gpu:cluster.kubeconfig: is required with source kubeconfig: set the path of the file",
        ),
        (
            "namespaces",
            {"workloads": "default"},
            "eks-hybrid-gpu:namespaces.workloads: 'default' belongs to Kubernetes itself and cannot hold GPU "
            "components; use a namespace of your own (not default, kube-system, kube-public, kube-node-lease)",
        ),
        (
            "dra",
            {"largeGpuMemory": "40 GiB"},
            "eks-hybrid-gpu:dra.largeGpuMemory: '40 GiB' is not a Kubernetes quantity; write it like 40Gi",
        ),
        (
            "smokeJobs",
            {"activeDeadlineSeconds": 3600},
            "eks-hybrid-gpu:smokeJobs.activeDeadlineSeconds: is 3600; it must be at most 600: lower it",
        ),
        (
            "operator",
            {"mode": "both"},
            "eks-hybrid-gpu:operator.mode: is 'both'; use one of 'cluster-policy' or 'gpu-cluster'",
        ),
    ],
)
def test_other_field_problems(section: str, value: dict[str, Any], problem: str) -> None:
    assert _problems(_base_config(**{section: value})) == [problem]


def test_missing_archive_is_refused() -> None:
    raw = _base_config(charts={"devicePlugin": {"version": "0.20.0", "source": {"archive": "charts/missing.tgz"}}})

    assert _problems(raw) == [
        f"eks-hybrid-gpu:charts.devicePlugin.source.archive: {Path(ROOT) / 'charts/missing.tgz'} does not exist: "
        "point it at the chart's .tgz"
    ]


def test_unknown_top_level_key_is_refused() -> None:
    assert _problems(_base_config(smokeJob={"approvedCohort": "plugin"})) == [
        "eks-hybrid-gpu:smokeJob: is not a setting of this program; remove it or check its spelling"
    ]
