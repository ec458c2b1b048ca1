"""Owner changes against the cluster's ledger: one-step refusals, unsupported paths, and the mid-migration record."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from cluster.judge.consumers import consumers_by_node
from cluster.judge.live import LiveCluster
from cluster.judge.owner_change import check_ledger, unsupported
from cluster.judge.preflight import check
from cluster.records.ledger import LedgerError, ledger_of, parse_record
from cluster.records.migration import Migration, parse_migration, paused_cohorts
from cluster.records.read import Records
from components.config import StackConfig
from components.mid_migration import apply_to_raw
from components.ownership_ledger import ownership_map
from policy.gpu_allocation.vocab.labels import ALLOCATOR_LABEL
from tests.support.configs import DRA_COHORT, OPERATOR_COHORT, PLUGIN_COHORT, _base_config, cohort, hybrid_node

pytestmark = pytest.mark.unit

LEDGER_REF = "gpu-system/gpu-allocation-ledger"
PLUGIN_HOSTS = {"eks.amazonaws.com/compute-type": "hybrid", "workload.example.com/gpu-allocation": "device-plugin"}


def _config(*cohorts: dict[str, Any], **overrides: Any) -> StackConfig:
    return StackConfig.model_validate(_base_config(cohorts=list(cohorts), **overrides))


def _ledger(*cohorts: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return ownership_map(_config(*cohorts, **overrides))


def _busy_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ai", "uid": name},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }


NODES = [hybrid_node("gpu-1", "device-plugin"), hybrid_node("gpu-2", "device-plugin"), hybrid_node("gpu-3", "dra")]


def _problems(config: StackConfig, ledger: dict[str, Any] | None, pods: list[dict[str, Any]] = []) -> list[str]:  # noqa: B006
    consumers = consumers_by_node(pods, [])
    typed = ledger_of(ledger, LEDGER_REF)
    return [str(p) for p in check_ledger(config, typed, None, NODES, consumers, "prod", LEDGER_REF)]


def test_a_one_step_owner_change_is_refused_with_the_pods_in_the_way_and_the_migrate_command() -> None:
    stack = _config(cohort(PLUGIN_COHORT, owner="dra", nodeSelector=PLUGIN_HOSTS))
    problems = _problems(stack, _ledger(cohort(PLUGIN_COHORT)), [_busy_pod("train", "gpu-2")])

    assert len(problems) == 1
    text = problems[0]
    assert text.startswith(
        "eks-hybrid-gpu:cohorts[0].owner: changes cohort plugin's owner in one step, device-plugin -> dra (the "
        f"cluster's ledger {LEDGER_REF} records device-plugin), on nodes gpu-1, gpu-2; GPUs in use there: pod "
        "ai/train holds nvidia.com/gpu=1 (container main) through the device plugin; "
    )
    assert "`eks-hybrid-gpu migrate --stack prod --cohort plugin --to dra --drain`" in text
    assert "keeps the hosts' selector" not in text  # the stack already pins the hosts' selector
    assert text.endswith("see docs/migrating-owners.md")


def test_a_default_selector_that_changes_with_the_owner_is_still_the_same_cohort() -> None:
    stack = _config(cohort(DRA_COHORT, name="plugin"))
    (text,) = _problems(stack, _ledger(cohort(PLUGIN_COHORT)))

    assert "device-plugin -> dra" in text
    assert "GPUs in use there: none" in text
    assert "`eks-hybrid-gpu migrate --stack prod --cohort plugin --to dra`," in text
    assert "it keeps the hosts' selector {'eks.amazonaws.com/compute-type': 'hybrid', " in text


def test_the_reverse_change_is_refused_too() -> None:
    stack = _config(cohort(PLUGIN_COHORT, name="dra", nodeSelector=hybrid_node("x", "dra")["metadata"]["labels"]))
    (text,) = _problems(stack, _ledger(cohort(DRA_COHORT)))

    assert "dra -> device-plugin" in text
    assert "on nodes gpu-3" in text
    assert "--cohort dra --to device-plugin" in text


def test_a_new_cohort_a_removed_cohort_and_an_unchanged_one_are_not_migrations() -> None:
    ledger = _ledger(cohort(PLUGIN_COHORT), cohort(DRA_COHORT))

    assert _problems(_config(cohort(PLUGIN_COHORT)), ledger) == []  # dra removed
    assert _problems(_config(cohort(PLUGIN_COHORT), cohort(DRA_COHORT), cohort(PLUGIN_COHORT, name="b")), ledger) == []
    assert _problems(_config(cohort(PLUGIN_COHORT)), None) == []  # no ledger yet: a first install


def test_clusterpolicy_to_gpucluster_in_place_is_refused_with_the_new_installation_path() -> None:
    ledger = _ledger(cohort(OPERATOR_COHORT))
    stack = _config(cohort(OPERATOR_COHORT), operator={"mode": "gpu-cluster"})
    (text,) = _problems(stack, ledger)

    assert ledger["operatorMode"] == "cluster-policy"
    assert "gpu-operator (cluster-policy) -> gpu-operator (gpu-cluster)" in text
    assert "an in-place migration from ClusterPolicy to GPUCluster is not supported" in text
    assert "use the new-installation path: remove the cohort from the stack and run `pulumi up`" in text
    assert "eks-hybrid-gpu migrate" not in text


def test_a_standalone_dra_release_to_gpucluster_is_refused_with_the_new_installation_path() -> None:
    stack = _config(cohort(OPERATOR_COHORT, name="dra", nodeSelector=NODES[2]["metadata"]["labels"]))
    stack = stack.model_copy(update={"operator": stack.operator.model_copy(update={"mode": "gpu-cluster"})})
    (text,) = _problems(stack, _ledger(cohort(DRA_COHORT)))

    assert "dra -> gpu-operator (gpu-cluster)" in text
    assert "an in-place migration from a standalone DRA release to GPUCluster is not supported" in text
    assert "use the new-installation path" in text


def test_only_device_plugin_and_dra_are_migrated_both_ways() -> None:
    assert unsupported("device-plugin", None, "dra", None) is None
    assert unsupported("dra", None, "device-plugin", None) is None
    to_operator = unsupported("device-plugin", None, "gpu-operator", "cluster-policy")
    assert to_operator is not None
    assert to_operator.startswith("`eks-hybrid-gpu migrate` changes device-plugin <-> dra only")
    assert unsupported("gpu-operator", "gpu-cluster", "gpu-operator", "cluster-policy") is not None


RECORD = {
    "cohort": "plugin",
    "from": "device-plugin",
    "to": "dra",
    "phase": "remove",
    "nodeSelector": PLUGIN_HOSTS,
    "nodes": ["gpu-1", "gpu-2"],
    "cordonedByUs": ["gpu-1"],
    "drain": True,
}


@pytest.mark.parametrize(
    ("phase", "installs"),
    [
        ("cordon", "device-plugin"),
        ("remove", None),
        ("wait-unpublished", None),
        ("install", "dra"),
        ("wait-published", "dra"),
        ("uncordon", "dra"),
    ],
)
def test_each_phase_installs_the_old_owner_none_or_the_new_one(phase: str, installs: str | None) -> None:
    migration = parse_migration({**RECORD, "phase": phase}, "cm")
    assert migration is not None
    assert migration.installs == installs
    assert paused_cohorts(migration) == (frozenset({"plugin"}) if installs is None else frozenset())
    # Whatever the stack file says meanwhile, the record decides the owner and keeps the hosts' selector.
    for written in ("device-plugin", "dra"):
        raw = _base_config(cohorts=[cohort(PLUGIN_COHORT, owner=written), cohort(DRA_COHORT, name="other")])
        changed, problems = apply_to_raw(raw, migration)
        assert problems == []
        assert changed["cohorts"][0]["owner"] == (installs or "device-plugin")
        assert changed["cohorts"][0]["nodeSelector"] == PLUGIN_HOSTS
        assert changed["cohorts"][1] == raw["cohorts"][1]
        assert raw["cohorts"][0]["owner"] == written  # the caller's raw config is not changed


def test_a_stack_that_dropped_the_migrating_cohort_is_refused() -> None:
    migration = parse_migration(RECORD, "cm")
    assert migration is not None
    _, problems = apply_to_raw(_base_config(cohorts=[cohort(DRA_COHORT)]), migration)

    assert [str(p) for p in problems] == [
        "eks-hybrid-gpu:cohorts: has no cohort plugin, which is mid-migration in the cluster (cohort plugin from "
        "device-plugin to dra, phase remove); put it back and finish with `eks-hybrid-gpu migrate --stack STACK "
        "--cohort plugin --to dra`"
    ]


def test_the_record_round_trips_and_a_bad_one_is_refused() -> None:
    migration = parse_migration(RECORD, "cm")
    assert migration is not None
    assert migration.as_json() == RECORD
    assert migration.at("install").phase == "install"
    assert parse_migration(None, "cm") is None
    with pytest.raises(LedgerError, match="cm lacks a usable field"):
        parse_migration({"cohort": "plugin"}, "cm")
    with pytest.raises(LedgerError, match="records phase 'later' of device-plugin -> dra"):
        parse_migration({**RECORD, "phase": "later"}, "cm")
    with pytest.raises(LedgerError, match="device-plugin -> gpu-operator"):
        parse_migration({**RECORD, "to": "gpu-operator"}, "cm")


def test_the_ledger_is_parsed_in_one_place() -> None:
    def configmap(text: str | None) -> dict[str, Any]:
        data = {} if text is None else {"ownership.json": text}
        return {"metadata": {"namespace": "gpu-system", "name": "gpu-allocation-ledger"}, "data": data}

    assert parse_record(None) is None
    assert parse_record(configmap(None)) is None
    assert parse_record(configmap(json.dumps({"cohorts": {}}))) == {"cohorts": {}}
    with pytest.raises(LedgerError, match=r"gpu-allocation-ledger key ownership\.json is not valid JSON"):
        parse_record(configmap("{"))
    with pytest.raises(LedgerError, match="is not a JSON object"):
        parse_record(configmap("[1]"))
    # The one reader the pack uses too: bounded in depth, and a ledger's cohorts must be usable.
    with pytest.raises(LedgerError, match="nests deeper than"):
        parse_record(configmap("[" * 100_000 + "]" * 100_000))
    with pytest.raises(LedgerError, match=r"key ownership\.json has no 'cohorts' object"):
        parse_record(configmap(json.dumps({"operatorMode": None})))
    with pytest.raises(LedgerError, match=r"cohort 'a' nodeSelector is not a map of label keys to label values"):
        parse_record(configmap(json.dumps({"cohorts": {"a": {"nodeSelector": {"k": 1}}}})))


def test_the_preflight_reads_the_ledger_and_skips_the_cohort_mid_migration() -> None:
    stack = _config(cohort(PLUGIN_COHORT, owner="dra", nodeSelector=PLUGIN_HOSTS))
    records = Records("gpu-system", ledger_of(_ledger(cohort(PLUGIN_COHORT)), LEDGER_REF), None)
    live = LiveCluster(NODES[:2], records=records)
    refused = [str(p) for p in check(stack, live, "prod")]
    assert any("--cohort plugin --to dra" in p for p in refused)

    migration = Migration("plugin", "device-plugin", "dra", "install", PLUGIN_HOSTS)
    assert [p for p in check(stack, live, "prod", migration) if "one step" in str(p)] == []
    assert not [p for p in check(stack, LiveCluster(NODES[:2]), "prod") if "one step" in str(p)]


def test_review_shows_an_owner_change_as_the_phases_migrate_runs() -> None:
    from eks_hybrid_gpu.review.report import owner_migrations

    base = _ledger(cohort(PLUGIN_COHORT), cohort(DRA_COHORT))
    head = _ledger(cohort(PLUGIN_COHORT, owner="dra", nodeSelector=PLUGIN_HOSTS), cohort(DRA_COHORT, name="dra2"))
    text = "\n".join(owner_migrations(base, head, "prod"))

    assert "- cohort `plugin`: owner `device-plugin` → `dra` on the hosts `" in text
    assert "run `eks-hybrid-gpu migrate --stack prod --cohort plugin --to dra`" in text
    assert "  1. [cordon] cordon the cohort's nodes" in text
    assert "  3. [wait-unpublished] wait until no allocator pod is left" in text
    assert "  6. [uncordon]" in text
    assert "`dra`" not in text.split("cohort `plugin`", 1)[0]  # the removed and the added cohort are no migration
    operator = owner_migrations(
        _ledger(cohort(OPERATOR_COHORT)), _ledger(cohort(OPERATOR_COHORT), operator={"mode": "gpu-cluster"}), "prod"
    )
    assert "is not supported in place: an in-place migration from ClusterPolicy to GPUCluster" in operator[0]
    assert owner_migrations(base, base, "prod") == []


EKS = {"source": "eks", "name": "hybrid-gpu", "region": "us-west-2", "kubernetesVersion": "1.34.4"}


@pytest.mark.parametrize(
    ("phase", "plugins", "dra_drivers", "jobs"),
    [("cordon", 1, 0, 1), ("remove", 0, 0, 0), ("wait-unpublished", 0, 0, 0), ("install", 0, 1, 1)],
)
def test_a_plain_pulumi_up_mid_migration_installs_what_the_recorded_phase_allows(
    run: Any, monkeypatch: pytest.MonkeyPatch, phase: str, plugins: int, dra_drivers: int, jobs: int
) -> None:
    # The stack file already says dra (the refused one-step edit); the record decides.
    config = _base_config(cluster=EKS, cohorts=[cohort(PLUGIN_COHORT, owner="dra")])
    ledger = ledger_of(_ledger(cohort(PLUGIN_COHORT)), LEDGER_REF)
    records = Records("gpu-system", ledger, parse_migration({**RECORD, "phase": phase}, "cm"))
    nodes = [hybrid_node("gpu-1", "device-plugin", operands_opt_out=False)]
    monkeypatch.setattr("components.program.read_cluster", lambda *_a: LiveCluster(nodes, records=records))

    recorder = run(config)

    assert len(recorder.of_type("eks-hybrid-gpu:owners:DevicePlugin")) == plugins
    assert len(recorder.of_type("eks-hybrid-gpu:owners:DraDriver")) == dra_drivers
    assert len(recorder.jobs()) == jobs
    ledger = json.loads(recorder.named("gpu-ledger-configmap").inputs["data"]["ownership.json"])
    entry = ledger["cohorts"]["plugin"]
    assert entry["nodeSelector"] == PLUGIN_HOSTS  # the hosts' selector, not the one the new owner would default to
    if plugins + dra_drivers == 0:
        assert entry["installed"] is False
        assert ledger["migration"]["phase"] == phase
    else:
        assert "migration" not in ledger
        assert entry["owner"] == ("device-plugin" if plugins else "dra")


MOVED_HOSTS = {**PLUGIN_HOSTS, ALLOCATOR_LABEL: "dra"}
OLD_HOSTS = {**PLUGIN_HOSTS, ALLOCATOR_LABEL: "device-plugin"}
CHART = "kubernetes:helm.sh/v4:Chart"


@pytest.mark.parametrize(
    ("phase", "plugins", "beside"), [("install", 1, True), ("move-nodes", 1, True), ("remove", 0, False)]
)
def test_one_node_at_a_time_installs_the_new_owner_beside_the_old_under_the_cohorts_own_child_name(
    run: Any, monkeypatch: pytest.MonkeyPatch, phase: str, plugins: int, beside: bool
) -> None:
    config = _base_config(cluster=EKS, cohorts=[cohort(PLUGIN_COHORT, owner="dra")])
    record = {**RECORD, "phase": phase, "toSelector": MOVED_HOSTS, "moved": ["gpu-1"]}
    records = Records(
        "gpu-system", ledger_of(_ledger(cohort(PLUGIN_COHORT)), LEDGER_REF), parse_migration(record, "cm")
    )
    nodes = [
        hybrid_node("gpu-1", "device-plugin", operands_opt_out=False, labels={ALLOCATOR_LABEL: "dra"}),
        hybrid_node("gpu-2", "device-plugin", operands_opt_out=False, labels={ALLOCATOR_LABEL: "device-plugin"}),
    ]
    monkeypatch.setattr("components.program.read_cluster", lambda *_a: LiveCluster(nodes, records=records))

    recorder = run(config)

    assert [r.name for r in recorder.of_type("eks-hybrid-gpu:owners:DevicePlugin")] == ["gpu-plugin"] * plugins
    charts = {"kubeletPlugin" in r.inputs["values"]: r.inputs["values"] for r in recorder.of_type(CHART)}
    if plugins:
        assert charts[False]["nodeSelector"] == OLD_HOSTS
    assert charts[True]["kubeletPlugin"]["nodeSelector"] == MOVED_HOSTS
    # The DRA driver has the cohort's own child name whether beside or alone: the last phase keeps it as it is.
    (driver,) = recorder.of_type("eks-hybrid-gpu:owners:DraDriver")
    assert driver.name == "gpu-plugin"
    ledger = json.loads(recorder.named("gpu-ledger-configmap").inputs["data"]["ownership.json"])
    entry = ledger["cohorts"]["plugin"]
    if beside:
        assert (entry["owner"], entry["nodeSelector"]) == ("device-plugin", OLD_HOSTS)
        assert entry["beside"] == {"owner": "dra", "nodeSelector": MOVED_HOSTS, "namespace": "gpu-dra-system"}
        assert ledger["migration"]["moved"] == ["gpu-1"]
    else:
        assert (entry["owner"], entry["nodeSelector"]) == ("dra", MOVED_HOSTS)
        assert "beside" not in entry
    namespaces = {r.inputs["metadata"]["name"] for r in recorder.of_type("kubernetes:core/v1:Namespace")}
    assert "gpu-dra-system" in namespaces


def test_a_one_step_flip_registers_nothing(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _base_config(cluster=EKS, cohorts=[cohort(PLUGIN_COHORT, owner="dra", nodeSelector=PLUGIN_HOSTS)])
    records = Records("gpu-system", ledger_of(_ledger(cohort(PLUGIN_COHORT)), LEDGER_REF), None)
    nodes = [hybrid_node("gpu-1", "device-plugin", operands_opt_out=False)]
    monkeypatch.setattr("components.program.read_cluster", lambda *_a: LiveCluster(nodes, records=records))

    with pytest.raises(pulumi.RunError) as refused:
        run(config)

    assert "`eks-hybrid-gpu migrate --stack test --cohort plugin --to dra`" in str(refused.value)


def test_a_paused_cohort_is_not_judged_by_the_publishers_it_is_waiting_to_see_go(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _base_config(cluster=EKS, cohorts=[cohort(PLUGIN_COHORT)])
    # A host-level device plugin (allocatable with no pod): a second publisher beside the DRA owner to come.
    host = {
        **hybrid_node("gpu-1", "device-plugin", operands_opt_out=False),
        "status": {"allocatable": {"nvidia.com/gpu": "4"}},
    }
    nodes = [host]
    for phase, refused in (("remove", False), ("install", True)):
        ledger = ledger_of(_ledger(cohort(PLUGIN_COHORT)), LEDGER_REF)
        records = Records("gpu-system", ledger, parse_migration({**RECORD, "phase": phase}, "cm"))
        live = LiveCluster(nodes, records=records)
        monkeypatch.setattr("components.program.read_cluster", lambda *_a, live=live: live)
        if refused:
            with pytest.raises(pulumi.RunError, match="selects node gpu-1, whose GPUs are already published by"):
                run(config)
        else:
            assert run(config).of_type("eks-hybrid-gpu:owners:DevicePlugin") == []
