"""The pack on programs that are not this program: their own Pulumi projects, no stamps, no ledger.

A platform team runs the one pack on every stack. Each preview here is an inline program of another project
that installs GPU allocators the way teams do when they bypass eks-hybrid-gpu: NVIDIA's static device-plugin
manifest through `yaml.v2.ConfigGroup`, a plain `apps.v1.DaemonSet`, the charts through `helm.v4.Chart` (the
archives in ../shared/charts, the guide's values). The real engine, provider and local API server, with
`--policy-pack policy/analyzer`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from pulumi import automation as auto

from eks_hybrid_gpu import engine
from tests.integration.helpers import cluster_provider, namespace, refused_by
from tests.support import charts, seeds

pytestmark = [pytest.mark.integration, pytest.mark.charts]

SHARED = charts.folder()
STATIC_PLUGIN = (seeds.FIXTURES / "nvidia-device-plugin-static.yml").read_text()


def _foreign_stack(engine_env: engine.EngineEnv, tmp_path: Path, project: str, program: Callable[[], None]) -> Any:
    """A stack of another project (`project`), with the engine's isolated home, backend and toolchain."""
    work = tmp_path / project
    work.mkdir()
    pulumi_bin = next(Path(e) / "pulumi" for e in engine_env.toolchain.path_entries if (Path(e) / "pulumi").exists())
    workspace = auto.LocalWorkspaceOptions(
        work_dir=str(work),
        pulumi_home=str(engine_env.pulumi_home),
        env_vars=engine_env.variables,
        project_settings=auto.ProjectSettings(name=project, runtime="python"),
        pulumi_command=auto.PulumiCommand(root=str(pulumi_bin.parent.parent), skip_version_check=True),
    )
    return auto.create_or_select_stack("team", project_name=project, program=program, opts=workspace)


def _preview(stack: Any) -> tuple[bool, str]:
    lines: list[str] = []
    try:
        stack.preview(on_output=lines.append, color="never", policy_packs=engine.policy_packs())
        refused = False
    except auto.CommandError:
        refused = True
    output = "\n".join(lines)
    assert "can't run policy" not in output
    assert "Traceback" not in output
    return refused, output


def _refused(
    engine_env: engine.EngineEnv, tmp_path: Path, project: str, program: Callable[[], None]
) -> tuple[dict[str, list[str]], str]:
    """A foreign stack's preview, which the pack must refuse: the policies that refused it, and the output."""
    refused, output = _preview(_foreign_stack(engine_env, tmp_path, project, program))
    assert refused, output
    found = refused_by(output)
    assert "ownership-ledger-consistent" not in found  # another project keeps no ledger, and none is asked of it
    return found, output


def _team_chart(provider: k8s.Provider, name: str, archive: str, where: str, values: dict[str, Any]) -> None:
    """A team's own helm.v4.Chart of one of the tests' archives, in its Namespace `where`."""
    created = namespace(where, provider)
    k8s.helm.v4.Chart(
        name,
        chart=str(SHARED / archive),
        namespace=where,
        values=values,
        opts=pulumi.ResourceOptions(provider=provider, depends_on=[created]),
    )


def _dra_chart(provider: k8s.Provider) -> None:
    values = seeds.document(seeds.DRA_VALUES)
    _team_chart(provider, "team-dra", "dra-driver-nvidia-gpu-0.4.1.tgz", "gpu-dra-system", values)


def test_nvidia_static_plugin_through_a_config_group_next_to_a_dra_chart_is_refused(
    engine_env: engine.EngineEnv, tmp_path: Path
) -> None:
    def program() -> None:
        provider = cluster_provider(engine_env)
        k8s.yaml.v2.ConfigGroup("nvidia-static", yaml=STATIC_PLUGIN, opts=pulumi.ResourceOptions(provider=provider))
        _dra_chart(provider)

    found, output = _refused(engine_env, tmp_path, "platform-gpu-static", program)
    assert "single-allocation-owner" in found, output
    assert "nvidia-device-plugin-daemonset" in output


def test_plain_daemonset_running_the_device_plugin_without_the_hybrid_pin_is_refused(
    engine_env: engine.EngineEnv, tmp_path: Path
) -> None:
    def program() -> None:
        provider = cluster_provider(engine_env)
        manifest = yaml.safe_load(STATIC_PLUGIN)
        manifest["spec"]["template"]["spec"]["nodeSelector"] = {"workload.example.com/gpu-allocation": "plugin"}
        k8s.apps.v1.DaemonSet(
            "team-plugin",
            metadata={**manifest["metadata"], "annotations": {"pulumi.com/skipAwait": "true"}},
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions(provider=provider),
        )

    found, output = _refused(engine_env, tmp_path, "platform-gpu-daemonset", program)
    assert "no-auto-mode-targeting" in found, output
    assert "Add eks.amazonaws.com/compute-type: hybrid to spec.template.spec.nodeSelector of" in output


def test_device_plugin_chart_with_the_guides_values_passes(engine_env: engine.EngineEnv, tmp_path: Path) -> None:
    def program() -> None:
        values = seeds.document(seeds.DEVICE_PLUGIN_VALUES)
        _team_chart(
            cluster_provider(engine_env), "team-plugin", "nvidia-device-plugin-0.20.0.tgz", "gpu-system", values
        )

    refused, output = _preview(_foreign_stack(engine_env, tmp_path, "platform-gpu-chart", program))
    assert not refused, output
    assert "✅ eks-hybrid-gpu@" in output, "the pack ran and passed the stack"
    assert refused_by(output) == {}
