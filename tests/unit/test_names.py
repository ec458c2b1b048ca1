"""Names are checked against their Kubernetes grammar before they reach an API path, a label or a file path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.client import kubeclient, names
from eks_hybrid_gpu import inspection, movehost, projectdir
from eks_hybrid_gpu.migrate import cli as migrate_cli
from policy.gpu_allocation.vocab.grammar import is_dns_subdomain
from policy.gpu_allocation.vocab.stack_files import stack_file_name

NOT_NODE_NAMES = ["NODE/status", "sim-0/status", "..", ".", "a/b", "", "Upper", "-x", "x-", "a..b", "x" * 254, "a b"]


@pytest.mark.parametrize("value", NOT_NODE_NAMES)
def test_a_node_name_is_a_dns_subdomain(value: str) -> None:
    with pytest.raises(names.NameRefused) as refused:
        names.node_name(value)
    assert str(refused.value).startswith(f"NODE {names.shown(value)} is not a node name (a DNS-1123 subdomain")
    assert "kubectl get nodes" in str(refused.value)


@pytest.mark.parametrize("value", ["sim-plugin-0", "ip-10-0-1-2.ec2.internal", "a", "x" * 63 + "." + "y" * 63])
def test_node_names_pass_as_they_are(value: str) -> None:
    assert names.node_name(value) == value
    assert kubeclient.segment(value) == value


@pytest.mark.parametrize("value", NOT_NODE_NAMES)
def test_segment_refuses_what_is_no_object_name(value: str) -> None:
    with pytest.raises(names.NameRefused):
        kubeclient.segment(value)


@given(st.text(max_size=300))
def test_segment_is_a_name_or_a_refusal_never_a_path(value: str) -> None:
    if not is_dns_subdomain(value):
        with pytest.raises(names.NameRefused) as refused:
            kubeclient.segment(value)
        assert "\n" not in str(refused.value)
        assert len(str(refused.value)) < 400
        return
    quoted = kubeclient.segment(value)
    assert quoted == value
    assert "/" not in quoted
    assert quoted not in (".", "..")


@pytest.mark.parametrize(
    ("check", "value", "kind"),
    [
        (names.namespace_name, "a.b", "namespace name"),
        (names.namespace_name, "x" * 64, "namespace name"),
        (names.cohort_name, "Plugin", "cohort name"),
        (names.cohort_name, "a/b", "cohort name"),
        (names.stack_name, "../etc", "stack name"),
        (names.stack_name, "..", "stack name"),
        (names.stack_name, ".hidden", "stack name"),
        (names.stack_name, "a/b/c/d", "stack name"),
        (names.stack_name, "myorg//prod", "stack name"),
        (names.stack_name, "myorg/../prod", "stack name"),
        (names.stack_name, "/prod", "stack name"),
        (names.stack_name, "prod\n", "stack name"),
    ],
)
def test_each_kind_refuses_by_its_own_grammar(check: object, value: str, kind: str) -> None:
    with pytest.raises(names.NameRefused, match=f"is not a {kind}"):
        check(value)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("value", "file"),
    [
        ("prod", "stacks/Pulumi.prod.yaml"),
        ("myorg/prod", "stacks/Pulumi.prod.yaml"),
        ("my-org/eks-hybrid-gpu/prod.v2", "stacks/Pulumi.prod.v2.yaml"),
    ],
)
def test_org_qualified_stacks_are_names_and_their_file_is_the_last_segments(value: str, file: str) -> None:
    assert names.stack_name(value) == value
    assert stack_file_name(value) == file


def test_a_stack_of_another_project_is_refused_with_the_names_to_pass() -> None:
    with pytest.raises(names.NameRefused) as refused:
        names.stack_name("myorg/other/prod")
    assert str(refused.value) == (
        "--stack 'myorg/other/prod' names project 'other', but this program's project is 'eks-hybrid-gpu' "
        "(Pulumi.yaml): pass myorg/eks-hybrid-gpu/prod or myorg/prod"
    )


@pytest.mark.parametrize("value", ["kube-system", "kube-system/a/b", "/name", "ns/", "NS/x", "ns/a..b", 7])
def test_a_configmap_ref_is_namespace_slash_name(value: object) -> None:
    with pytest.raises(names.NameRefused):
        names.configmap_ref(value)


def test_shown_escapes_control_characters_and_is_short() -> None:
    assert names.shown("a\x1b[31mb\n") == "'a\\x1b[31mb\\n'"
    assert len(names.shown("x" * 500)) == 80


def _one_line_refusal(capsys: pytest.CaptureFixture[str], code: int, prefix: str) -> None:
    captured = capsys.readouterr()
    assert code == names.BAD_NAME_EXIT_CODE
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(prefix)


@pytest.mark.parametrize("node", ["NODE/status", "..", ".", "a/b"])
def test_move_host_refuses_before_it_reads_the_cluster(
    node: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The kubeconfig does not exist: reaching `connect` would be a different refusal (the cluster's).
    code = movehost.main([node, "--to", "dra", "--kubeconfig", str(tmp_path / "none")])
    _one_line_refusal(capsys, code, f"move-host: NODE {node!r} is not a node name")


def test_move_host_checks_the_target_cohort_and_the_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "none")
    _one_line_refusal(capsys, movehost.main(["n", "--to", "../x", "--kubeconfig", missing]), "move-host: --to '../x'")
    code = movehost.main(["n", "--to", "dra", "--ledger", "kube-system", "--kubeconfig", missing])
    _one_line_refusal(capsys, code, "move-host: --ledger 'kube-system' is not NAMESPACE/NAME")


def test_migrate_checks_stack_and_cohort_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(projectdir.SHIPPED / "Pulumi.yaml", tmp_path)  # a project with no stacks: nothing to read
    argv = ["--stack", "../../etc/x", "--cohort", "plugin", "--to", "dra", "--project", str(tmp_path)]
    _one_line_refusal(capsys, migrate_cli.main(argv), "migrate: --stack '../../etc/x' is not a stack name")
    argv = ["--stack", "local", "--cohort", "a/b", "--to", "dra", "--project", str(tmp_path)]
    _one_line_refusal(capsys, migrate_cli.main(argv), "migrate: --cohort 'a/b' is not a cohort name")


def test_inspect_checks_its_ledger_and_namespace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "none")
    code = inspection.main(["--ledger", "kube-system/../x", "--kubeconfig", missing])
    _one_line_refusal(capsys, code, "inspect: --ledger 'kube-system/../x' is not NAMESPACE/NAME")
    code = inspection.main(["--namespace", "a/b", "--kubeconfig", missing])
    _one_line_refusal(capsys, code, "inspect: --namespace 'a/b' is not a namespace name")
