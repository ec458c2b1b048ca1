"""An invalid stack fails before anything is registered: the real program under fresh mocks, exact error text."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from eks_hybrid_gpu.mocks import ROOT
from tests.support.configs import (
    AUTO_MODE_OPERATOR,
    DRA_COHORT,
    DRA_TOO_OLD,
    OPERATOR_COHORT,
    PLUGIN_COHORT,
    SEVERAL_PROBLEMS,
    SEVERAL_PROBLEMS_CONFIG,
    InvalidCase,
    Recorder,
    RunProgram,
    _base_config,
    cohort,
    eks_cluster,
    expected_problems,
    hybrid_node,
    invalid_params,
    node,
)

pytestmark = pytest.mark.unit

EKS = {"source": "eks", "name": "hybrid-gpu", "region": "us-west-2"}
GET_CLUSTER = "aws:eks/getCluster:getCluster"


def _message(problems: list[str], header: str = "The stack config in stacks/Pulumi.test.yaml") -> str:
    return "\n".join(
        [f"{header} has {len(problems)} problem(s); nothing was changed:", *(f"  - {p}" for p in problems)]
    )


def _refused(run: RunProgram, config: dict[str, Any], recorder: Recorder, **kwargs: Any) -> str:
    with pytest.raises(pulumi.RunError) as caught:
        run(config, recorder=recorder, **kwargs)
    return str(caught.value)


@pytest.mark.parametrize("case", invalid_params())
def test_invalid_config_registers_nothing(run: RunProgram, case: InvalidCase) -> None:
    recorder = Recorder()

    message = _refused(run, case.config, recorder)

    assert message == _message(expected_problems(case, str(ROOT)))
    assert recorder.registrations == []
    assert recorder.calls == []


def test_several_problems_are_all_listed_and_nothing_registered(run: RunProgram) -> None:
    recorder = Recorder()

    message = _refused(run, SEVERAL_PROBLEMS_CONFIG, recorder)

    assert message == _message(SEVERAL_PROBLEMS)
    assert recorder.registrations == []


def test_stack_file_in_the_message_is_the_running_stack(run: RunProgram) -> None:
    recorder = Recorder()
    config = _base_config(cohorts=[cohort(PLUGIN_COHORT, hostDriverVerified=False)])

    with pytest.raises(pulumi.RunError) as caught:
        run(config, "staging", recorder=recorder)

    assert str(caught.value).splitlines()[0] == (
        "The stack config in stacks/Pulumi.staging.yaml has 1 problem(s); nothing was changed:"
    )
    assert recorder.registrations == []


def test_eks_1_33_refuses_dra_when_a_newer_version_is_declared(run: RunProgram) -> None:
    """EKS facts win over the declared version; the describe is read, nothing is registered."""
    recorder = Recorder(eks_cluster=eks_cluster(version="1.33"))
    config = _base_config(cluster={**EKS, "kubernetesVersion": "1.34.4"}, cohorts=[DRA_COHORT])

    message = _refused(run, config, recorder)

    assert message == _message(["eks-hybrid-gpu:cluster.kubernetesVersion: " + DRA_TOO_OLD.format(version="1.33")])
    assert recorder.calls == [GET_CLUSTER]
    assert recorder.registrations == []


def test_eks_1_33_refuses_dra_from_the_describe_alone(run: RunProgram) -> None:
    recorder = Recorder(eks_cluster=eks_cluster(version="1.33"))
    config = _base_config(cluster=EKS, cohorts=[DRA_COHORT])

    message = _refused(run, config, recorder)

    assert message == _message(["eks-hybrid-gpu:cluster.kubernetesVersion: " + DRA_TOO_OLD.format(version="1.33")])
    assert recorder.calls == [GET_CLUSTER]
    assert recorder.registrations == []


def test_auto_mode_cluster_refuses_the_operator(run: RunProgram) -> None:
    recorder = Recorder(eks_cluster=eks_cluster(computeConfigs=[{"enabled": True}]))
    config = _base_config(cluster=EKS, cohorts=[OPERATOR_COHORT])

    message = _refused(run, config, recorder)

    assert message == _message([AUTO_MODE_OPERATOR])
    assert recorder.calls == [GET_CLUSTER]
    assert recorder.registrations == []


def test_auto_mode_cluster_still_allows_a_hybrid_device_plugin_cohort(run: RunProgram) -> None:
    recorder = Recorder(eks_cluster=eks_cluster(computeConfigs=[{"enabled": True}]))
    config = _base_config(cluster=EKS)

    run(config, recorder=recorder, nodes=[hybrid_node("gpu-1", "device-plugin")])

    assert recorder.calls == [GET_CLUSTER]
    assert len(recorder.of_type("kubernetes:helm.sh/v4:Chart")) == 1


# ---------------------------------------------------------------- preflight failures


def test_preflight_failure_registers_nothing(run: RunProgram) -> None:
    recorder = Recorder()
    config = _base_config(cluster={"source": "local", "kubernetesVersion": "1.34.4"})
    nodes = [
        node("cpu-1", **{"eks.amazonaws.com/compute-type": "hybrid"}),
        hybrid_node("gpu-1", "device-plugin", labels={"nvidia.com/mps.capable": "true"}),
    ]

    message = _refused(run, config, recorder, nodes=nodes)

    lines = message.splitlines()
    assert lines[0].startswith("The live nodes do not fit the stack config in stacks/Pulumi.test.yaml")
    assert lines[0].endswith("1 problem(s); nothing was changed:")
    assert lines[1:] == [
        "  - eks-hybrid-gpu:cohorts[0].nodeSelector: selects node gpu-1, labelled nvidia.com/mps.capable=true; the "
        "chart's MPS daemon would start there: investigate who owns MPS on that node instead of clearing the "
        "label blindly"
    ]
    assert recorder.registrations == []


def test_preflight_with_no_matching_node_registers_nothing(run: RunProgram) -> None:
    recorder = Recorder()
    config = _base_config(cluster={**EKS, "kubernetesVersion": "1.34.4"}, cohorts=[PLUGIN_COHORT, DRA_COHORT])

    message = _refused(run, config, recorder, nodes=[hybrid_node("gpu-1", "device-plugin")])

    assert message.splitlines()[1:] == [
        "  - eks-hybrid-gpu:cohorts[1].nodeSelector: selects no node ({'eks.amazonaws.com/compute-type': "
        "'hybrid', 'workload.example.com/gpu-allocation': 'dra'}); fix the host inventory and node labels rather "
        "than widening the selector or removing the chart's GPU affinity"
    ]
    assert recorder.calls == [GET_CLUSTER]
    assert recorder.registrations == []


def test_preflight_is_skipped_when_disabled(run: RunProgram, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object) -> list[dict[str, Any]]:
        pytest.fail("read_cluster must not be called with cluster.preflight false")

    monkeypatch.setattr("components.program.read_cluster", refuse)

    recorder = run(_base_config())

    assert len(recorder.jobs()) == 1


def test_unknown_top_level_key_registers_nothing(run: RunProgram) -> None:
    recorder = Recorder()

    message = _refused(run, _base_config(smokeJob={"approvedCohort": "plugin"}), recorder)

    assert message == _message(
        ["eks-hybrid-gpu:smokeJob: is not a setting of this program; remove it or check its spelling"]
    )
    assert recorder.registrations == []


def test_unknown_cohort_key_registers_nothing(run: RunProgram) -> None:
    recorder = Recorder()
    config = _base_config(cohorts=[cohort(PLUGIN_COHORT, hostDriverVerifed=True)])

    message = _refused(run, config, recorder)

    assert message.splitlines()[1] == (
        "  - eks-hybrid-gpu:cohorts[0].hostDriverVerifed: is not a setting of this program; remove it or check "
        "its spelling"
    )
    assert recorder.registrations == []
