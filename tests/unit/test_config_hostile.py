"""Hostile and sloppy stack config: each rule with a bad value (exact refusal, path, nothing registered) and a
good boundary value (accepted), through the model and through the real program under mocks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pytest

from components.refusals import StackConfigError
from components.stack_loader import load_stack_config
from eks_hybrid_gpu.mocks import ROOT
from tests.support.configs import (
    DIGEST_IMAGE,
    DRA_COHORT,
    OPERATOR_COHORT,
    PLUGIN_COHORT,
    Recorder,
    RunProgram,
    _base_config,
    cohort,
    selector_for,
)

pytestmark = pytest.mark.unit

P = "eks-hybrid-gpu:"
LABEL_KEY_FIX = (
    "is not a Kubernetes label key; use an optional DNS-subdomain prefix and '/', then at most 63 letters, digits, "
    "'-', '_' or '.', starting and ending with a letter or digit"
)
LABEL_VALUE_FIX = (
    "is not a Kubernetes label value; use at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
    "letter or digit"
)
NAME_FIX = "is not a DNS label of at most 40 characters; use lower-case letters, digits and '-'"
VERSION_FIX = "is not an exact chart version; pin one release such as 0.20.0"
NAMESPACE_FIX = "is not a namespace name; use a DNS label of at most 63 lower-case letters, digits and '-'"
RESERVED_FIX = (
    "belongs to Kubernetes itself and cannot hold GPU components; use a namespace of your own (not default, "
    "kube-system, kube-public, kube-node-lease)"
)
DIGEST_FIX = "is not pinned by digest; a tag can move under an approved test. Use registry/repo@sha256:<64 hex digits>"
CEL_FIX = (
    "write comparisons of device.driver, device.attributes[...] or device.capacity[...] joined by && or || with "
    "balanced parentheses"
)
MIG_PROFILES = (
    "1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, "
    "4g.40gb, 7g.80gb, 1g.18gb, 1g.18gb+me, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb"
)
DRA_CLUSTER = {"source": "local", "kubernetesVersion": "1.34.4", "preflight": False}
LONG_NS = "a" * 300


def _mig(profile: str, model: str | None = None) -> dict[str, Any]:
    sharing = {"mode": "mig", "migStrategy": "mixed", "migProfile": profile}
    if model is not None:
        sharing["gpuModel"] = model
    return _base_config(cohorts=[cohort(PLUGIN_COHORT, sharing=sharing)])


@dataclass(frozen=True)
class Bad:
    """A config refused with exactly these problems."""

    id: str
    config: dict[str, Any]
    problems: list[str]


BAD: list[Bad] = [
    Bad(
        "cohort-name-trailing-newline",
        _base_config(cohorts=[cohort(PLUGIN_COHORT, name="plugin\n")]),
        [f"{P}cohorts[0].name: 'plugin\\n' {NAME_FIX}"],
    ),
    Bad(
        "cohort-name-41-characters",
        _base_config(cohorts=[cohort(PLUGIN_COHORT, name="a" * 41)]),
        [f"{P}cohorts[0].name: '{'a' * 41}' {NAME_FIX}"],
    ),
    Bad(
        "chart-version-fullwidth-digits",
        _base_config(charts={"devicePlugin": {"version": "\uff10.\uff12\uff10.\uff10"}}),
        [f"{P}charts.devicePlugin.version: '\\uff10.\\uff12\\uff10.\\uff10' {VERSION_FIX}"],
    ),
    Bad(
        "chart-version-trailing-newline",
        _base_config(charts={"devicePlugin": {"version": "0.20.0\n"}}),
        [f"{P}charts.devicePlugin.version: '0.20.0\\n' {VERSION_FIX}"],
    ),
    Bad(
        "chart-version-leading-zero",
        _base_config(charts={"devicePlugin": {"version": "0.020.0"}}),
        [f"{P}charts.devicePlugin.version: '0.020.0' {VERSION_FIX}"],
    ),
    Bad(
        "kubernetes-version-trailing-newline",
        _base_config(cluster={**DRA_CLUSTER, "kubernetesVersion": "1.34.4\n"}),
        [f"{P}cluster.kubernetesVersion: '1.34.4\\n' is not a Kubernetes version; write it as 1.34.4"],
    ),
    Bad(
        "kubernetes-version-arabic-indic-digit",
        _base_config(cluster={**DRA_CLUSTER, "kubernetesVersion": "\u0661.34.4"}),
        [f"{P}cluster.kubernetesVersion: '\\u0661.34.4' is not a Kubernetes version; write it as 1.34.4"],
    ),
    Bad(
        "namespace-64-characters",
        _base_config(namespaces={"devicePlugin": "a" * 64}),
        [f"{P}namespaces.devicePlugin: '{'a' * 64}' {NAMESPACE_FIX}"],
    ),
    Bad(
        "namespace-300-characters",
        _base_config(namespaces={"workloads": LONG_NS}),
        [f"{P}namespaces.workloads: '{'a' * 40}'...'{'a' * 20}' (300 characters) {NAMESPACE_FIX}"],
    ),
    Bad(
        "namespace-trailing-newline",
        _base_config(namespaces={"workloads": "ai-workloads\n"}),
        [f"{P}namespaces.workloads: 'ai-workloads\\n' {NAMESPACE_FIX}"],
    ),
    Bad(
        "namespace-kube-system",
        _base_config(namespaces={"devicePlugin": "kube-system"}),
        [f"{P}namespaces.devicePlugin: 'kube-system' {RESERVED_FIX}"],
    ),
    Bad(
        "namespace-kube-public",
        _base_config(namespaces={"gpuOperator": "kube-public"}),
        [f"{P}namespaces.gpuOperator: 'kube-public' {RESERVED_FIX}"],
    ),
    Bad(
        "namespace-kube-node-lease",
        _base_config(namespaces={"draDriver": "kube-node-lease"}),
        [f"{P}namespaces.draDriver: 'kube-node-lease' {RESERVED_FIX}"],
    ),
    Bad(
        "two-roles-one-namespace",
        _base_config(namespaces={"devicePlugin": "gpu", "workloads": "gpu"}),
        [
            f"{P}namespaces.workloads: 'gpu' is also namespaces.devicePlugin; each role needs its own namespace (the "
            "owners' namespaces are privileged, the workloads' restricted): choose a different name"
        ],
    ),
    Bad(
        "selector-label-key-300-characters",
        _base_config(cohorts=[cohort(PLUGIN_COHORT, nodeSelector={**selector_for("device-plugin"), "a" * 300: "x"})]),
        [f"{P}cohorts[0].nodeSelector: '{'a' * 40}'...'{'a' * 20}' (300 characters) {LABEL_KEY_FIX}"],
    ),
    Bad(
        "selector-label-key-name-64-characters",
        _base_config(
            cohorts=[
                cohort(PLUGIN_COHORT, nodeSelector={**selector_for("device-plugin"), "example.com/" + "b" * 64: "x"})
            ]
        ),
        [f"{P}cohorts[0].nodeSelector: 'example.com/{'b' * 28}'...'{'b' * 20}' (76 characters) {LABEL_KEY_FIX}"],
    ),
    Bad(
        "selector-label-value-trailing-newline",
        _base_config(
            cohorts=[
                cohort(
                    PLUGIN_COHORT,
                    nodeSelector={
                        "eks.amazonaws.com/compute-type": "hybrid",
                        "workload.example.com/gpu-allocation": "dp\n",
                    },
                )
            ]
        ),
        [f"{P}cohorts[0].nodeSelector: 'workload.example.com/gpu-allocation': 'dp\\n' {LABEL_VALUE_FIX}"],
    ),
    Bad(
        "selector-label-value-64-characters",
        _base_config(
            cohorts=[cohort(PLUGIN_COHORT, nodeSelector={**selector_for("device-plugin"), "example.com/x": "v" * 64})]
        ),
        [f"{P}cohorts[0].nodeSelector: 'example.com/x': '{'v' * 64}' {LABEL_VALUE_FIX}"],
    ),
    Bad(
        "cohort-label-key-300-characters",
        _base_config(cohortLabelKey="k" * 300),
        [
            f"{P}cohortLabelKey: '{'k' * 40}'...'{'k' * 20}' (300 characters) is not a Kubernetes label key; use "
            "an optional DNS-subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', e.g. "
            "workload.example.com/gpu-allocation"
        ],
    ),
    Bad(
        "cohort-label-key-is-the-compute-type-label",
        _base_config(cohortLabelKey="eks.amazonaws.com/compute-type"),
        [
            f"{P}cohortLabelKey: is eks.amazonaws.com/compute-type, which already says hybrid; cohorts need a label "
            "of their own: use e.g. workload.example.com/gpu-allocation"
        ],
    ),
    Bad(
        "runtime-class-name-upper-case",
        _base_config(runtimeClass={"name": "Nvidia"}),
        [
            f"{P}runtimeClass.name: 'Nvidia' is not a RuntimeClass name; use a DNS subdomain of at most 253 "
            "lower-case letters, digits, '-' and '.', e.g. nvidia"
        ],
    ),
    Bad(
        "run-as-user-2-to-the-63",
        _base_config(smokeJobs={"runAsUser": 2**63}),
        [f"{P}smokeJobs.runAsUser: is 9223372036854775808; it must be at most 2147483647: lower it"],
    ),
    Bad(
        "run-as-user-2-to-the-31",
        _base_config(smokeJobs={"runAsUser": 2**31}),
        [f"{P}smokeJobs.runAsUser: is 2147483648; it must be at most 2147483647: lower it"],
    ),
    Bad(
        "feature-gate-key-with-a-space",
        _base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"featureGates": {"Dynamic MIG": True}}),
        [
            f"{P}dra.featureGates: 'Dynamic MIG' is not a feature-gate name; gate names are upper-camel-case "
            "identifiers such as DynamicMIG: fix the spelling"
        ],
    ),
    Bad(
        "mig-profile-free-text",
        _mig("BOGUS PROFILE"),
        [
            f"{P}cohorts[0].sharing.migProfile: 'BOGUS PROFILE' is not a MIG profile of any tabulated GPU model; the "
            f"device plugin only advertises real profiles: use one of {MIG_PROFILES}"
        ],
    ),
    Bad(
        "gpu-model-trailing-newline",
        _mig("1g.5gb", "A100-40GB\n"),
        [
            f"{P}cohorts[0].sharing.gpuModel: 'A100-40GB\\n' has no known MIG profile table: use one of A100-40GB, "
            "A100-80GB, H100-80GB, H200-141GB"
        ],
    ),
    Bad(
        "approved-cohort-trailing-newline",
        _base_config(smokeJobs={"approvedCohort": "plugin\n", "image": DIGEST_IMAGE}),
        [
            f"{P}smokeJobs.approvedCohort: 'plugin\\n' is not a cohort of this stack: use one of plugin, or remove it "
            "to keep every smoke Job suspended"
        ],
    ),
    Bad(
        "extra-selector-closes-the-parenthesis",
        _base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"extraSelector": "true) || (true"}),
        [
            f"{P}dra.extraSelector: is not one CEL condition on its own: the ')' at position 5 closes a parenthesis "
            f"the fragment did not open, so it would escape the class's own condition; {CEL_FIX}"
        ],
    ),
    Bad(
        "extra-selector-comment",
        _base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"extraSelector": "true // )"}),
        [
            f"{P}dra.extraSelector: is not one CEL condition on its own: character '/' at position 6 is not "
            f"allowed in the fragment; {CEL_FIX}"
        ],
    ),
    Bad(
        "extra-selector-unclosed",
        _base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"extraSelector": '(device.driver == "x"'}),
        [f"{P}dra.extraSelector: is not one CEL condition on its own: ends early: expected ')'; {CEL_FIX}"],
    ),
    Bad(
        "extra-selector-other-function",
        _base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"extraSelector": 'has(device.attributes["a"].b)'}),
        [
            f"{P}dra.extraSelector: is not one CEL condition on its own: 'has' at position 1 is not allowed: use "
            'device.driver, device.attributes["<domain>"].<name>, device.capacity["<domain>"].<name>, '
            f'quantity("...") or semver("..."); {CEL_FIX}'
        ],
    ),
    Bad(
        "large-gpu-memory-trailing-newline",
        _base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"largeGpuMemory": "40Gi\n"}),
        [f"{P}dra.largeGpuMemory: '40Gi\\n' is not a Kubernetes quantity; write it like 40Gi"],
    ),
    Bad(
        "large-gpu-memory-zero",
        _base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"largeGpuMemory": "0"}),
        [f"{P}dra.largeGpuMemory: '0' is not a positive amount of memory; write it like 40Gi"],
    ),
    Bad(
        "image-digest-trailing-newline",
        _base_config(smokeJobs={"image": DIGEST_IMAGE + "\n"}),
        [f"{P}smokeJobs.image: '{DIGEST_IMAGE[:40]}'...'{'ba' * 9 + 'b'}\\n' (112 characters) {DIGEST_FIX}"],
    ),
    Bad(
        "image-upper-case-repository",
        _base_config(smokeJobs={"image": "Registry/GPU@sha256:" + "a" * 64}),
        [f"{P}smokeJobs.image: 'Registry/GPU@sha256:{'a' * 20}'...'{'a' * 20}' (84 characters) {DIGEST_FIX}"],
    ),
    Bad(
        "eks-region-trailing-newline",
        _base_config(cluster={"source": "eks", "name": "hybrid-gpu", "region": "us-west-2\n"}),
        [f"{P}cluster.region: 'us-west-2\\n' is not an AWS region; write it like us-west-2"],
    ),
    Bad(
        "eks-name-with-a-slash",
        _base_config(cluster={"source": "eks", "name": "hybrid/gpu", "region": "us-west-2"}),
        [
            f"{P}cluster.name: 'hybrid/gpu' is not an EKS cluster name; use up to 100 letters, digits, '-' and '_', "
            "starting with a letter or digit"
        ],
    ),
    Bad(
        "kubeconfig-path-with-nul",
        _base_config(cluster={"source": "kubeconfig", "kubeconfig": "/etc/kube\x00config"}),
        [
            f"{P}cluster.kubeconfig: is not a usable file path (empty, a NUL or line break, or too long); set the "
            "path of the kubeconfig file, e.g. ~/.kube/config"
        ],
    ),
    Bad(
        "kubeconfig-context-with-newline",
        _base_config(cluster={"source": "kubeconfig", "kubeconfig": "/etc/kube/config", "context": "prod\n"}),
        [
            f"{P}cluster.context: 'prod\\n' is not a kubeconfig context name; use the name `kubectl config "
            "get-contexts` lists (letters, digits and @:._/+=- only)"
        ],
    ),
    Bad(
        "repo-url-with-a-space",
        _base_config(charts={"devicePlugin": {"version": "0.20.0", "source": {"repo": "https://mirror/ charts"}}}),
        [
            f"{P}charts.devicePlugin.source.repo: is not a Helm repository URL: write https://host/path "
            "(credentials as https://user:token@host/path)"
        ],
    ),
    Bad(
        "oci-reference-trailing-newline",
        _base_config(charts={"devicePlugin": {"version": "0.20.0", "source": {"oci": "oci://mirror/nvdp\n"}}}),
        [
            f"{P}charts.devicePlugin.source.oci: 'oci://mirror/nvdp\\n' is not an OCI reference: write oci://host/path/chart"
        ],
    ),
    Bad(
        "archive-path-with-nul",
        _base_config(charts={"devicePlugin": {"version": "0.20.0", "source": {"archive": "charts/a\x00.tgz"}}}),
        [
            f"{P}charts.devicePlugin.source.archive: is not a usable file path (empty, a NUL or line break, over "
            "4096 characters or a name over 255 bytes): point it at the chart's .tgz"
        ],
    ),
    Bad(
        "archive-name-over-255-bytes",
        _base_config(charts={"devicePlugin": {"version": "0.20.0", "source": {"archive": "c" * 300 + ".tgz"}}}),
        [
            f"{P}charts.devicePlugin.source.archive: is not a usable file path (empty, a NUL or line break, over "
            "4096 characters or a name over 255 bytes): point it at the chart's .tgz"
        ],
    ),
    Bad(
        "operator-device-plugin-beside-a-standalone-plugin",
        _base_config(cohorts=[cohort(OPERATOR_COHORT), cohort(PLUGIN_COHORT)]),
        [
            f"{P}operator.devicePluginEnabled: is true while the standalone device plugin serves cohorts[1] "
            "(plugin); ClusterPolicy operands are not restricted by the cohort selector, so both plugins would "
            "advertise nvidia.com/gpu on the same GPUs: set operator.devicePluginEnabled to false, or move those "
            "cohorts to owner gpu-operator"
        ],
    ),
]

GOOD: list[tuple[str, dict[str, Any]]] = [
    ("cohort-name-40-characters", _base_config(cohorts=[cohort(PLUGIN_COHORT, name="a" * 40)])),
    ("chart-version-with-build-metadata", _base_config(charts={"devicePlugin": {"version": "0.20.0+build.7"}})),
    ("namespace-63-characters", _base_config(namespaces={"devicePlugin": "a" * 63})),
    (
        "selector-label-key-253-prefix-63-name",
        _base_config(
            cohorts=[
                cohort(
                    PLUGIN_COHORT,
                    nodeSelector={
                        **selector_for("device-plugin"),
                        ".".join(["p" * 63] * 3) + "." + "q" * 61 + "/" + "n" * 63: "v" * 63,
                    },
                )
            ]
        ),
    ),
    ("cohort-label-key-custom", _base_config(cohortLabelKey="example.com/" + "g" * 63)),
    ("runtime-class-subdomain", _base_config(runtimeClass={"name": "nvidia.cdi"})),
    ("run-as-user-int32-max", _base_config(smokeJobs={"runAsUser": 2**31 - 1})),
    (
        "feature-gate-camel-case",
        _base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"featureGates": {"DynamicMIG": True}}),
    ),
    ("mig-profile-with-media-engines", _mig("1g.10gb+me", "H100-80GB")),
    ("mig-profile-without-model", _mig("3g.71gb")),
    (
        "extra-selector-nested-conditions",
        _base_config(
            cluster=DRA_CLUSTER,
            cohorts=[DRA_COHORT],
            dra={
                "extraSelector": '(device.attributes["gpu.nvidia.com"].productName == "NVIDIA H200" || '
                'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("80Gi"))) && '
                '!device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("565.0.0")) < 0'
            },
        ),
    ),
    (
        "large-gpu-memory-exponent",
        _base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"largeGpuMemory": "4e10"}),
    ),
    ("image-with-port-and-tag", _base_config(smokeJobs={"image": "localhost:5000/gpu-smoke:1.0@sha256:" + "a" * 64})),
    (
        # Kubernetes' CEL semver() parses pre-releases (blang/semver's Parse, k8s.io/apiserver's semverlib.go).
        "extra-selector-semver-pre-release",
        _base_config(
            cluster=DRA_CLUSTER,
            cohorts=[DRA_COHORT],
            dra={
                "extraSelector": 'device.attributes["gpu.nvidia.com"].driverVersion'
                '.compareTo(semver("580.0.0-rc.1")) >= 0'
            },
        ),
    ),
    (
        "kubeconfig-context-eks-arn",
        _base_config(
            cluster={
                "source": "kubeconfig",
                "kubeconfig": "/etc/kube/config",
                "context": "arn:aws:eks:us-west-2:111122223333:cluster/hybrid-gpu",
                "preflight": False,
            }
        ),
    ),
    (
        "repo-url-with-credentials",
        _base_config(
            charts={
                "devicePlugin": {
                    "version": "0.20.0",
                    "source": {"repo": "https://user:token@mirror.example.com/charts"},
                }
            }
        ),
    ),
    (
        "operator-device-plugin-off-beside-a-standalone-plugin",
        _base_config(cohorts=[cohort(OPERATOR_COHORT), cohort(PLUGIN_COHORT)], operator={"devicePluginEnabled": False}),
    ),
    (
        "operator-gpu-cluster-beside-a-standalone-plugin",
        _base_config(
            cluster=DRA_CLUSTER,
            cohorts=[cohort(OPERATOR_COHORT), cohort(PLUGIN_COHORT)],
            operator={"mode": "gpu-cluster"},
        ),
    ),
]


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(StackConfigError) as caught:
        load_stack_config(raw, ROOT)
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_value_is_refused_with_its_path_and_fix(case: Bad) -> None:
    assert _problems(case.config) == case.problems


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_value_registers_nothing(run: RunProgram, case: Bad) -> None:
    recorder = Recorder()

    with pytest.raises(pulumi.RunError) as caught:
        run(case.config, recorder=recorder)

    lines = str(caught.value).splitlines()
    assert lines[0] == (
        f"The stack config in stacks/Pulumi.test.yaml has {len(case.problems)} problem(s); nothing was changed:"
    )
    assert lines[1:] == [f"  - {p}" for p in case.problems]
    assert recorder.registrations == []


@pytest.mark.parametrize(("name", "raw"), GOOD, ids=[g[0] for g in GOOD])
def test_good_boundary_value_is_accepted(name: str, raw: dict[str, Any]) -> None:
    assert load_stack_config(raw, ROOT).cohorts


def test_media_engine_profile_is_requested_as_the_plugin_advertises_it(run: RunProgram) -> None:
    recorder = run(_mig("1g.10gb+me", "H100-80GB"))

    limits = recorder.named("gpu-plugin-smoke-job").inputs["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert limits["limits"]["nvidia.com/mig-1g.10gb.me"] == 1
    assert not any("+" in key for key in limits["limits"])


def test_extra_selector_is_anded_in_parentheses(run: RunProgram) -> None:
    extra = '(device.attributes["gpu.nvidia.com"].productName == "NVIDIA H200" || device.driver == "x")'
    recorder = run(_base_config(cluster=DRA_CLUSTER, cohorts=[DRA_COHORT], dra={"extraSelector": extra}))

    classes = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]["selectors"][0]["cel"]["expression"]
        for r in recorder.registrations
        if r.inputs.get("kind") == "DeviceClass" and r.inputs["metadata"]["name"] == "hybrid-large-gpu"
    }
    assert classes["hybrid-large-gpu"].endswith(f" && ({extra})")
