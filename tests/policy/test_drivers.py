"""driver-ownership-consistent, driver-verification-declared, chart-version-pinned, operator-hooks-kept."""

from __future__ import annotations

from typing import Any

import pytest

from policy.gpu_allocation.rules.drivers import (
    CHART_VERSION_PINNED,
    DRIVER_OWNERSHIP_CONSISTENT,
    DRIVER_VERIFICATION_DECLARED,
    OPERATOR_HOOKS_KEPT,
)
from tests.support.policy_harness import (
    DP_CHART,
    DRA_CHART,
    OPERATOR_SELECTOR,
    Harness,
    Item,
    real_records,
    rendered_by,
)

pytestmark = pytest.mark.policy

UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
UNKNOWN_OBJECT = "dd056dcd-154b-4c76-9bd3-c8f88648b5ff"
UNKNOWN_BOOL = "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7"


def operator_ledger(harness: Harness, mode: str, **entry: Any) -> Item:
    cohorts = {"operator": harness.cohort_entry("gpu-operator", OPERATOR_SELECTOR, **entry)}
    return harness.item(harness.ledger(cohorts, operator_mode=mode), name="ledger")


def check(harness: Harness, policy: Any, item: Item, config: dict[str, Any] | None = None) -> Any:
    return harness.resource(policy, item.resource_type, item.props, name=item.name, config=config)


# --------------------------------------------------------------------------- driver ownership


def test_disabled_driver_with_verified_cohort_passes(harness: Harness) -> None:
    items = [harness.operator("gpu-cluster"), operator_ledger(harness, "gpu-cluster", hostDriverVerified=True)]
    for policy in (DRIVER_OWNERSHIP_CONSISTENT, DRIVER_VERIFICATION_DECLARED):
        outcome = harness.stack(policy, items)
        harness.passes(outcome)


def test_disabled_driver_on_an_unverified_cohort(harness: Harness) -> None:
    items = [harness.operator("gpu-cluster"), operator_ledger(harness, "gpu-cluster", hostDriverVerified=False)]
    outcome = harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items)
    assert outcome.one() == (
        "kubernetes:helm.sh/v3:Release 'gpu-operator-release' sets driver.enabled=false but cohort 'operator' "
        "declares hostDriverVerified: false. Without an Operator driver the GPUs need a verified host driver "
        "(being on premises does not imply one exists). Verify it with nvidia-smi and set "
        "eks-hybrid-gpu:cohorts[i].hostDriverVerified (cohort 'operator') to true, or set "
        "eks-hybrid-gpu:operator.driverEnabled to true."
    )
    config = {"verifiedCohorts": ["operator"]}
    harness.passes(harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items, config))


def test_unknown_verification_is_advisory_only(harness: Harness) -> None:
    items = [harness.operator("gpu-cluster"), operator_ledger(harness, "gpu-cluster")]
    harness.passes(harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items))
    message = harness.stack(DRIVER_VERIFICATION_DECLARED, items).one()
    assert message == (
        "kubernetes:helm.sh/v3:Release 'gpu-operator-release' sets driver.enabled=false, but the stack does not "
        "show whether 'operator' has a verified host driver (no hostDriverVerified in the ledger, not in "
        "verifiedCohorts). Review: verify the driver and toolkit on every host (nvidia-smi), then set "
        "eks-hybrid-gpu:cohorts[i].hostDriverVerified to true or list the cohort in this policy's verifiedCohorts."
    )
    config = {"verifiedCohorts": ["operator"]}
    harness.passes(harness.stack(DRIVER_VERIFICATION_DECLARED, items, config))


