"""Render one stack of one checkout into the review tree, and read the ownership map and policy results.

Each render runs `worker.py` in its own process (see there), against a throw-away Pulumi home and file
backend under the review's scratch folder. The parent keeps only the normalized, redacted tree.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from eks_hybrid_gpu import engine, projectdir
from eks_hybrid_gpu.chartmirror import CHARTS, ChartMirrorError, Wanted, pick_version, resolve, wanted_of_document
from eks_hybrid_gpu.review.ledger import read_ledger
from eks_hybrid_gpu.review.normalize import normalize, read_render_dir, redact_text
from policy.gpu_allocation.vocab.labels import GPU_OPERATOR

WORKER = Path(__file__).resolve().parent / "worker.py"
RENDER_TIMEOUT_SECONDS = 540
PROVIDER_PLUGIN = "kubernetes"

RENDER_MODE_OPERATOR = "eks-hybrid-gpu:owners:GpuOperator$kubernetes:helm.sh/v4:Chart"
"""URN type chain of the GPU Operator's objects in render mode (Chart v4 in place of the Release)."""
RENDER_MODE_ONLY = frozenset({"operator-hooks-kept"})
"""Policies whose finding on RENDER_MODE_OPERATOR objects is about the review's own Chart v4 substitution."""
RENDER_MODE_NOTE = (
    "`operator-hooks-kept` is not evaluated on the GPU Operator here: the review renders it through Chart v4 "
    "(a Helm Release cannot render); `pulumi preview` with the policy pack checks the real Release."
)


class RenderError(RuntimeError):
    """A stack could not be rendered; the message says why and what to do."""


class RenderModeMissingError(RenderError):
    """The checkout's program predates render mode: its `components.program.run` takes no `render_dir`."""


@dataclass(frozen=True)
class RenderEnv:
    """What every render of one review shares."""

    pulumi_root: Path
    """Directory whose bin/ holds the pulumi CLI."""
    provider_binary: Path
    """The locally built (or installed) pulumi-resource-kubernetes."""
    provider_version: str
    kubeconfig: Path
    """An API server whose discovery gives Helm its capabilities (resource.k8s.io/v1 for the DRA chart)."""
    scratch: Path
    """Throw-away folder for raw renders, Pulumi homes and backends."""
    path_entries: tuple[str, ...] = ()
    chart_mirror: str | None = None
    """URL of a Helm repository that serves the pinned charts, for charts the stack gives no source."""
    chart_mirror_index: Mapping[str, Any] | None = None
    policy_levels: Mapping[str, str] = field(default_factory=dict)
    """Policy name -> effective enforcement level (mandatory, advisory, disabled) for the head render."""
    policy_config: Path | None = None
    """The pack config the render runs with (every level advisory, so no violation stops the render)."""


@dataclass(frozen=True)
class PolicyResult:
    """One policy violation on the head render."""

    level: str
    policy: str
    object: str
    message: str


@dataclass(frozen=True)
class Render:
    """One stack rendered, normalized and redacted."""

    tree: dict[str, str]
    """Review path -> YAML text."""
    ownership: dict[str, Any] | None
    """The ledger ConfigMap's ownership map; None when the stack does not exist there or its ledger is unreadable."""
    policy: tuple[PolicyResult, ...] = ()
    exists: bool = True
    notes: tuple[str, ...] = ()
    """What the review render could not check the way `pulumi preview` does."""
    ledger_problem: str | None = None
    """Why the render's ledger could not be found or read (then `ownership` is None and the summary says so)."""


EMPTY = Render({}, None, (), exists=False)


def _install_provider(home: Path, env: RenderEnv) -> None:
    """Make the provider plugin visible in a Pulumi home: a link to the binary, not a 160 MB copy."""
    plugin_dir = home / "plugins" / f"resource-{PROVIDER_PLUGIN}-v{env.provider_version}"
    binary = plugin_dir / f"pulumi-resource-{PROVIDER_PLUGIN}"
    if binary.exists():
        return
    plugin_dir.mkdir(parents=True, exist_ok=True)
    binary.symlink_to(env.provider_binary.resolve())


