"""`eks-hybrid-gpu review`: a preview diff a reviewer can read, from the pull request alone.

For one stack it renders every Kubernetes object the program would apply, charts included, into a sorted
one-file-per-object tree, does the same for the base git ref, and writes (under `--out`, default
`out/review`): `head/` and `base/` (the trees), `review.diff` (unified diff base → head), `summary.md`
(objects by kind, changed objects, the cohort → owner map before and after, every policy result on the
head render, a Mermaid flowchart of cohorts, owners and node selectors, the diff) and `result.json`.
Exit status: 0, or 1 when a mandatory policy fails on the head render; 2 on usage or render errors.

Renderer: the Kubernetes provider's `renderYamlToDirectory`, not the engine's preview JSON. Preview JSON
shows a Helm Release as its values and Chart v4 children as inputs, unsorted and with unknowns; the render
provider writes exactly the objects the provider would send to the API server, after Chart v4 templating,
the program's transforms (ownership stamps, the DeviceClass trim) and defaulting of the resources' inputs —
the faithful thing to diff. It needs three switches, all behind one explicit argument that the worker passes,
`components.program.run(project_dir, render_dir=…)` (a base program without that argument has no render mode;
see `worker.takes_render_dir`):

- `make_provider` returns `k8s.Provider(render_yaml_to_directory=…)` with no kubeconfig or context (the
  provider refuses them together);
- the EKS describe is skipped (declared facts stand in; the preflight's node read is switched off by the
  review's copy of the stack config), so the EKS stacks render without AWS;
- the GPU Operator, a `helm.v3.Release` that render mode cannot handle, renders through Chart v4 with the
  same chart, version, release name and values. Its hook objects then show as plain manifests; policies that
  look at the Release's inputs (`operator-hooks-kept`) see no Release in a review render.

Helm takes `.Capabilities.APIVersions` from discovery (the DRA chart picks resource.k8s.io/v1 there), so
each review starts a private local API server (`localcluster.start`, ~10 s) unless `--kubeconfig` names
one. The render provider finds it through KUBECONFIG in its own environment only.

Policy results come from the real pack run by the engine during the head render, with every enabled policy
lowered to advisory so that no violation stops the render; the summary and the exit status use each
policy's real level (the pack's, or `--policy-config`'s). Secrets never reach the output (see
`normalize`). The base is a `git archive` export of `--base` rendered by the same worker with the base's
own program; a base without the stack is an empty tree.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from cluster.client import names
from cluster.client.errors import KubeAccessError
from cluster.client.kubeconfig import Source, chosen_context
from eks_hybrid_gpu import projectdir
from eks_hybrid_gpu.chartmirror import CHART_MIRROR_ENV
from eks_hybrid_gpu.cli import run_command
from eks_hybrid_gpu.options import add_output_option, emit
from eks_hybrid_gpu.review.normalize import write_tree
from eks_hybrid_gpu.review.render import (
    EMPTY,
    Render,
    RenderEnv,
    RenderError,
    RenderModeMissingError,
    make_env,
    render_stack,
)
from eks_hybrid_gpu.review.report import Review, compare, result_json, summary, unified_diff
from policy.gpu_allocation.vocab.stack_files import stack_file_name

__all__ = ["ReviewInput", "main", "review", "write_review"]

BASE_WITHOUT_RENDER_MODE = (
    "The base's program predates render mode, so the base's stack config was rendered with this change's "
    "program: config changes show, program changes do not."
)


@dataclass(frozen=True)
class ReviewInput:
    """One side of a review: a checkout's program and a stack file (None or absent: no such stack)."""

    project_dir: Path
    stack_file: Path | None
    label: str


def review(stack: str, head: ReviewInput, base: ReviewInput | None, env: RenderEnv) -> Review:
    """Render head (with the policy pack) and base (without), and compare them."""
    head_render = render_stack(head.project_dir, stack, head.stack_file, env, label="head", policy=True)
    if not head_render.exists:
        msg = f"the head has no stack file for '{stack}' ({head.stack_file})"
        raise RenderError(msg)
    base_render: Render = EMPTY
    base_label = base.label if base else "none"
    if base is not None:
        try:
            base_render = render_stack(base.project_dir, stack, base.stack_file, env, label="base", policy=False)
        except RenderModeMissingError:
            # A base from before render mode: its stack file through the head's program. Config changes show;
            # program changes of this pull request do not, and the summary says so.
            base_render = replace(
                render_stack(head.project_dir, stack, base.stack_file, env, label="base-config", policy=False),
                notes=(BASE_WITHOUT_RENDER_MODE,),
            )
    changes = tuple(compare(base_render.tree, head_render.tree))
    return Review(
        stack=stack,
        base_label=base_label,
        head_label=head.label,
        base=base_render,
        head=head_render,
        changes=changes,
        diff=unified_diff(base_render.tree, head_render.tree),
    )