def test_dra_root_next_to_an_operator_managed_driver(harness: Harness) -> None:
    values = harness.values("operator-cluster-policy-values.yaml")
    del values["driver"]
    items = [*harness.dra(skip_crds=True), harness.operator("cluster-policy", values)]
    message = harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items).one()
    assert message == (
        "kubernetes:apps/v1:DaemonSet 'gpu-dra-system/dra-driver-nvidia-gpu-kubelet-plugin' (rendered by "
        "kubernetes:helm.sh/v4:Chart 'dra-chart') container 'gpus' env NVIDIA_DRIVER_ROOT is '/' while "
        "kubernetes:helm.sh/v3:Release 'gpu-operator-release' manages the driver (driver.enabled is null, default "
        "true). An Operator-installed driver lives under /run/nvidia/driver, so the DRA plugin would prepare "
        "devices against a host driver that is not the one in use. Set eks-hybrid-gpu:operator.driverEnabled to "
        "false with a verified host driver, or keep the DRA cohort out of an Operator-managed driver deployment."
    )
    # The Operator's driver root, rendered: nothing to refuse.
    items = [*harness.dra(variant="root", skip_crds=True), harness.operator("cluster-policy", values)]
    harness.passes(harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items))


def test_dra_root_from_release_values(harness: Harness) -> None:
    values = harness.values("operator-cluster-policy-values.yaml")
    del values["driver"]
    dra_values = harness.values("dra-values.yaml")
    del dra_values["nvidiaDriverRoot"]
    release = harness.helm_release("dra-release", DRA_CHART, "0.5.0", dra_values, skipCrds=True)
    items = [release, harness.operator("cluster-policy", values)]
    assert (
        harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items)
        .one()
        .startswith("kubernetes:helm.sh/v3:Release 'dra-release' values nvidiaDriverRoot is '/' (chart default) while")
    )
    dra_values["nvidiaDriverRoot"] = "/run/nvidia/driver"
    release = harness.helm_release("dra-release", DRA_CHART, "0.5.0", dra_values, skipCrds=True)
    assert (
        harness.stack(DRIVER_OWNERSHIP_CONSISTENT, [release, harness.operator("cluster-policy", values)]).violations
        == []
    )


def test_driver_policies_without_operator_are_not_applicable(harness: Harness) -> None:
    assert harness.not_applicable(harness.stack(DRIVER_OWNERSHIP_CONSISTENT, harness.dra())) == (
        "the stack installs no GPU Operator"
    )
    operator = harness.operator("cluster-policy", {"driver": {"enabled": True}})
    assert harness.not_applicable(harness.stack(DRIVER_VERIFICATION_DECLARED, [operator])) == (
        "no GPU Operator with driver.enabled=false"
    )


def test_driver_unknowns_do_not_crash(harness: Harness) -> None:
    operator = harness.operator("cluster-policy", {"driver": {"enabled": UNKNOWN_BOOL}})
    ledger = operator_ledger(harness, "cluster-policy")
    ledger.props["data"] = UNKNOWN_OBJECT
    release = harness.helm_release("dra-release", DRA_CHART, "0.5.0", {"nvidiaDriverRoot": UNKNOWN_STRING})
    chart = harness.dra()
    for item in chart:
        if item.resource_type == "kubernetes:apps/v1:DaemonSet":
            for container in item.props["spec"]["template"]["spec"]["containers"]:
                container["env"] = UNKNOWN_OBJECT
    items = [operator, ledger, release, *chart]
    harness.passes(harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items))
    # An unknown driver.enabled is no driver.enabled=false: there is no verification to declare yet.
    outcome = harness.stack(DRIVER_VERIFICATION_DECLARED, items)
    assert harness.not_applicable(outcome) == "no GPU Operator with driver.enabled=false"


# --------------------------------------------------------------------------- chart versions


