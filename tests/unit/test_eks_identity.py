"""The stack's AWS identity (`cluster.awsProfile`, `cluster.roleArn`) reaches the EKS describe and the token exec."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from cluster.judge.live import LiveCluster
from components.config import ClusterConfig
from components.refusals import StackConfigError
from components.stack_loader import load_stack_config
from eks_hybrid_gpu.mocks import ROOT, stack_config
from tests.support.configs import RunProgram

pytestmark = pytest.mark.unit

ROLE = "arn:aws:iam::123456789012:role/platform/gpu-admin"


def _no_live_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("components.program.read_cluster", lambda *_args, **_kw: LiveCluster([]))


def _eks(**cluster: Any) -> dict[str, Any]:
    config = stack_config("dra")
    config["cluster"] = {**config["cluster"], **cluster}
    config["cluster"]["preflight"] = False
    return config


def test_the_profile_and_role_reach_the_describe_and_the_token_exec(
    run: RunProgram, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_live_read(monkeypatch)
    recorder = run(_eks(awsProfile="gpu-admins", roleArn=ROLE), "dra")

    identity = recorder.named("eks-identity")
    assert identity.type_ == "pulumi:providers:aws"
    assert identity.inputs["profile"] == "gpu-admins"
    assert identity.inputs["region"] == "us-west-2"
    assert json.loads(identity.inputs["assumeRoles"]) == [{"roleArn": ROLE}]
    exec_auth = json.loads(recorder.named("cluster").inputs["kubeconfig"])["users"][0]["user"]["exec"]
    assert exec_auth["args"] == [
        "eks", "get-token", "--cluster-name", "hybrid-gpu", "--region", "us-west-2", "--output", "json",
        "--profile", "gpu-admins", "--role-arn", ROLE,
    ]  # fmt: skip


def test_without_them_the_ambient_credentials_are_used_and_no_provider_is_registered(
    run: RunProgram, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_live_read(monkeypatch)
    recorder = run(_eks(), "dra")

    assert not recorder.of_type("pulumi:providers:aws")
    exec_auth = json.loads(recorder.named("cluster").inputs["kubeconfig"])["users"][0]["user"]["exec"]
    assert "--profile" not in exec_auth["args"]
    assert "--role-arn" not in exec_auth["args"]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("awsProfile", "my profile", "is not an AWS profile name"),
        ("awsProfile", "--debug", "is not an AWS profile name"),
        ("awsProfile", "a/b", "is not an AWS profile name"),
        ("roleArn", "gpu-admin", "is not an IAM role ARN"),
        ("roleArn", "arn:aws:iam::12345:role/x", "is not an IAM role ARN"),
        ("roleArn", "arn:aws:iam::123456789012:user/x", "is not an IAM role ARN"),
        ("roleArn", f"{ROLE} --debug", "is not an IAM role ARN"),
    ],
)
def test_a_profile_or_role_that_is_not_one_is_refused(field: str, value: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        ClusterConfig.model_validate({"source": "eks", "name": "c", "region": "us-west-2", field: value})


@pytest.mark.parametrize("source", ["local", "kubeconfig"])
def test_a_profile_on_a_source_that_reaches_no_aws_is_refused(source: str) -> None:
    config = stack_config("local")
    config["cluster"] = {**config["cluster"], "source": source, "kubeconfig": "/k", "awsProfile": "gpu-admins"}
    with pytest.raises(StackConfigError) as refused:
        load_stack_config(config, ROOT, stack_file="stacks/Pulumi.local.yaml")
    problems = str(refused.value).splitlines()[1:]
    assert problems == [
        f"  - eks-hybrid-gpu:cluster.awsProfile: is set with source {source}, which reaches no AWS API: remove it, or "
        "set cluster.source to eks (the kubeconfig's own users choose their credentials for source kubeconfig)"
    ]
