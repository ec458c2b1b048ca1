"""driver-ownership-consistent, driver-verification-declared, chart-version-pinned, operator-hooks-kept."""

from __future__ import annotations

from typing import Any

import pytest

from policy.rules.drivers import (
    CHART_VERSION_PINNED,
    DRIVER_OWNERSHIP_CONSISTENT,
    DRIVER_VERIFICATION_DECLARED,
    OPERATOR_HOOKS_KEPT,
)

from .conftest import DP_CHART, DRA_CHART, DRA_SELECTOR, OPERATOR_SELECTOR, Harness, Item

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
        assert outcome.violations == []
        assert outcome.not_applicable is None


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
    assert harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items, config).violations == []


def test_unknown_verification_is_advisory_only(harness: Harness) -> None:
    items = [harness.operator("gpu-cluster"), operator_ledger(harness, "gpu-cluster")]
    assert harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items).violations == []
    message = harness.stack(DRIVER_VERIFICATION_DECLARED, items).one()
    assert message == (
        "kubernetes:helm.sh/v3:Release 'gpu-operator-release' sets driver.enabled=false, but the stack does not "
        "show whether 'operator' has a verified host driver (no hostDriverVerified in the ledger, not in "
        "verifiedCohorts). Review: verify the driver and toolkit on every host (nvidia-smi), then set "
        "eks-hybrid-gpu:cohorts[i].hostDriverVerified to true or list the cohort in this policy's verifiedCohorts."
    )
    config = {"verifiedCohorts": ["operator"]}
    assert harness.stack(DRIVER_VERIFICATION_DECLARED, items, config).violations == []


def test_dra_root_next_to_an_operator_managed_driver(harness: Harness) -> None:
    values = harness.values("operator-cluster-policy-values.yaml")
    del values["driver"]
    items = [*harness.dra(skipCrds=True), harness.operator("cluster-policy", values)]
    message = harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items).one()
    assert message == (
        "kubernetes:helm.sh/v4:Chart 'dra-chart' values nvidiaDriverRoot is '/' while "
        "kubernetes:helm.sh/v3:Release 'gpu-operator-release' manages the driver (driver.enabled is null, default "
        "true). An Operator-installed driver lives under /run/nvidia/driver, so the DRA plugin would prepare "
        "devices against a host driver that is not the one in use. Set eks-hybrid-gpu:operator.driverEnabled to "
        "false with a verified host driver, or keep the DRA cohort out of an Operator-managed driver deployment."
    )
    dra_values = harness.values("dra-values.yaml")
    del dra_values["nvidiaDriverRoot"]
    dra_values["kubeletPlugin"]["nodeSelector"] = DRA_SELECTOR
    items = [*harness.dra(values=dra_values), harness.operator("cluster-policy", values)]
    assert (
        "values nvidiaDriverRoot is '/' (chart default) while"
        in harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items).one()
    )
    dra_values["nvidiaDriverRoot"] = "/run/nvidia/driver"
    items = [*harness.dra(values=dra_values), harness.operator("cluster-policy", values)]
    assert harness.stack(DRIVER_OWNERSHIP_CONSISTENT, items).violations == []


def test_driver_policies_without_operator_are_not_applicable(harness: Harness) -> None:
    assert harness.stack(DRIVER_OWNERSHIP_CONSISTENT, harness.dra()).not_applicable == (
        "the stack installs no GPU Operator"
    )
    operator = harness.operator("cluster-policy", {"driver": {"enabled": True}})
    assert harness.stack(DRIVER_VERIFICATION_DECLARED, [operator]).not_applicable == (
        "no GPU Operator with driver.enabled=false"
    )


def test_driver_unknowns_do_not_crash(harness: Harness) -> None:
    operator = harness.operator("cluster-policy", {"driver": {"enabled": UNKNOWN_BOOL}})
    ledger = operator_ledger(harness, "cluster-policy")
    ledger.props["data"] = UNKNOWN_OBJECT
    dra = harness.dra(values={"nvidiaDriverRoot": UNKNOWN_STRING})
    for policy in (DRIVER_OWNERSHIP_CONSISTENT, DRIVER_VERIFICATION_DECLARED):
        assert harness.stack(policy, [operator, ledger, *dra]).violations == []


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
    item = harness.helm("chart", chart, version, {})
    outcome = check(harness, CHART_VERSION_PINNED, item)
    assert outcome.violations == []
    assert outcome.not_applicable is None


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
    item = harness.helm("plugin-chart", "nvidia-device-plugin", version, {})
    message = check(harness, CHART_VERSION_PINNED, item).one()
    assert message.startswith("kubernetes:helm.sh/v4:Chart 'plugin-chart': chart 'nvidia-device-plugin' version ")
    assert problem in message
    assert message.endswith(
        "A floating version changes the installed allocator without review. Set "
        "eks-hybrid-gpu:charts.devicePlugin.version to an exact reviewed version (e.g. 0.20.0, 0.5.0, v26.7.0)."
    )


def test_version_paths_per_chart_and_prerelease_config(harness: Harness) -> None:
    release = harness.helm("op", "gpu-operator", "26.x", {}, resource_type=harness.release)
    assert "eks-hybrid-gpu:charts.gpuOperator.version" in check(harness, CHART_VERSION_PINNED, release).one()
    dra = harness.helm("dra", DRA_CHART, "0.5.0-rc.1", {})
    message = check(harness, CHART_VERSION_PINNED, dra, {"allowPrerelease": False}).one()
    assert "version '0.5.0-rc.1' is a pre-release" in message
    assert "eks-hybrid-gpu:charts.draDriver.version" in message


def test_version_unknown_and_not_applicable(harness: Harness) -> None:
    item = harness.helm("plugin-chart", "nvidia-device-plugin", UNKNOWN_STRING, {})
    assert check(harness, CHART_VERSION_PINNED, item).not_applicable == "the chart version is unknown during preview"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-system"}}
    assert harness.manifest_check(CHART_VERSION_PINNED, namespace).not_applicable == "not a Helm Chart or Release"


# --------------------------------------------------------------------------- hooks


def test_operator_release_with_hooks_passes(harness: Harness) -> None:
    for mode in ("gpu-cluster", "cluster-policy"):
        outcome = check(harness, OPERATOR_HOOKS_KEPT, harness.operator(mode))
        assert outcome.violations == []
        assert outcome.not_applicable is None


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
        "CRDs in order; the seed forbids --no-hooks. Install it as helm.v3.Release with hooks on: remove "
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


def test_operator_as_chart_v4_drops_hooks(harness: Harness) -> None:
    chart = harness.helm("gpu-operator", "gpu-operator", "v26.7.0", harness.values("operator-gpu-cluster-values.yaml"))
    message = check(harness, OPERATOR_HOOKS_KEPT, chart).one()
    assert message.startswith(
        "kubernetes:helm.sh/v4:Chart 'gpu-operator' installs the GPU Operator with kubernetes:helm.sh/v4:Chart, "
        "which renders the chart without hooks."
    )


def test_hooks_unknown_and_not_applicable(harness: Harness) -> None:
    release = harness.operator("gpu-cluster", disableWebhooks=UNKNOWN_BOOL)
    release.props["values"] = UNKNOWN_OBJECT
    assert check(harness, OPERATOR_HOOKS_KEPT, release).violations == []
    plugin = harness.helm("plugin-chart", DP_CHART, "0.20.0", {})
    assert check(harness, OPERATOR_HOOKS_KEPT, plugin).not_applicable == "not the GPU Operator chart"