@pytest.mark.parametrize(
    ("chart", "version"),
    [
        (DP_CHART, "0.20.0"),
        ("nvidia-device-plugin", "0.20.0"),
        (DRA_CHART, "0.5.0"),
        ("gpu-operator", "v26.7.0"),
        (DP_CHART, None),
        ("../shared/charts/dra-driver-nvidia-gpu-0.4.1.tgz", None),
        (DRA_CHART, "0.5.0-rc.1"),
    ],
)
def test_exact_versions_pass(harness: Harness, chart: str, version: str | None) -> None:
    item = harness.helm_release("chart", chart, version, {})
    outcome = check(harness, CHART_VERSION_PINNED, item)
    harness.passes(outcome)


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        (None, "is not set, so Helm installs whatever is latest"),
        ("", "is not set, so Helm installs whatever is latest"),
        ("latest", "is a range or tag, not an exact version (no ^, ~, >, *, x, latest)"),
        ("^0.20.0", "is a range or tag"),
        ("~0.20", "is a range or tag"),
        (">=0.20.0", "is a range or tag"),
        ("*", "is a range or tag"),
        ("0.20.x", "is a range or tag"),
        ("0.20", "is a range or tag"),
        ("0.20.0 || 0.19.3", "is a range or tag"),
    ],
)
def test_floating_versions_are_refused(harness: Harness, version: str | None, problem: str) -> None:
    item = harness.helm_release("plugin-release", "nvidia-device-plugin", version, {})
    message = check(harness, CHART_VERSION_PINNED, item).one()
    assert message.startswith("kubernetes:helm.sh/v3:Release 'plugin-release': chart 'nvidia-device-plugin' version ")
    assert problem in message
    assert message.endswith(
        "A floating version changes the installed allocator without review. Set "
        "eks-hybrid-gpu:charts.devicePlugin.version to an exact reviewed version (e.g. 0.20.0, 0.5.0, v26.7.0)."
    )


def test_version_paths_per_chart_and_prerelease_config(harness: Harness) -> None:
    release = harness.helm("op", "gpu-operator", "26.x", {}, resource_type=harness.release)
    assert "eks-hybrid-gpu:charts.gpuOperator.version" in check(harness, CHART_VERSION_PINNED, release).one()
    dra = harness.helm_release("dra", DRA_CHART, "0.5.0-rc.1", {})
    message = check(harness, CHART_VERSION_PINNED, dra, {"allowPrerelease": False}).one()
    assert "version '0.5.0-rc.1' is a pre-release" in message
    assert "eks-hybrid-gpu:charts.draDriver.version" in message


def test_version_unknown_and_not_applicable(harness: Harness) -> None:
    item = harness.helm_release("plugin-release", "nvidia-device-plugin", UNKNOWN_STRING, {})
    assert (
        harness.not_applicable(check(harness, CHART_VERSION_PINNED, item))
        == "the chart version is unknown during preview"
    )
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-system"}}
    assert harness.not_applicable(harness.manifest_check(CHART_VERSION_PINNED, namespace)) == (
        "not a Helm Chart or Release, and no eks-hybrid-gpu.io/chart annotation"
    )
    stamped = {**namespace, "metadata": {"name": "x", "annotations": {"eks-hybrid-gpu.io/chart": UNKNOWN_STRING}}}
    assert harness.not_applicable(harness.manifest_check(CHART_VERSION_PINNED, stamped)) == (
        "the chart annotation is unknown during preview"
    )


def test_chart_v4_with_empty_props_is_not_applicable(harness: Harness) -> None:
    """The finding: a Chart v4's version is not sent; 'chart null version null' was a false refusal."""
    for record in [r for r in real_records("local", "resource") if r["type"] == harness.chart]:
        outcome = harness.real_resource(CHART_VERSION_PINNED, record)
        assert harness.not_applicable(outcome) == (
            "Chart v4 inputs are not sent to policy analyzers (a remote component arrives with empty props); the "
            "version is checked on the eks-hybrid-gpu.io/chart annotation of every object it renders"
        )


def test_real_stamped_objects_of_the_local_stack_are_pinned(harness: Harness) -> None:
    stamped = [
        r
        for r in real_records("local", "resource")
        if "eks-hybrid-gpu.io/chart" in ((r["props"].get("metadata") or {}).get("annotations") or {})
    ]
    assert len(stamped) == 26
    for record in stamped:
        outcome = harness.real_resource(CHART_VERSION_PINNED, record)
        harness.passes(outcome)