def _engine_env(env: RenderEnv, area: Path, home: Path) -> dict[str, str]:
    helm = area / "helm"
    return {
        **engine.isolated_variables([*env.path_entries, str(env.pulumi_root / "bin")], home, area / "backend"),
        "PULUMI_K8S_SUPPRESS_HELM_HOOK_WARNINGS": "true",
        # Helm's repository cache and config stay inside the scratch folder.
        "HELM_CACHE_HOME": str(helm / "cache"),
        "HELM_CONFIG_HOME": str(helm / "config"),
        "HELM_DATA_HOME": str(helm / "data"),
        # For the provider only (discovery); the worker keeps it out of the program's own environment.
        "KUBECONFIG": str(env.kubeconfig),
    }


def wanted_charts(stack_document: Mapping[str, Any]) -> tuple[list[Wanted], bool]:
    """The owner charts a stack document leaves to the default source, at their pinned versions; and if it is local."""
    return wanted_of_document(stack_document)


def chart_overrides(stack_document: Mapping[str, Any], env: RenderEnv) -> dict[str, dict[str, str]]:
    """`charts.<key>.source` for every owner chart without a source, pointing at the served chart repository.

    Raises RenderError when the repository lacks the pinned version, so the review fails with the reason
    instead of a Helm error.
    """
    if env.chart_mirror is None:
        return {}
    keys = {c.name: c.key for c in CHARTS}
    wanted, local = wanted_charts(stack_document)
    entries = (env.chart_mirror_index or {}).get("entries") or {}
    overrides: dict[str, dict[str, str]] = {}
    for chart in wanted:
        available = sorted(str(e.get("version")) for e in entries.get(chart.name) or [])
        # The same rule as `local up`: only a local stack may fall back to another version, with a notice.
        try:
            version, notice = pick_version(chart.name, chart.version, available, local=local)
        except ChartMirrorError as error:
            msg = f"{error} (and its index entry), or render with access to the chart's upstream repository"
            raise RenderError(msg) from None
        if notice:
            print(notice, file=sys.stderr)
        overrides[keys[chart.name]] = {"repo": env.chart_mirror, "version": version}
    return overrides


def chart_repository(
    stack_file: Path,
    explicit: Path | None,
    folder: Path,
    environ: Mapping[str, str] = os.environ,
    shared: Path | None = None,
) -> Path:
    """The folder to serve as the review's chart repository, its archives checked against their pinned digests.

    The head stack's charts come from the chain (eks_hybrid_gpu.chartmirror): an explicit mirror with an index.yaml
    is served as it is; otherwise `folder` is filled with links to the mirror's archives, or to ../shared/charts
    and the user cache (after pulling the pinned versions into it), and an index.yaml, so a base that pins a
    version either holds renders too.
    """
    from eks_hybrid_gpu import chartfetch

    shared = projectdir.shared_charts() if shared is None else shared
    cache = chartfetch.cache_dir(environ)
    document = yaml.safe_load(stack_file.read_text()) or {}
    wanted, local = wanted_charts(document if isinstance(document, Mapping) else {})
    try:
        sources = resolve(wanted, local=local, explicit=explicit, environ=environ, shared=shared, cache=cache)
    except ChartMirrorError as error:
        raise RenderError(str(error)) from None
    for notice in sources.notices:
        print(notice, file=sys.stderr)
    if explicit is not None and (explicit / "index.yaml").is_file():
        return explicit.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    candidates = [*explicit.glob("*.tgz")] if explicit is not None else [*shared.glob("*.tgz"), *cache.glob("*.tgz")]
    candidates += [found.archive for found in sources.found.values()]
    for archive in candidates:
        link = folder / archive.name
        if not link.exists():
            link.symlink_to(archive.resolve())
    chartfetch.write_index(folder)
    return folder


