"""`pulumi config set --secret` through the real engine: the secret marking survives into outputs and state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from eks_hybrid_gpu import engine, localcluster
from tests.integration.helpers import LOCAL_STACK_FILE, work_dir_with_stack

pytestmark = [pytest.mark.integration, pytest.mark.charts]

SECRET_SIG = "4dabf18193072939515e22adb298388d"


def _resource(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    found = [r for r in deployment["resources"] if r["urn"].endswith(f"::{name}")]
    assert len(found) == 1, [r["urn"] for r in deployment["resources"]]
    return found[0]


def test_secret_cohorts_stay_secret_in_outputs_and_state(
    engine_env: engine.EngineEnv, cluster: localcluster.LocalCluster, tmp_path: Path
) -> None:
    import yaml

    cohorts = yaml.safe_load(LOCAL_STACK_FILE.read_text())["config"]["eks-hybrid-gpu:cohorts"]
    work = work_dir_with_stack(tmp_path, "secret-cohorts", {})
    stack = engine.stack(engine_env, "secret-cohorts", work_dir=work)
    stack.set_config("eks-hybrid-gpu:cohorts", auto.ConfigValue(json.dumps(cohorts), secret=True))
    try:
        result = stack.up(color="never")

        assert result.outputs["ownership"].secret is True
        assert result.outputs["ownership"].value["cohorts"]["plugin"]["owner"] == "device-plugin"
        # The state file itself (export_stack would decrypt): the ledger's data is ciphertext.
        (state_file,) = (engine_env.state_dir / "backend" / ".pulumi" / "stacks").rglob("secret-cohorts.json")
        ledger = _resource(json.loads(state_file.read_text())["checkpoint"]["latest"], "gpu-ledger-configmap")
        data = ledger["inputs"]["data"]["ownership.json"]
        assert data[SECRET_SIG] == "1b47061264138c4ac30d75fd1eb44270"
        assert "ciphertext" in data
        assert "device-plugin" not in json.dumps(ledger["inputs"])
        # Another run of the same stack works in a folder of its own, and still reads the state's secrets: the
        # stack's encryption salt is kept apart from the run that created it.
        again = engine.stack(engine_env, "secret-cohorts", work_dir=work)
        assert again.workspace.work_dir != stack.workspace.work_dir
        again.preview(color="never")
    finally:
        stack.destroy(color="never")
