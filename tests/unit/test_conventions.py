"""The command-line conventions kubectl and pulumi users expect: --version, -o json|yaml|wide, durations, the
local default's kubeconfig, review --context, and local-up.sh's flags with or without `up`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from cluster.client import kubeclient
from cluster.client.kubeclient import KubeAccessError
from eks_hybrid_gpu import cli, cluster_access, localcluster, options
from eks_hybrid_gpu.inspection import render, report
from eks_hybrid_gpu.review import with_context

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.unit
def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"eks-hybrid-gpu {cli.version()}"
    assert cli.version()[0].isdigit()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("1h30m", 5400.0), ("500ms", 0.5), ("1.5m", 90.0), ("168h", 604800)],
)
def test_durations_read_as_go_reads_them(text: str, seconds: float) -> None:
    assert options.duration(text) == seconds


@pytest.mark.unit
@pytest.mark.parametrize("text", ["", "10 m", "m", "-5s", "0s", "10d", "1h-30m", "169h", "1e3", "10m;rm -rf /", "٣s"])
def test_a_bad_duration_is_a_usage_error_naming_the_grammar(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"90s, 10m or 1h30m|above 0"):
        options.duration(text)


@pytest.mark.unit
@given(st.text(max_size=60))
def test_no_duration_crashes(text: str) -> None:
    try:
        seconds = options.duration(text)
    except argparse.ArgumentTypeError:
        return
    assert 0 < seconds <= options.MAX_DURATION_SECONDS


@pytest.mark.unit
@pytest.mark.parametrize("command", ["move-host", "migrate"])
def test_every_wait_takes_a_duration(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    parsed = cli.parser(command)
    argv = ["node-1", "--to", "dra"] if command == "move-host" else ["--stack", "local", "--cohort", "c", "--to", "dra"]
    assert parsed.parse_args([command, *argv, "--timeout", "10m"]).timeout == 600.0
    assert cli.main([command, *argv, "--timeout", "ten"]) == 2
    assert "not a duration: write it as 90s, 10m or 1h30m" in capsys.readouterr().err


@pytest.mark.unit
def test_output_formats_print_the_same_document() -> None:
    document = {"nodes": [{"name": "gpu-1", "owner": "dra"}], "conflict": False}
    as_json = options.emit("InspectReport", document, "json", lambda: "table")
    as_yaml = options.emit("InspectReport", document, "yaml", lambda: "table")
    typed = {"apiVersion": "eks-hybrid-gpu/v1alpha1", "kind": "InspectReport", **document}
    assert json.loads(as_json) == yaml.safe_load(as_yaml) == typed
    assert list(json.loads(as_json))[:2] == ["apiVersion", "kind"]
    assert options.emit("InspectReport", document, "table", lambda: "table") == "table"


@pytest.mark.unit
def test_the_default_node_table_fits_a_terminal_and_wide_shows_every_column() -> None:
    from tests.unit.test_inspection import CLAIM, snapshot  # the recorded cluster inspect's own tests use

    document = report(snapshot([CLAIM]))
    narrow, wide = render(document).splitlines(), render(document, wide=True).splitlines()
    header = next(line for line in narrow if line.strip().startswith("node"))
    wide_header = next(line for line in wide if line.strip().startswith("node"))
    assert "kubelet" not in header
    assert "compute-type" not in header
    assert "kubelet" in wide_header
    assert "runtime" in wide_header
    assert len(header) < len(wide_header)


def _fake_local_cluster(root: Path) -> Path:
    """A local-default state folder whose API server 'runs' (its pid file names this test's process)."""
    state = root / "local-cluster"
    state.mkdir(parents=True)
    kubeconfig = state / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "local", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "local", "user": {"token": "t"}}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": "local"}}],
                "current-context": "local",
            }
        )
    )
    (state / "kube-apiserver.pid").write_text(str(os.getpid()))
    return kubeconfig


@pytest.mark.unit
def test_with_no_kubeconfig_the_running_local_default_is_used_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("EKS_HYBRID_GPU_CACHE", str(tmp_path / "cache"))
    with pytest.raises(kubeclient.KubeAccessError, match="does not exist"):
        cluster_access.connect()
    kubeconfig = _fake_local_cluster(tmp_path / "cache")
    if localcluster.running_kubeconfig(kubeconfig.parent) is None:
        pytest.fail("the fake state folder's pid file layout no longer matches localcluster's")
    kube = cluster_access.connect()
    assert kube.kubeconfig == str(kubeconfig)
    assert "using the local default's cluster" in capsys.readouterr().err
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "named"))
    with pytest.raises(kubeclient.KubeAccessError, match="named"):
        cluster_access.connect()  # a kubeconfig the user named is never replaced


@pytest.mark.unit
def test_review_context_sets_the_current_context_or_names_the_choices(tmp_path: Path) -> None:
    source = tmp_path / "config"
    names = ("prod", "dev")
    kubeconfig = {
        "clusters": [{"name": n, "cluster": {"server": f"https://{n}.example.invalid"}} for n in names],
        "users": [{"name": n, "user": {"token": "t"}} for n in names],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
        "current-context": "dev",
    }
    source.write_text(yaml.safe_dump(kubeconfig))
    chosen = with_context(source, "prod", tmp_path / "derived")
    assert yaml.safe_load(chosen.read_text())["current-context"] == "prod"
    assert yaml.safe_load(source.read_text())["current-context"] == "dev"
    with pytest.raises(KubeAccessError, match="has no context stage; pick one of: dev, prod"):
        with_context(source, "stage", tmp_path / "x")
    source.write_text("- [unclosed")
    with pytest.raises(KubeAccessError, match="cannot be used"):
        with_context(source, "prod", tmp_path / "x")
    assert cli.main(["review", "--context", "prod"]) == 2


@pytest.mark.unit
def test_a_kubeconfig_that_is_not_yaml_is_a_one_line_refusal_not_a_traceback(tmp_path: Path) -> None:
    broken = tmp_path / "config"
    broken.write_text("apiVersion: v1\ncontexts: [unclosed\n")
    with pytest.raises(kubeclient.KubeAccessError, match=r"kubeconfig .* cannot be used .*pass a valid --kubeconfig"):
        cluster_access.connect(str(broken))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("argv", "forwarded"),
    [
        ([], "local up --yes"),
        (["--chart-mirror", "/m"], "local up --yes --chart-mirror /m"),
        (["up", "--chart-mirror", "/m"], "local up --yes --chart-mirror /m"),
        (["down"], "local down"),
        (["--help"], "local --help"),
    ],
)
def test_local_up_script_takes_its_flags_with_or_without_up(tmp_path: Path, argv: list[str], forwarded: str) -> None:
    """The script is run as is, with .venv/bin/eks-hybrid-gpu and bootstrap replaced by recorders."""
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    (copy / ".venv" / "bin").mkdir(parents=True)
    (copy / "scripts" / "local-up.sh").write_text((REPO / "scripts" / "local-up.sh").read_text())
    (copy / "scripts" / "bootstrap.sh").write_text("#!/bin/sh\n")
    (copy / ".venv" / "bin" / "eks-hybrid-gpu").write_text('#!/bin/sh\necho "$@"\n')
    for script in (copy / "scripts" / "bootstrap.sh", copy / ".venv" / "bin" / "eks-hybrid-gpu"):
        script.chmod(0o755)
    done = subprocess.run(
        ["bash", str(copy / "scripts" / "local-up.sh"), *argv], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == forwarded