def path_replacements(project_dir: Path) -> list[tuple[str, str]]:
    """Absolute paths that differ between checkouts (chart archives), spelled relative to the project.

    The base checkout's siblings are links to the head's, so `../shared/…` resolves to the same files; each
    link's target is mapped back to its `$PROJECT/../name` spelling.
    """
    pairs = [(str(project_dir.resolve()), "$PROJECT")]
    for sibling in sorted(project_dir.parent.iterdir()) if project_dir.parent.is_dir() else []:
        if sibling.name != project_dir.name and sibling.exists():
            pairs.append((str(sibling.resolve()), f"$PROJECT/../{sibling.name}"))
    return pairs


def _object_name(urn: str, objects: Mapping[str, Mapping[str, str]]) -> str:
    """`Kind namespace/name` of the object a URN names; `(stack)` for stack policies."""
    if not urn:
        return "(stack)"
    if urn in objects:
        found = objects[urn]
        where = f"{found['namespace']}/" if found.get("namespace") else ""
        return f"{found['kind']} {where}{found['name']}"
    kind = urn.split("::")[-2].split("$")[-1].split(":")[-1] if "::" in urn else ""
    name = urn.rsplit("::", 1)[-1]
    return f"{kind} {name}".strip()


def policy_results(
    events: list[Mapping[str, str]],
    levels: Mapping[str, str],
    objects: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[PolicyResult, ...]:
    """Violations with the level the pack (or the review's policy config) gives them, sorted, deduplicated."""
    results = {
        PolicyResult(
            level=levels.get(e["policy"], "advisory" if e["level"] != "mandatory" else "mandatory"),
            policy=e["policy"],
            object=_object_name(e.get("urn", ""), objects or {}),
            message=redact_text(" ".join(e["message"].split())),
        )
        for e in events
    }
    order = {"mandatory": 0, "advisory": 1}
    return tuple(sorted(results, key=lambda r: (order.get(r.level, 2), r.policy, r.object, r.message)))


def render_stack(
    project_dir: Path, stack: str, stack_file: Path | None, env: RenderEnv, *, label: str, policy: bool
) -> Render:
    """Render `stack_file` with the program of `project_dir`; an absent stack file is an empty render."""
    if stack_file is None or not stack_file.is_file():
        return EMPTY
    area = env.scratch / label
    area.mkdir(parents=True, exist_ok=False)
    home = env.scratch / "pulumi-home"
    _install_provider(home, env)
    try:
        document = yaml.safe_load(stack_file.read_text()) or {}
    except yaml.YAMLError as error:
        msg = f"{stack_file} is not valid YAML: {error}"
        raise RenderError(msg) from None
    request = {
        "project_dir": str(project_dir),
        "program_fallback": [str(projectdir.SHIPPED)],
        "stack": stack,
        "stack_file": str(stack_file),
        "render_dir": str(area / "raw"),
        "work_dir": str(area / "work"),
        "pulumi_home": str(home),
        "pulumi_root": str(env.pulumi_root),
        "env": _engine_env(env, area, home),
        "policy_packs": [str(projectdir.policy_pack(project_dir))] if policy else [],
        "policy_pack_configs": [str(env.policy_config)] if policy and env.policy_config else [],
        "chart_overrides": chart_overrides(document, env),
        "result": str(area / "result.json"),
    }
    (area / "request.json").write_text(json.dumps(request, indent=2))
    try:
        worker = subprocess.run(  # noqa: S603
            [sys.executable, str(WORKER), str(area / "request.json")],
            check=False,
            capture_output=True,
            timeout=RENDER_TIMEOUT_SECONDS,
            cwd=area,
        )
    except subprocess.TimeoutExpired:
        msg = f"rendering stack {stack} ({label}) took more than {RENDER_TIMEOUT_SECONDS} s"
        raise RenderError(msg) from None
    result_file = area / "result.json"
    if not result_file.exists():
        stderr = worker.stderr.decode(errors="replace").strip().splitlines()[-20:]
        msg = f"rendering stack {stack} ({label}) failed before it started:\n" + redact_text("\n".join(stderr))
        raise RenderError(msg)
    result: dict[str, Any] = json.loads(result_file.read_text())
    if result.get("unsupported"):
        raise RenderModeMissingError(str(result.get("error")))
    if not result["ok"]:
        msg = f"rendering stack {stack} ({label}) failed:\n{_error_tail(result)}"
        raise RenderError(msg)
    secret_files = frozenset(Path(f) for f in result.get("secret_files") or [])
    tree = normalize(read_render_dir(area / "raw", secret_files), path_replacements(project_dir))
    ownership, problem = read_ledger(tree, document if isinstance(document, Mapping) else {})
    if not policy:
        return Render(tree, ownership, ledger_problem=problem)
    events = [e for e in result.get("policy") or [] if not render_artifact(e)]
    owners = {c.get("owner") for c in ((ownership or {}).get("cohorts") or {}).values()}
    notes = (RENDER_MODE_NOTE,) if GPU_OPERATOR in owners else ()
    results = policy_results(events, env.policy_levels, result.get("objects"))
    return Render(tree, ownership, results, notes=notes, ledger_problem=problem)


def render_artifact(event: Mapping[str, str]) -> bool:
    """A violation caused by the review's own Chart v4 substitution for the Operator's Release."""
    return event.get("policy") in RENDER_MODE_ONLY and RENDER_MODE_OPERATOR in event.get("urn", "")


def make_env(toolchain: engine.Toolchain, kubeconfig: Path, scratch: Path, **options: Any) -> RenderEnv:
    """A RenderEnv from the engine toolchain; `options` are RenderEnv's optional fields."""
    for entry in toolchain.path_entries:
        if (Path(entry) / "pulumi").exists():
            root = Path(entry).parent
            break
    else:
        msg = f"pulumi is in none of the engine's folders ({', '.join(toolchain.path_entries) or 'none'})"
        raise RenderError(msg)
    return RenderEnv(
        pulumi_root=root,
        provider_binary=toolchain.provider_binary,
        provider_version=engine.provider_version(),
        kubeconfig=kubeconfig,
        scratch=scratch,
        path_entries=toolchain.path_entries,
        **options,
    )


def _error_tail(result: Mapping[str, Any]) -> str:
    """The useful part of a failed `pulumi up`: its diagnostics, redacted."""
    text = str(result.get("error") or "")
    if "Diagnostics:" in text:
        text = text.split("Diagnostics:", 1)[1].split("Resources:", 1)[0]
    lines = [line for line in text.splitlines() if line.strip()][-40:]
    return redact_text("\n".join(lines))


def policy_setup(scratch: Path, user_config: Path | None = None) -> tuple[dict[str, str], Path]:
    """Effective levels of the pack's policies, and a pack config with every enabled policy advisory.

    Run as advisory, no violation stops the render, so every result is collected in one pass; the summary
    and the exit status use the effective level (the pack's, or the one in `user_config`).
    """
    from policy.gpu_allocation.pack import build_policies

    user: dict[str, Any] = json.loads(user_config.read_text()) if user_config else {}
    default_all = user.get("all")
    levels: dict[str, str] = {}
    config: dict[str, Any] = {}
    for policy in build_policies():
        name = policy.name
        declared = str(getattr(policy.enforcement_level, "value", policy.enforcement_level) or "advisory")
        entry = user.get(name, default_all)
        level = entry if isinstance(entry, str) else (entry or {}).get("enforcementLevel", declared)
        levels[name] = str(level)
        properties = {k: v for k, v in entry.items() if k != "enforcementLevel"} if isinstance(entry, dict) else {}
        config[name] = {**properties, "enforcementLevel": "disabled" if level == "disabled" else "advisory"}
    path = scratch / "policy-config.json"
    path.write_text(json.dumps(config, indent=2, sort_keys=True))
    return levels, path


@contextmanager
def chart_mirror(directory: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Serve a folder holding a Helm repository (index.yaml + archives) on 127.0.0.1 while rendering."""
    index_file = directory / "index.yaml"
    if not index_file.is_file():
        msg = f"{directory} has no index.yaml; a chart mirror is a Helm repository folder (helm repo index)"
        raise RenderError(msg)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", yaml.safe_load(index_file.read_text()) or {}
    finally:
        server.shutdown()
        server.server_close()
