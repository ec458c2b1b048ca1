"""Refusal messages: pydantic's errors in the project's words, type and cross-field problems in one run, repeats
capped, every line with a path, and no secret value echoed."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from components.refusals import StackConfigError
from components.stack_loader import load_stack_config
from eks_hybrid_gpu.mocks import ROOT
from tests.support.configs import (
    DIGEST_IMAGE,
    DRA_COHORT,
    PLUGIN_COHORT,
    Recorder,
    RunProgram,
    _base_config,
    cohort,
    overlap,
)

pytestmark = pytest.mark.unit

P = "eks-hybrid-gpu:"


def _refusal(raw: dict[str, Any], secret_keys: tuple[str, ...] = ()) -> StackConfigError:
    with pytest.raises(StackConfigError) as caught:
        load_stack_config(raw, ROOT, secret_keys=secret_keys)
    return caught.value


def _problems(raw: dict[str, Any], secret_keys: tuple[str, ...] = ()) -> list[str]:
    return [str(p) for p in _refusal(raw, secret_keys).problems]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        pytest.param(
            {"cohorts": "plugin"},
            f"{P}cohorts: is 'plugin', not a list: write a list of cohorts, each with a name and an owner",
            id="tuple_type",
        ),
        pytest.param(
            {"cohorts": ["plugin"]},
            f"{P}cohorts[0]: is 'plugin', not a mapping of settings: write it as key: value pairs",
            id="model_type-in-a-list",
        ),
        pytest.param(
            _base_config(cluster=[]),
            f"{P}cluster: is a list, not a mapping of settings: write it as key: value pairs",
            id="model_type",
        ),
        pytest.param(
            _base_config(dra={"featureGates": {"DynamicMIG": "yes"}}),
            f"{P}dra.featureGates.DynamicMIG: is 'yes', not true or false: write true or false without quotes",
            id="bool_type",
        ),
        pytest.param(
            _base_config(dra={"featureGates": []}),
            f"{P}dra.featureGates: is a list, not a mapping: write it as key: value pairs",
            id="dict_type",
        ),
        pytest.param(
            _base_config(smokeJobs={"runAsUser": 1.5}),
            f"{P}smokeJobs.runAsUser: is 1.5, not a whole number: write a whole number without quotes",
            id="int_type",
        ),
        pytest.param(
            _base_config(smokeJobs={"runAsUser": 0}),
            f"{P}smokeJobs.runAsUser: is 0; it must be at least 1: raise it",
            id="greater_than_equal",
        ),
        pytest.param(
            _base_config(cohorts=[cohort(PLUGIN_COHORT, nodeSelector={"example.com/a": 1})]),
            f"{P}cohorts[0].nodeSelector.example.com/a: is 1, not text: write it as a string",
            id="string_type",
        ),
        pytest.param(
            _base_config(cohorts=[cohort(PLUGIN_COHORT, sharing={"migStrategy": "single"})]),
            f"{P}cohorts[0].sharing: has no mode: set sharing.mode to none, time-slicing or mig",
            id="union_tag_not_found",
        ),
        pytest.param(
            _base_config(cohorts=[cohort(PLUGIN_COHORT, sharing="mig")]),
            f"{P}cohorts[0].sharing: is 'mig', not a mapping of settings: write it as key: value pairs",
            id="sharing-not-a-mapping",
        ),
        pytest.param(
            _base_config(cluster={"source": "cloud"}),
            f"{P}cluster.source: is 'cloud'; use one of 'local', 'kubeconfig' or 'eks'",
            id="literal_error",
        ),
        pytest.param(
            _base_config(cohorts=[{"owner": "dra"}]),
            f"{P}cohorts[0].name: is required; add it to the stack file",
            id="missing",
        ),
    ],
)
def test_pydantic_errors_are_in_the_projects_words(raw: dict[str, Any], problem: str) -> None:
    assert _problems(raw) == [problem]


def test_type_errors_and_cross_field_problems_are_reported_together() -> None:
    raw = _base_config(
        cohorts=[cohort(PLUGIN_COHORT, name="Bad_1"), cohort(PLUGIN_COHORT), cohort(PLUGIN_COHORT, name="plugin-b")],
        smokeJobs={"activeDeadlineSeconds": "120"},
        namespaces={"devicePlugin": "gpu", "workloads": "gpu"},
    )

    assert _problems(raw) == [
        f"{P}cohorts[0].name: 'Bad_1' is not a DNS label of at most 40 characters; use lower-case letters, digits "
        "and '-'",
        f"{P}smokeJobs.activeDeadlineSeconds: is '120', not a whole number: write a whole number without quotes",
        overlap(2, 1, "plugin", "device-plugin"),
        f"{P}namespaces.workloads: 'gpu' is also namespaces.devicePlugin; each role needs its own namespace (the "
        "owners' namespaces are privileged, the workloads' restricted): choose a different name",
    ]


def test_a_failed_section_hides_no_problem_of_another_section() -> None:
    raw = _base_config(
        cluster={"source": "local", "kubernetesVersion": "latest"},
        smokeJobs={"approvedCohort": "nope", "image": DIGEST_IMAGE},
    )

    assert _problems(raw) == [
        f"{P}cluster.kubernetesVersion: 'latest' is not a Kubernetes version; write it as 1.34.4",
        f"{P}smokeJobs.approvedCohort: 'nope' is not a cohort of this stack: use one of plugin, or remove it to keep "
        "every smoke Job suspended",
    ]


def test_forty_duplicate_cohorts_give_a_short_capped_message() -> None:
    error = _refusal(_base_config(cohorts=[cohort(PLUGIN_COHORT) for _ in range(40)]))
    lines = str(error).splitlines()

    # One overlap per cohort, naming the first earlier cohort it meets (not one per pair: 780 here, 50 million
    # for 10,000 cohorts).
    assert len(error.problems) == 39 + 39
    assert lines[0] == "The stack config has 78 problem(s); nothing was changed:"
    assert len(lines) == 1 + 10 + 1 + 10 + 1
    assert lines[11] == "  - ...and 29 more of the same kind"
    assert lines[22] == "  - ...and 29 more of the same kind"
    assert lines[1] == (
        f"  - {P}cohorts[1].name: 'plugin' is also the name of cohorts[0]; cohort names must be unique: rename one"
    )
    assert lines[12] == f"  - {overlap(1, 0, 'plugin', 'device-plugin')}"
    assert len(str(error)) < 8_000


def test_every_line_has_a_path() -> None:
    raw = {"cohorts": [1, None, "x"], "cluster": "eks", "": {}, "smokeJobs": None}

    for problem in _refusal(raw).problems:
        assert problem.path
        assert not str(problem).startswith(f"{P}:")


def test_a_secret_value_is_never_echoed() -> None:
    raw = _base_config(cluster={"source": "local", "kubernetesVersion": "tok3n-Secret-Value"})

    error = _refusal(raw, secret_keys=("cluster",))

    assert "tok3n-Secret-Value" not in str(error)
    assert [str(p) for p in error.problems] == [
        f"{P}cluster.kubernetesVersion: the secret value at cluster.kubernetesVersion is not a Kubernetes version; "
        "write it as 1.34.4"
    ]


def test_secret_cohort_names_are_not_echoed_by_cross_field_problems() -> None:
    raw = _base_config(
        cohorts=[cohort(PLUGIN_COHORT, name="private-rack-7")],
        smokeJobs={"approvedCohort": "nope", "image": DIGEST_IMAGE},
    )

    error = _refusal(raw, secret_keys=("cohorts",))

    assert "private-rack-7" not in str(error)
    assert [str(p) for p in error.problems] == [
        f"{P}smokeJobs.approvedCohort: 'nope' is not a cohort of this stack: use one of the secret value, or remove "
        "it to keep every smoke Job suspended"
    ]


def test_a_refusal_through_the_program_does_not_echo_a_secret(run: RunProgram, monkeypatch: pytest.MonkeyPatch) -> None:
    """The program reads which keys are secret from the engine's config and passes them to validation."""
    monkeypatch.setattr("components.program.secret_config_keys", lambda: frozenset({"cluster"}))
    recorder = Recorder()
    raw = _base_config(cluster={"source": "kubeconfig", "kubeconfig": "/k\n", "context": "token-abcdef\n"})

    with pytest.raises(pulumi.RunError) as caught:
        run(raw, recorder=recorder)

    assert "token-abcdef" not in str(caught.value)
    assert "the secret value at cluster.context" in str(caught.value)
    assert recorder.registrations == []