def test_real_floating_chart_is_refused_on_what_it_renders(harness: Harness) -> None:
    records = rendered_by("floating", "floating-chart", "resource")
    assert len(records) == 5
    messages = [harness.real_resource(CHART_VERSION_PINNED, r).one() for r in records]
    daemonset = next(
        m
        for m in messages
        if m.startswith("kubernetes:apps/v1:DaemonSet 'gpu-system/hybrid-gpu-floating-nvidia-device-plugin'")
    )
    assert daemonset == (
        "kubernetes:apps/v1:DaemonSet 'gpu-system/hybrid-gpu-floating-nvidia-device-plugin' (rendered by Chart "
        "'floating-chart'): annotation eks-hybrid-gpu.io/chart says chart 'nvidia-device-plugin' version '^0.20.0' "
        "is a range or tag, not an exact version (no ^, ~, >, *, x, latest). A floating version changes the "
        "installed allocator without review. Set eks-hybrid-gpu:charts.devicePlugin.version to an exact reviewed "
        "version (e.g. 0.20.0, 0.5.0, v26.7.0)."
    )


@pytest.mark.parametrize(
    ("stamp", "problem"),
    [
        ("nvidia-device-plugin@0.20.0", None),
        ("/work/shared/charts/nvidia-device-plugin-0.20.0.tgz@", None),
        ("oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu@0.5.0", None),
        ("nvidia-device-plugin@", "version '' is not set, so Helm installs whatever is latest"),
        ("oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu@latest", "is a range or tag"),
    ],
)
def test_chart_annotation_versions(harness: Harness, stamp: str, problem: str | None) -> None:
    record = next(r for r in rendered_by("local", "gpu-plugin-chart", "resource") if r["type"].endswith(":DaemonSet"))
    record["props"]["metadata"]["annotations"]["eks-hybrid-gpu.io/chart"] = stamp
    outcome = harness.real_resource(CHART_VERSION_PINNED, record)
    if problem is None:
        harness.passes(outcome)
    else:
        assert problem in outcome.one()
        path = "draDriver" if "dra-driver" in stamp else "devicePlugin"
        assert f"Set eks-hybrid-gpu:charts.{path}.version to an exact reviewed version" in outcome.one()


# --------------------------------------------------------------------------- hooks


def test_operator_release_with_hooks_passes(harness: Harness) -> None:
    for mode in ("gpu-cluster", "cluster-policy"):
        outcome = check(harness, OPERATOR_HOOKS_KEPT, harness.operator(mode))
        harness.passes(outcome)


@pytest.mark.parametrize(
    ("option", "effect"),
    [
        ("disableWebhooks", "prevents every Helm hook from running (--no-hooks)"),
        ("disableCRDHooks", "skips the Operator's CRD hooks (--no-crd-hook)"),
        ("skipCrds", "skips the CRDs the hooks upgrade and clean up (--skip-crds)"),
    ],
)
def test_hook_bypass_options(harness: Harness, option: str, effect: str) -> None:
    release = harness.operator("gpu-cluster")
    release.props[option] = True
    assert check(harness, OPERATOR_HOOKS_KEPT, release).one() == (
        f"kubernetes:helm.sh/v3:Release 'gpu-operator-release' sets {option}: true, which {effect}. The Operator's "
        "pre-delete cleanup-gpucluster/cleanup-crd and pre-upgrade upgrade-crd hooks drain finalizers and upgrade "
        "CRDs in order; the guide forbids --no-hooks. Install it as helm.v3.Release with hooks on: remove "
        f"{option} from the Operator Release."
    )


def test_upgrade_crd_hook_disabled(harness: Harness) -> None:
    values = harness.values("operator-gpu-cluster-values.yaml")
    values["operator"] = {"upgradeCRD": False}
    message = check(harness, OPERATOR_HOOKS_KEPT, harness.operator("gpu-cluster", values)).one()
    assert message.startswith(
        "kubernetes:helm.sh/v3:Release 'gpu-operator-release' values operator.upgradeCRD is false, which removes "
        "the pre-upgrade upgrade-crd hook"
    )