def write_review(result: Review, out: Path, policy_names: list[str]) -> None:
    """Write head/, base/, review.diff, summary.md and result.json under `out` (only those are replaced)."""
    out.mkdir(parents=True, exist_ok=True)
    write_tree(result.head.tree, out / "head")
    write_tree(result.base.tree, out / "base")
    (out / "review.diff").write_text(result.diff)
    (out / "summary.md").write_text(summary(result, policy_names))
    (out / "result.json").write_text(result_json(result))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`eks-hybrid-gpu review` options."""
    parser.add_argument("--stack", default="local", help="stack name: stacks/Pulumi.<NAME>.yaml (default: local)")
    parser.add_argument("--base", default="main", help="git ref to compare with (default: main)")
    parser.add_argument("--out", default="out/review", type=Path, help="output folder (default: out/review)")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="an API server to take Helm capabilities from (default: start a private local one for the review)",
    )
    parser.add_argument("--context", help="the --kubeconfig's context to use (default: its current context)")
    parser.add_argument(
        "--chart-mirror",
        type=Path,
        help="a folder of <chart>-<version>.tgz archives (an index.yaml is written beside them if it has none) "
        "serving the pinned charts of stacks that name no "
        "chart source (default: $EKS_HYBRID_GPU_CHART_MIRROR, else ../shared/charts, else the pinned versions pulled "
        "from upstream into the user cache)",
    )
    parser.add_argument("--policy-config", type=Path, help="policy pack config (levels and settings) to review with")
    add_output_option(parser, ("table", "json", "yaml"))


def with_context(kubeconfig: Path, context: str, out: Path) -> Path:
    """A copy of `kubeconfig` whose current context is `context`: what Helm's discovery in the engine then reads.

    The context is checked as every other command checks it (`cluster.client.kubeconfig.chosen_context`):
    KubeAccessError when the file cannot be used or has no such context.
    """
    chosen_context(Source(str(kubeconfig), context=context))
    document = yaml.safe_load(kubeconfig.read_text())
    document["current-context"] = context
    out.write_text(yaml.safe_dump(document))
    out.chmod(0o600)
    return out


def _fail(message: str) -> int:
    print(f"eks-hybrid-gpu review: {message}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    """`eks-hybrid-gpu review ARGV...`; a usage error exits 2."""
    return run_command("review", argv)


def run(args: argparse.Namespace) -> int:
    """`eks-hybrid-gpu review [--stack NAME] [--base REF] [--out DIR] ...`."""
    from eks_hybrid_gpu import engine, localcluster, localprocs
    from eks_hybrid_gpu.review import gitref
    from eks_hybrid_gpu.review.render import chart_mirror, chart_repository, policy_setup

    try:
        names.stack_name(args.stack)
    except names.NameRefused as error:
        return _fail(str(error))
    project = projectdir.of(args.project)
    stack_file = projectdir.stack_file(args.stack, project)
    if not stack_file.is_file():
        known = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stack_file.parent.glob("*.yaml"))
        return _fail(f"no stack '{args.stack}': {stack_file_name(args.stack)} does not exist (stacks: {known})")
    if args.context is not None and args.kubeconfig is None:
        return _fail("--context needs --kubeconfig: the private API server the review starts has one context")
    for option, path in (("--kubeconfig", args.kubeconfig), ("--policy-config", args.policy_config)):
        if path is not None and not path.is_file():
            return _fail(f"{option} {path} {'is a folder, not a file' if path.is_dir() else 'does not exist'}")
    try:
        with tempfile.TemporaryDirectory(prefix="eks-hybrid-gpu-review-") as tmp, ExitStack() as cleanup:
            scratch = Path(tmp)
            base = gitref.export(project, args.base, scratch / "base-checkout")
            from_env = os.environ.get(CHART_MIRROR_ENV)
            mirror = args.chart_mirror or (Path(from_env) if from_env else None)
            charts = chart_repository(stack_file, mirror, scratch / "charts")
            toolchain = engine.ensure_toolchain()
            toolchain.activate()
            kubeconfig = args.kubeconfig
            if kubeconfig is not None and args.context is not None:
                kubeconfig = with_context(kubeconfig, args.context, scratch / "kubeconfig")
            if kubeconfig is None:
                state = scratch / "cluster"
                cluster = localcluster.start(state)
                cleanup.callback(localcluster.stop, state)
                kubeconfig = cluster.kubeconfig
            mirror_url, mirror_index = cleanup.enter_context(chart_mirror(charts))
            levels, policy_config = policy_setup(scratch, args.policy_config)
            env = make_env(
                toolchain,
                kubeconfig,
                scratch / "renders",
                chart_mirror=mirror_url,
                chart_mirror_index=mirror_index,
                policy_levels=levels,
                policy_config=policy_config,
            )
            result = review(
                args.stack,
                ReviewInput(project, stack_file, "the working tree"),
                ReviewInput(base.project_dir, base.project_dir / "stacks" / stack_file.name, base.label),
                env,
            )
    except (
        KubeAccessError,
        RenderError,
        gitref.GitRefError,
        localprocs.LocalClusterError,
        RuntimeError,
        OSError,
    ) as error:
        return _fail(str(error))
    write_review(result, args.out, list(levels))
    line = (
        f"{len(result.changes)} object(s) differ from {args.base}; "
        f"{len(result.mandatory_failures)} mandatory policy violation(s). Summary: {args.out / 'summary.md'}"
    )
    print(emit("ReviewResult", result.as_json(), args.output, lambda: line))
    return result.exit_code