def test_config_nested_too_deep_to_read_is_refused(run: RunProgram) -> None:
    recorder = Recorder()
    deep = "[" * 100_000 + "]" * 100_000

    with pytest.raises(pulumi.RunError) as caught:
        run(_base_config(dra=deep), recorder=recorder)

    assert str(caught.value).splitlines()[1] == (
        f"  - {P}dra: is '{'[' * 40}'...'{']' * 20}' (200000 characters), not a mapping of settings: write it as "
        "key: value pairs"
    )
    assert recorder.registrations == []


def test_a_deeply_nested_secret_is_refused_without_a_crash() -> None:
    deep: Any = "tok3n-Secret-Value"
    for _ in range(3000):
        deep = [deep]

    raw = _base_config()
    raw["dra"] = {"featureGates": {"DynamicMIG": deep}}  # not through _base_config: deepcopy would recurse

    error = _refusal(raw, secret_keys=("dra",))

    assert [str(p) for p in error.problems] == [
        f"{P}dra.featureGates.DynamicMIG: is a list, not true or false: write true or false without quotes"
    ]


def test_a_number_too_long_to_print_is_refused(run: RunProgram) -> None:
    assert _problems(_base_config(smokeJobs={"runAsUser": 10**5000})) == [
        f"{P}smokeJobs.runAsUser: is a number too long to show; it must be at most 2147483647: lower it"
    ]
    recorder = Recorder()

    with pytest.raises(pulumi.RunError) as caught:
        run(_base_config(smokeJobs='{"runAsUser": 1' + "0" * 5000 + "}"), recorder=recorder)

    assert str(caught.value).splitlines()[1] == (
        f"  - {P}smokeJobs: is '{{\"runAsUser\": 1{'0' * 25}'...'{'0' * 19}}}' (5016 characters), not a mapping of "
        "settings: write it as key: value pairs"
    )
    assert recorder.registrations == []


