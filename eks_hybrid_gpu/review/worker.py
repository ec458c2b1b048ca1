"""One render of one project checkout, run as a separate process: `python worker.py REQUEST.json`.

The review renders the head (the working tree) and the base (a `git archive` of a ref) with the same
renderer, but each with its *own* program code. So this file imports nothing from `eks_hybrid_gpu` (a base
checkout may not have the review package): it puts the checkout first on `sys.path`, imports that checkout's
`components.program`, and runs it inline through the Automation API as `run(project_dir, render_dir=...)`,
which turns the program's provider into a `renderYamlToDirectory` provider. `pulumi up` against a throw-away
file backend then writes every object, charts included, as YAML; nothing reaches a cluster. A checkout whose
`run` does not take that argument has no render mode (see `takes_render_dir`): the review renders its stack file
with the head's program instead and says so.

The request (JSON) names: project_dir, program_fallback (the shipped project, after project_dir on `sys.path`, for
a project that holds only Pulumi.yaml and stacks/), stack, stack_file, render_dir, work_dir, pulumi_home,
pulumi_root, env (extra environment), policy_packs, policy_pack_configs, result (where the result JSON goes).
The result: {"ok": bool, "error": str, "policy": [violations], "ownership": ..., "log": [last lines]}.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from eks_hybrid_gpu import projectdir

LOG_TAIL = 60
SECRET_FILE = re.compile(r"rendered file (?P<path>\S+\.yaml) contains a secret value in plaintext")


def _parameters(function: Callable[..., Any]) -> frozenset[str]:
    try:
        return frozenset(inspect.signature(function).parameters)
    except (TypeError, ValueError):  # no signature to read: treat it as the oldest kind
        return frozenset()


def takes_render_dir(run: Callable[..., Any] | None) -> bool:
    """Whether this checkout's program renders: its `components.program.run` takes `render_dir`.

    The worker renders the base ref with the base's own program. One whose `run` takes no `render_dir` (or does
    not import) predates render mode: the review renders that base's stack file with the head's program
    instead and says so. `run` is the checkout's `components.program.run`, None when it could not be imported.
    """
    return run is not None and "render_dir" in _parameters(run)


def _stack_document(stack_file: Path) -> dict[str, Any]:
    """The stack file with the review-only overrides applied.

    `cluster.preflight: false`: the preflight reads live nodes, which is not part of what gets applied.
    `pulumi:disable-default-providers: [kubernetes]`: an object without the program's provider fails the render
    instead of going to a default provider. An `encryptionsalt` is dropped when nothing in the file is a
    secret, so the throw-away backend's passphrase need not match the one that made the salt.
    """
    document = yaml.safe_load(stack_file.read_text()) or {}
    config = document.setdefault("config", {}) or {}
    document["config"] = config
    cluster = dict(config.get("eks-hybrid-gpu:cluster") or {})
    cluster["preflight"] = False
    config["eks-hybrid-gpu:cluster"] = cluster
    config["pulumi:disable-default-providers"] = ["kubernetes"]
    if "secure:" not in stack_file.read_text():
        document.pop("encryptionsalt", None)
    return document


def _apply_chart_overrides(document: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Point charts without a source at a mirror (`charts.<key>.source`), keeping the pinned versions."""
    if not overrides:
        return
    config = document["config"]
    charts = dict(config.get("eks-hybrid-gpu:charts") or {})
    for key, source in overrides.items():
        pin = dict(charts.get(key) or {})
        if pin.get("source"):
            continue
        if "version" not in pin and source.get("version"):
            pin["version"] = source["version"]
        pin["source"] = {k: v for k, v in source.items() if k != "version"}
        charts[key] = pin
    config["eks-hybrid-gpu:charts"] = charts


def _policy_record(event: Any) -> dict[str, str]:
    return {
        "policy": str(event.policy_name),
        "level": str(event.enforcement_level),
        "urn": str(event.resource_urn or ""),
        "message": str(event.message),
    }


