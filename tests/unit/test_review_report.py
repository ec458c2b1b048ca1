"""The review's diff, Markdown summary, result document and exit status, from fixed renders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from eks_hybrid_gpu.review import ReviewInput, review, write_review
from eks_hybrid_gpu.review.ledger import ownership_from_tree, read_ledger
from eks_hybrid_gpu.review.render import (
    EMPTY,
    RENDER_MODE_OPERATOR,
    PolicyResult,
    Render,
    RenderEnv,
    RenderError,
    policy_results,
    render_artifact,
)
from eks_hybrid_gpu.review.report import (
    MAX_INLINE_DIFF_LINES,
    Review,
    compare,
    kind_counts,
    mermaid,
    ownership_changes,
    summary,
    unified_diff,
)

pytestmark = pytest.mark.unit

HYBRID = "eks.amazonaws.com/compute-type"
LABEL = "workload.example.com/gpu-allocation"
POLICIES = ["single-allocation-owner", "smoke-job-hardened", "dra-feature-gates-allowlisted"]


def _ownership(**owners: str) -> dict[str, object]:
    return {
        "cohorts": {
            name: {
                "owner": owner,
                "namespace": {"dra": "gpu-dra-system", "device-plugin": "gpu-system"}.get(owner, "gpu-operator"),
                "nodeSelector": {HYBRID: "hybrid", LABEL: name},
                "sharing": "none",
                "hostDriverVerified": True,
            }
            for name, owner in owners.items()
        },
        "operatorMode": "cluster-policy" if "gpu-operator" in owners.values() else None,
    }


BASE_TREE = {
    "ConfigMap/gpu-system/configs.yaml": "data:\n  replicas: 4\nkind: ConfigMap\n",
    "DaemonSet/gpu-system/plugin.yaml": "kind: DaemonSet\nmetadata:\n  name: plugin\n",
    "Namespace/_cluster/gpu-system.yaml": "kind: Namespace\n",
}
HEAD_TREE = {
    "ConfigMap/gpu-system/configs.yaml": "data:\n  replicas: 2\nkind: ConfigMap\n",
    "DaemonSet/gpu-dra-system/kubelet-plugin.yaml": "kind: DaemonSet\nmetadata:\n  name: kubelet-plugin\n",
    "Namespace/_cluster/gpu-system.yaml": "kind: Namespace\n",
}
MANDATORY = PolicyResult("mandatory", "dra-feature-gates-allowlisted", "DaemonSet gpu-dra-system/k", "gate | x")
ADVISORY = PolicyResult("advisory", "driver-verification-declared", "(stack)", "please review")


def _review(policy: tuple[PolicyResult, ...] = (), base: Render | None = None) -> Review:
    base = base or Render(BASE_TREE, _ownership(gpu="device-plugin"))
    head = Render(HEAD_TREE, _ownership(gpu="dra"), policy)
    return Review("local", "`main` (abc)", "the working tree", base, head, tuple(compare(base.tree, head.tree)), "")


def test_compare_lists_added_changed_removed_in_path_order() -> None:
    changes = compare(BASE_TREE, HEAD_TREE)

    assert [(c.path, c.status, c.added_lines, c.removed_lines) for c in changes] == [
        ("ConfigMap/gpu-system/configs.yaml", "changed", 1, 1),
        ("DaemonSet/gpu-dra-system/kubelet-plugin.yaml", "added", 3, 0),
        ("DaemonSet/gpu-system/plugin.yaml", "removed", 0, 3),
    ]
    assert kind_counts(BASE_TREE, HEAD_TREE, changes) == [
        {"kind": "ConfigMap", "added": 0, "changed": 1, "removed": 0, "unchanged": 0},
        {"kind": "DaemonSet", "added": 1, "changed": 0, "removed": 1, "unchanged": 0},
        {"kind": "Namespace", "added": 0, "changed": 0, "removed": 0, "unchanged": 1},
    ]


def test_unified_diff_is_git_style() -> None:
    diff = unified_diff(BASE_TREE, HEAD_TREE)

    assert diff.splitlines()[:7] == [
        "--- a/ConfigMap/gpu-system/configs.yaml",
        "+++ b/ConfigMap/gpu-system/configs.yaml",
        "@@ -1,3 +1,3 @@",
        " data:",
        "-  replicas: 4",
        "+  replicas: 2",
        " kind: ConfigMap",
    ]
    assert "--- /dev/null\n+++ b/DaemonSet/gpu-dra-system/kubelet-plugin.yaml\n" in diff
    assert "--- a/DaemonSet/gpu-system/plugin.yaml\n+++ /dev/null\n" in diff
    assert unified_diff(BASE_TREE, BASE_TREE) == ""


def test_summary_shape() -> None:
    text = summary(_review((MANDATORY, ADVISORY)), POLICIES)

    headings = re.findall(r"^#+ .*$", text, re.MULTILINE)
    assert headings == [
        "## GPU allocation review: stack `local`",
        "### Owner migrations",
        "### Objects by kind",
        "### Changed objects",
        "### Cohort → owner",
        "### Policy results (head render)",
        "### Cohorts, owners and node selectors (head)",
    ]
    assert "❌ **1 mandatory policy violation(s)**" in text
    assert "**1 added, 1 changed, 1 removed** (1 unchanged)" in text
    assert "| DaemonSet | 1 | 0 | 1 | 0 |" in text
    assert "| `DaemonSet/gpu-system/plugin.yaml` | removed | +0 −3 |" in text
    # Policy table: level, policy, object, message; a `|` in a message is escaped.
    assert "| mandatory | `dra-feature-gates-allowlisted` | DaemonSet gpu-dra-system/k | gate \\| x |" in text
    assert "| advisory | `driver-verification-declared` | (stack) | please review |" in text
    assert "No violation: `single-allocation-owner`, `smoke-job-hardened`." in text
    assert "```mermaid\nflowchart LR\n" in text


def test_summary_ownership_before_and_after() -> None:
    text = summary(_review(), POLICIES)

    before, after = text.split("**Before (`main` (abc))**")[1].split("**After (the working tree)**")
    row = "| `gpu` | `{owner}` | none | `{ns}` | `eks.amazonaws.com/compute-type=hybrid, {label}=gpu` | yes |"
    assert row.format(owner="device-plugin", ns="gpu-system", label=LABEL) in before
    assert row.format(owner="dra", ns="gpu-dra-system", label=LABEL) in after.split("###")[0]
    assert "- cohort `gpu`: owner `device-plugin` → `dra`" in text
    migration = text.split("### Owner migrations")[1].split("###")[0]
    assert "run `eks-hybrid-gpu migrate --stack local --cohort gpu --to dra`" in migration
    assert "2. [remove] `pulumi up` with no owner for cohort gpu" in migration
    assert "- cohort `gpu`: namespace `gpu-system` → `gpu-dra-system`" in text
    assert "✅ no mandatory policy violation · 0 advisory" in text


def test_summary_of_a_stack_new_in_this_change() -> None:
    review_ = _review(base=EMPTY)
    text = summary(review_, POLICIES)

    assert "(the stack does not exist there: everything is new)" in text
    assert "_no ledger: the stack does not exist here_" in text
    assert "- cohort `gpu` added, owner `dra`" in text
    assert {c.status for c in review_.changes} == {"added"}


def test_inline_diff_is_capped_and_points_to_the_artifact() -> None:
    long_head = {f"ConfigMap/n/c{i}.yaml": "data: x\n" * 20 for i in range(40)}
    review_ = Review("s", "b", "h", EMPTY, Render(long_head, None), tuple(compare({}, long_head)), "")
    review_ = Review(**{**review_.__dict__, "diff": unified_diff({}, long_head)})

    text = summary(review_, [])

    assert "<details><summary>Rendered diff (" in text
    assert f"{len(review_.diff.splitlines()) - MAX_INLINE_DIFF_LINES} more line(s) in `review.diff`" in text
    assert "_no cohorts_" in text


def test_summary_is_deterministic() -> None:
    assert summary(_review((ADVISORY, MANDATORY)), POLICIES) == summary(_review((ADVISORY, MANDATORY)), POLICIES)


def test_mermaid_flowchart_of_selectors_cohorts_owners() -> None:
    chart = mermaid(_ownership(plugin="device-plugin", **{"op-1": "gpu-operator"}))

    assert chart.splitlines() == [
        "flowchart LR",
        f'  sel_op_1[/"node selector<br/>{HYBRID}=hybrid<br/>{LABEL}=op-1"/]',
        '  cohort_op_1(["cohort op-1<br/>sharing: none"])',
        '  owner_op_1[["gpu-operator<br/>namespace gpu-operator<br/>mode cluster-policy<br/>'
        'cluster-wide: other nodes need nvidia.com/gpu.deploy.operands=false"]]',
        "  sel_op_1 --> cohort_op_1 --> owner_op_1",
        f'  sel_plugin[/"node selector<br/>{HYBRID}=hybrid<br/>{LABEL}=plugin"/]',
        '  cohort_plugin(["cohort plugin<br/>sharing: none"])',
        '  owner_plugin[["device-plugin<br/>namespace gpu-system"]]',
        "  sel_plugin --> cohort_plugin --> owner_plugin",
    ]
    assert mermaid(None) == 'flowchart LR\n  empty["no cohorts: the stack renders no GPU owner"]'


def test_ownership_changes_name_every_difference() -> None:
    before = _ownership(a="device-plugin", b="dra")
    after = _ownership(a="dra", c="device-plugin")

    assert ownership_changes(before, after) == [
        "cohort `a`: owner `device-plugin` → `dra`",
        "cohort `a`: namespace `gpu-system` → `gpu-dra-system`",
        "cohort `b` removed (was owner `dra`)",
        "cohort `c` added, owner `device-plugin`",
    ]
    assert ownership_changes(before, before) == []


def test_exit_code_and_result_document() -> None:
    assert _review().exit_code == 0
    assert _review((ADVISORY,)).exit_code == 0
    failing = _review((MANDATORY, ADVISORY))
    assert failing.exit_code == 1

    document = failing.as_json()
    assert document["mandatoryFailures"] == 1
    assert document["exitCode"] == 1
    assert document["ownershipChanges"][0] == "cohort `gpu`: owner `device-plugin` → `dra`"
    assert [c["status"] for c in document["changes"]] == ["changed", "added", "removed"]


def test_policy_results_use_the_real_levels_and_name_objects() -> None:
    urn = "urn:pulumi:local::eks-hybrid-gpu::a$kubernetes:apps/v1:DaemonSet::dra-chart:gpu-dra-system/kp"
    events = [
        {"policy": "dra-feature-gates-allowlisted", "level": "advisory", "urn": urn, "message": "gate  on\n x"},
        {"policy": "dra-feature-gates-allowlisted", "level": "advisory", "urn": urn, "message": "gate on x"},
        {"policy": "driver-verification-declared", "level": "advisory", "urn": "", "message": "password: hunter2"},
        {"policy": "unknown-policy", "level": "mandatory", "urn": "urn:x::y::t$kubernetes:v1:Pod::p", "message": "m"},
    ]
    levels = {"dra-feature-gates-allowlisted": "mandatory", "driver-verification-declared": "advisory"}
    objects = {urn: {"kind": "DaemonSet", "namespace": "gpu-dra-system", "name": "kubelet-plugin"}}

    assert policy_results(events, levels, objects) == (
        PolicyResult(
            "mandatory", "dra-feature-gates-allowlisted", "DaemonSet gpu-dra-system/kubelet-plugin", "gate on x"
        ),
        PolicyResult("mandatory", "unknown-policy", "Pod p", "m"),
        PolicyResult("advisory", "driver-verification-declared", "(stack)", "password: <redacted>"),
    )


def test_the_operators_render_mode_chart_is_not_a_hooks_violation() -> None:
    chain = f"eks-hybrid-gpu:index:HybridGpuCluster${RENDER_MODE_OPERATOR}$kubernetes:apps/v1:Deployment"
    urn = f"urn:pulumi:s::p::{chain}::d"

    assert render_artifact({"policy": "operator-hooks-kept", "urn": urn})
    assert not render_artifact({"policy": "operator-hooks-kept", "urn": "urn:x::y::kubernetes:helm.sh/v3:Release::r"})
    assert not render_artifact({"policy": "smoke-job-hardened", "urn": urn})


def test_ledger_is_read_from_the_rendered_config_map() -> None:
    ledger = {"cohorts": {"gpu": {"owner": "dra"}}, "operatorMode": None}
    text = "data:\n  ownership.json: |\n    " + json.dumps(ledger) + "\nkind: ConfigMap\n"

    assert ownership_from_tree({"ConfigMap/gpu-system/gpu-allocation-ledger.yaml": text}, "gpu-system") == ledger
    assert ownership_from_tree({}, "gpu-system") is None


def _ledger_text(content: str, namespace: str = "gpu-system") -> str:
    metadata = {"name": "gpu-allocation-ledger", "namespace": namespace}
    return yaml.safe_dump({"kind": "ConfigMap", "metadata": metadata, "data": {"ownership.json": content}})


def _stack(namespaces: object = None) -> dict[str, object]:
    config: dict[str, object] = {"eks-hybrid-gpu:cohorts": [{"name": "gpu", "owner": "dra"}]}
    if namespaces is not None:
        config["eks-hybrid-gpu:namespaces"] = namespaces
    return {"config": config}


def test_the_ledger_is_found_in_the_stacks_device_plugin_namespace() -> None:
    ledger = {"cohorts": {"gpu": {"owner": "dra", "namespace": "gpu-dra-system"}}, "operatorMode": None}
    tree = {"ConfigMap/team-gpu/gpu-allocation-ledger.yaml": _ledger_text(json.dumps(ledger), "team-gpu")}

    assert read_ledger(tree, _stack({"devicePlugin": "team-gpu"})) == (ledger, None)
    # The registry's default namespace when the stack names none: there is no ledger there.
    ownership, problem = read_ledger(tree, _stack())
    assert ownership is None
    assert problem == (
        "the render has no ledger ConfigMap gpu-system/gpu-allocation-ledger (the stack's namespaces.devicePlugin "
        "is gpu-system): the cohort → owner map cannot be shown"
    )


@pytest.mark.parametrize(
    ("tree", "stack", "problem"),
    [
        (
            {"ConfigMap/gpu-system/gpu-allocation-ledger.yaml": _ledger_text("<redacted>")},
            _stack(),
            "the ledger ConfigMap gpu-system/gpu-allocation-ledger holds a Pulumi secret (the stack sets secret "
            "config), so the review redacted it: the cohort → owner map cannot be shown",
        ),
        (
            {"ConfigMap/gpu-system/gpu-allocation-ledger.yaml": _ledger_text("[1, 2]")},
            _stack(),
            "the rendered ledger cannot be read (ConfigMap gpu-system/gpu-allocation-ledger key ownership.json is not "
            "a JSON object; the checkout's program rendered it so: its ledger (components/ownership_ledger.py) must "
            "write a JSON object): the cohort → owner map cannot be shown",
        ),
        (
            {"ConfigMap/gpu-system/gpu-allocation-ledger.yaml": "kind: ConfigMap\ndata: {}\n"},
            _stack(),
            "the rendered ledger ConfigMap gpu-system/gpu-allocation-ledger has no ownership.json: the cohort → "
            "owner map cannot be shown",
        ),
        (
            {},
            _stack({"secure": "AAAA"}),
            "the stack file's eks-hybrid-gpu:namespaces cannot be read (malformed, or set as a secret), so its "
            "ledger cannot be found: the cohort → owner map cannot be shown",
        ),
    ],
    ids=["secret", "not-an-object", "no-key", "namespaces-unreadable"],
)
def test_a_ledger_that_cannot_be_read_is_reported(tree: dict[str, str], stack: dict[str, object], problem: str) -> None:
    assert read_ledger(tree, stack) == (None, problem)


def test_the_summary_says_when_a_ledger_cannot_be_read() -> None:
    problem = "the render has no ledger ConfigMap team-gpu/gpu-allocation-ledger (...): the map cannot be shown"
    base = Render(BASE_TREE, _ownership(gpu="device-plugin"))
    head = Render(HEAD_TREE, None, ledger_problem=problem)
    result = Review("local", "`main` (abc)", "the working tree", base, head, tuple(compare(base.tree, head.tree)), "")

    text = summary(result, POLICIES)

    assert "_no cohorts_" not in text
    assert f"**The ledger cannot be read:** {problem}" in text
    assert "Ownership changes: cannot tell (a ledger cannot be read, see above)" in text
    assert f"- head: {problem}" in text.split("### Owner migrations")[1].split("###")[0]
    assert "```mermaid" not in text
    assert result.as_json()["ledgerProblems"] == {"base": None, "head": problem}


def test_write_review_replaces_only_its_own_outputs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "head" / "Stale").mkdir(parents=True)
    (out / "head" / "Stale" / "x.yaml").write_text("old")
    (out / "keep.txt").write_text("mine")

    write_review(_review((MANDATORY,)), out, POLICIES)

    assert sorted(p.name for p in out.iterdir()) == [
        "base",
        "head",
        "keep.txt",
        "result.json",
        "review.diff",
        "summary.md",
    ]
    assert not (out / "head" / "Stale").exists()
    assert (out / "base" / "DaemonSet" / "gpu-system" / "plugin.yaml").exists()
    assert json.loads((out / "result.json").read_text())["exitCode"] == 1


def test_a_head_without_the_stack_is_an_error(tmp_path: Path) -> None:
    env = RenderEnv(Path("/nonexistent"), Path("/nonexistent"), "4.25.0", Path("/nonexistent"), tmp_path)

    with pytest.raises(RenderError, match="the head has no stack file for 'nope'"):
        review("nope", ReviewInput(tmp_path, tmp_path / "Pulumi.nope.yaml", "head"), None, env)


def test_unchanged_kinds_and_ownership_are_folded() -> None:
    same = _ownership(gpu="dra")
    review_ = Review("local", "`main` (abc)", "head", Render(BASE_TREE, same), Render(HEAD_TREE, same), tuple(), "")
    review_ = Review(**{**review_.__dict__, "changes": tuple(compare(BASE_TREE, HEAD_TREE))})

    text = summary(review_, [])

    assert "| unchanged kinds: Namespace | 0 | 0 | 0 | 1 |" in text
    assert "| **total** | **1** | **1** | **1** | **1** |" in text
    assert "**Before and after (unchanged)**" in text
    assert "**After" not in text
    assert "Ownership changes: none" in text