def _cluster(version: str, gates: dict[str, Any]) -> dict[str, Any]:
    return _base_config(
        cluster={"source": "local", "kubernetesVersion": version, "preflight": False, "featureGates": gates}
    )


@pytest.mark.parametrize(
    ("version", "gates", "problem"),
    [
        pytest.param(
            "1.37.2",
            {"DRAExtendedResource": False},
            f"{P}cluster.featureGates.DRAExtendedResource: is GA and locked to true in 1.37: remove it (the "
            "version's default stands) or declare a kubernetesVersion where it can be set",
            id="locked",
        ),
        pytest.param(
            "1.34.4",
            {"DRADerivedAttributes": True},
            f"{P}cluster.featureGates.DRADerivedAttributes: is not a DRA gate this program knows",
            id="unknown",
        ),
        pytest.param(
            "1.34.4",
            {"DRA\nExtendedResource": True},
            f"{P}cluster.featureGates: 'DRA\\nExtendedResource' is not a feature gate name",
            id="not-a-name",
        ),
    ],
)
def test_feature_gates_the_version_refuses_are_refused(version: str, gates: dict[str, Any], problem: str) -> None:
    problems = _problems(_cluster(version, gates))
    assert len(problems) == 1, problems
    assert problems[0].startswith(problem), problems


@pytest.mark.parametrize(("version", "gates"), [("1.34.4", {"DRAExtendedResource": True}), ("1.36.3", {})])
def test_feature_gates_the_version_accepts_load(version: str, gates: dict[str, bool]) -> None:
    config = load_stack_config(_cluster(version, gates), ROOT)
    assert config.cluster.feature_gates == gates


def _keeping_the_name(version: str, gates: dict[str, bool], *cohorts: dict[str, Any]) -> dict[str, Any]:
    return _base_config(
        cluster={"source": "local", "kubernetesVersion": version, "preflight": False, "featureGates": gates},
        cohorts=list(cohorts) or [cohort(DRA_COHORT)],
        dra={"extendedResourceName": "nvidia.com/gpu"},
    )


def test_keeping_the_gpu_name_where_kep_5004_is_off_is_refused_naming_gate_version_and_fix() -> None:
    problems = _problems(_keeping_the_name("1.35.4", {}))
    assert problems == [
        f"{P}dra.extendedResourceName: keeps nvidia.com/gpu through DRA, but DRAExtendedResource is off in "
        "Kubernetes 1.35 (alpha, off by default until 1.36): pods asking nvidia.com/gpu would stay Pending on the "
        "DRA cohort. Upgrade the cluster to 1.36+, or turn the gate on in every control-plane component and kubelet "
        "and set cluster.featureGates.DRAExtendedResource: true, or remove dra.extendedResourceName"
    ]


@pytest.mark.parametrize(
    ("version", "gates"), [("1.36.3", {}), ("1.37.2", {}), ("1.34.4", {"DRAExtendedResource": True})]
)
def test_keeping_the_gpu_name_loads_where_the_gate_is_on(version: str, gates: dict[str, bool]) -> None:
    config = load_stack_config(_keeping_the_name(version, gates), ROOT)
    assert config.dra.extended_resource_name == "nvidia.com/gpu"


def test_keeping_the_gpu_name_without_a_dra_cohort_is_refused() -> None:
    problems = _problems(_keeping_the_name("1.37.2", {}, cohort(PLUGIN_COHORT)))
    assert problems[0].startswith(f"{P}dra.extendedResourceName: is set, but no cohort has owner dra"), problems


def test_only_nvidia_gpu_can_be_kept() -> None:
    config = _keeping_the_name("1.37.2", {})
    config["dra"]["extendedResourceName"] = "nvidia.com/gpu.shared"
    problems = _problems(config)
    assert len(problems) == 1
    assert problems[0].startswith(f"{P}dra.extendedResourceName:"), problems