def render(request: dict[str, Any]) -> dict[str, Any]:
    """Run the checkout's program in render mode; return the result document."""
    project_dir = Path(request["project_dir"]).resolve()
    here = str(Path(__file__).resolve().parent)
    fallback = [str(p) for p in request.get("program_fallback") or []]
    sys.path[:] = [str(project_dir), *fallback, *(p for p in sys.path if p and str(Path(p).resolve()) != here)]
    # The CLI and the provider it starts get KUBECONFIG (Helm's capabilities come from the API server's
    # discovery); this process must not, or the SDK would pass it to the render provider as `kubeconfig`.
    os.environ.update({k: v for k, v in request["env"].items() if k != "KUBECONFIG"})
    os.environ.pop("KUBECONFIG", None)
    # A base program from before the local kubeconfig became an argument reads it from here: never a real cluster.
    os.environ["EKS_HYBRID_GPU_KUBECONFIG"] = os.devnull
    render_dir = request["render_dir"]

    import pulumi
    from pulumi import automation as auto

    try:
        import components.program

        program_run: Callable[..., Any] | None = components.program.run
    except Exception:
        program_run = None  # a checkout from before render mode may not even import any more
    if program_run is None or not takes_render_dir(program_run):
        return {
            "ok": False,
            "unsupported": True,
            "error": f"the program in {project_dir} has no render mode (components.program.run(render_dir=...))",
            "policy": [],
            "log": [],
        }
    run = program_run

    work_dir = Path(request["work_dir"])
    (work_dir / "stacks").mkdir(parents=True, exist_ok=True)
    shutil.copy(project_dir / "Pulumi.yaml", work_dir / "Pulumi.yaml")
    project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text())
    document = _stack_document(Path(request["stack_file"]))
    _apply_chart_overrides(document, request.get("chart_overrides") or {})
    projectdir.stack_file(request["stack"], work_dir).write_text(yaml.safe_dump(document, sort_keys=True))

    def render_only(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        """Safety net: whatever the program passes, every Kubernetes provider only renders."""
        if args.type_ != "pulumi:providers:kubernetes":
            return None
        props = {k: v for k, v in args.props.items() if k not in ("kubeconfig", "context", "cluster")}
        return pulumi.ResourceTransformResult(props={**props, "renderYamlToDirectory": render_dir}, opts=args.opts)

    def program() -> None:
        pulumi.runtime.register_resource_transform(render_only)
        run(project_dir, render_dir=render_dir)

    workspace = auto.LocalWorkspaceOptions(
        work_dir=str(work_dir),
        pulumi_home=request["pulumi_home"],
        env_vars=request["env"],
        pulumi_command=auto.PulumiCommand(root=request["pulumi_root"], skip_version_check=True),
    )
    stack = auto.create_or_select_stack(request["stack"], project_name=project["name"], program=program, opts=workspace)
    policy: list[dict[str, str]] = []
    log: list[str] = []

    secret_files: set[str] = set()

    def on_event(event: Any) -> None:
        if event.policy_event is not None:
            policy.append(_policy_record(event.policy_event))
        diagnostic = event.diagnostic_event
        if diagnostic is not None:
            # The provider names every file into which it wrote a Pulumi secret in plaintext.
            found = SECRET_FILE.search(str(diagnostic.message))
            if found:
                secret_files.add(found["path"])

    try:
        stack.up(
            on_output=log.append,
            on_event=on_event,
            color="never",
            policy_packs=request.get("policy_packs") or None,
            policy_pack_configs=request.get("policy_pack_configs") or None,
        )
    except auto.CommandError as error:
        return {"ok": False, "error": str(error), "policy": policy, "log": log[-LOG_TAIL:]}
    return {
        "ok": True,
        "error": "",
        "policy": policy,
        "objects": _objects(stack, policy),
        "secret_files": sorted(secret_files),
        "log": log[-LOG_TAIL:],
    }


def _objects(stack: Any, policy: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    """URN -> kind, namespace and name of the Kubernetes objects that policies reported on."""
    wanted = {p["urn"] for p in policy if p["urn"]}
    if not wanted:
        return {}
    found = {}
    for resource in (stack.export_stack().deployment or {}).get("resources", []):
        outputs = resource.get("outputs") or {}
        metadata = outputs.get("metadata")
        if resource.get("urn") in wanted and outputs.get("kind") and isinstance(metadata, dict):
            found[resource["urn"]] = {
                "kind": str(outputs["kind"]),
                "namespace": str(metadata.get("namespace") or ""),
                "name": str(metadata.get("name") or ""),
            }
    return found


def main(argv: list[str]) -> int:
    """Read the request, render, write the result; 0 when the render worked."""
    request = json.loads(Path(argv[0]).read_text())
    try:
        result = render(request)
    except Exception as error:  # every failure must reach the parent as a message
        result = {"ok": False, "error": f"{type(error).__name__}: {error}", "policy": [], "log": []}
    Path(request["result"]).write_text(json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
