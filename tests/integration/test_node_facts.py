"""Each cohort host's own kubelet, read live: the preview's preflight and `inspect` on the simulated cluster.

The session's simulated fleet is the default cohorts file. A person rehearses an old host the way they describe
any host: they edit its entry in the file (`kubeletVersion`) and apply it again; the simulation then reports that
version in the Node's status.nodeInfo, as nodeadm's kubelet does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pulumi import automation as auto

from cluster.client import kubeclient
from components.config import StackConfig
from eks_hybrid_gpu import engine, inspection, localcluster, simulate
from eks_hybrid_gpu.local import created_objects
from tests.integration.helpers import ledger_in, work_dir_with_stack

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("_program_reads_the_simulated_cluster")]

OLD_HOST = "sim-dra-h100-0"
OTHER_DRA_HOSTS = ("sim-dra-a10g-0", "sim-dra-h200-0")
DRA_COHORT = {"name": "dra", "owner": "dra", "hostDriverVerified": True}
CLUSTER = {"source": "local", "kubernetesVersion": "1.34.4", "skipAwait": True, "preflight": True}


def fleet_with_kubelet(version: str) -> simulate.Simulation:
    """The default cohorts file with OLD_HOST's entry saying `kubeletVersion: VERSION`, as a person edits it."""
    entry = re.compile(rf"^(  - name: {OLD_HOST}\b[^\n]*\n)", re.MULTILINE)
    text, edits = entry.subn(rf"\g<1>    kubeletVersion: {version}\n", simulate.DEFAULT_COHORTS)
    assert edits == 1
    return simulate.load(text, "cohorts.yaml")


@pytest.fixture
def ledger(sim_kube: kubeclient.Kube) -> Iterator[str]:
    """The DRA stack's ledger in a namespace of its own; yields NAMESPACE/NAME."""
    with ledger_in(sim_kube, "node-facts-ledger", StackConfig.model_validate({"cohorts": [DRA_COHORT]})) as ref:
        yield ref


def test_a_dra_host_on_an_old_kubelet_is_refused_at_preview_until_it_is_upgraded(
    sim_engine_env: engine.EngineEnv,
    sim_kube: kubeclient.Kube,
    sim_cluster: localcluster.LocalCluster,
    ledger: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack = engine.stack(
        sim_engine_env,
        "old-kubelet",
        work_dir=work_dir_with_stack(tmp_path, "old-kubelet", {"cluster": CLUSTER, "cohorts": [DRA_COHORT]}),
    )
    inspect = ["--kubeconfig", str(sim_cluster.kubeconfig), "--ledger", ledger, "--json"]
    simulate.apply(sim_kube, fleet_with_kubelet("v1.31.9-eks-1"))
    try:
        reported = sim_kube.get(f"/api/v1/nodes/{OLD_HOST}")["status"]["nodeInfo"]
        lines: list[str] = []
        with pytest.raises(auto.CommandError) as failure:
            stack.preview(on_output=lines.append, color="never", policy_packs=engine.policy_packs())
        output = "\n".join([*lines, str(failure.value)])
        print(output)  # shown by pytest when an assertion below fails
        capsys.readouterr()
        old_code = inspection.main(inspect)
        old_inspect = json.loads(capsys.readouterr().out)

        # The host is upgraded (`nodeadm upgrade`): its entry in the file says so, and the file is applied again.
        simulate.apply(sim_kube, fleet_with_kubelet("v1.34.4-eks-3025e55"))
        upgraded = stack.preview(color="never", policy_packs=engine.policy_packs())
        new_code = inspection.main(inspect)
        new_inspect = json.loads(capsys.readouterr().out)
    finally:
        simulate.apply(sim_kube, simulate.default_simulation())

    assert (reported["kubeletVersion"], reported["containerRuntimeVersion"]) == ("v1.31.9-eks-1", "containerd://2.0.5")
    assert "The live nodes do not fit the stack config in stacks/Pulumi.old-kubelet.yaml" in output
    assert (
        f"eks-hybrid-gpu:cohorts[0].nodeSelector: selects node {OLD_HOST}, whose kubelet reports 'v1.31.9-eks-1' "
        "(status.nodeInfo.kubeletVersion); the DRA driver needs kubelet 1.34.2+ (DRA with resource.k8s.io/v1): "
        "drain the node and upgrade the host with `sudo nodeadm upgrade <the control plane's Kubernetes minor "
        "version> --config-source file://nodeConfig.yaml`; or take the node out of cohort dra (its "
        "workload.example.com/gpu-allocation label)"
    ) in output
    assert all(host not in output for host in OTHER_DRA_HOSTS)
    # Nothing changed: no resource in the stack, no owner namespace.
    assert created_objects(stack.export_stack().deployment) == []
    assert sim_kube.get_or_none("/api/v1/namespaces/gpu-dra-system") is None
    # inspect says the same about the same host, and exits 1.
    assert old_code == 1
    assert [(f["node"], f["kind"], f["conflict"]) for f in old_inspect["findings"]] == [
        (OLD_HOST, "kubelet-version", True)
    ]
    assert {n["name"]: n["kubeletVersion"] for n in old_inspect["nodes"]}[OLD_HOST] == "v1.31.9-eks-1"

    # Upgraded: the same preview passes and would create the DRA driver; inspect finds nothing.
    assert upgraded.change_summary.get(auto.OpType.CREATE, 0) > 0
    assert "kubelet reports" not in upgraded.stdout
    assert (new_code, new_inspect["findings"]) == (0, [])
    assert {n["name"]: n["kubeletVersion"] for n in new_inspect["nodes"]}[OLD_HOST] == "v1.34.4-eks-3025e55"