def test_operator_as_chart_with_visible_inputs_drops_hooks(harness: Harness) -> None:
    chart = harness.helm("gpu-operator", "gpu-operator", "v26.7.0", harness.values("operator-gpu-cluster-values.yaml"))
    message = check(harness, OPERATOR_HOOKS_KEPT, chart).one()
    assert message.startswith(
        "kubernetes:helm.sh/v4:Chart 'gpu-operator' installs the GPU Operator with kubernetes:helm.sh/v4:Chart, "
        "which renders the chart without hooks."
    )


def test_operator_rendered_by_chart_v4_drops_hooks(harness: Harness) -> None:
    """The Chart itself arrives empty; its Operator Deployment carries the chart's labels and a Chart parent."""
    chart_urn = "urn:pulumi:test::eks-hybrid-gpu::kubernetes:helm.sh/v4:Chart::operator-chart"
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "gpu-operator",
            "namespace": "gpu-operator",
            "labels": {"app.kubernetes.io/name": "gpu-operator", "helm.sh/chart": "gpu-operator-v26.7.0"},
        },
        "spec": {"template": {"spec": {"containers": [{"name": "gpu-operator", "image": "nvcr.io/x:v26.7.0"}]}}},
    }
    record = {
        "type": "kubernetes:apps/v1:Deployment",
        "name": "operator-chart:gpu-operator/gpu-operator",
        "urn": "urn:pulumi:test::eks-hybrid-gpu::kubernetes:helm.sh/v4:Chart$kubernetes:apps/v1:Deployment::"
        "operator-chart:gpu-operator/gpu-operator",
        "parent": chart_urn,
        "props": deployment,
    }
    assert (
        harness.real_resource(OPERATOR_HOOKS_KEPT, record)
        .one()
        .startswith(
            "kubernetes:apps/v1:Deployment 'gpu-operator/gpu-operator' is a GPU Operator workload rendered by Chart "
            "'operator-chart' (kubernetes:helm.sh/v4:Chart), which installs the chart without its hooks."
        )
    )
    chart = {"type": harness.chart, "name": "operator-chart", "urn": chart_urn, "parent": None, "props": {}}
    assert harness.not_applicable(harness.real_resource(OPERATOR_HOOKS_KEPT, chart)) == (
        "Chart v4 inputs are not sent to policy analyzers (a remote component arrives with empty props); a GPU "
        "Operator it renders is refused on its workloads"
    )
    # The same Deployment applied on its own (no Chart parent) is no install method to refuse.
    record["urn"], record["parent"] = "urn:pulumi:test::eks-hybrid-gpu::kubernetes:apps/v1:Deployment::op", None
    assert harness.not_applicable(harness.real_resource(OPERATOR_HOOKS_KEPT, record)) == "not the GPU Operator chart"


def test_real_operator_releases_keep_their_hooks(harness: Harness) -> None:
    releases = [r for r in real_records("operators", "resource") if r["type"] == harness.release]
    assert len(releases) == 2
    for record in releases:
        for policy in (OPERATOR_HOOKS_KEPT, CHART_VERSION_PINNED):
            outcome = harness.real_resource(policy, record)
            harness.passes(outcome)


def test_hooks_unknown_and_not_applicable(harness: Harness) -> None:
    release = harness.operator("gpu-cluster", disableWebhooks=UNKNOWN_BOOL)
    release.props["values"] = UNKNOWN_OBJECT
    harness.passes(check(harness, OPERATOR_HOOKS_KEPT, release))
    plugin = harness.helm_release("plugin-release", DP_CHART, "0.20.0", {})
    assert harness.not_applicable(check(harness, OPERATOR_HOOKS_KEPT, plugin)) == "not the GPU Operator chart"
