"""Loading and validating the stack config: every problem at once, each with its config path and fix.

Nothing is registered until this passes, so an invalid stack never half-applies.
"""

from __future__ import annotations

import re
import tarfile
import zlib
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Final, get_args

import yaml
from pydantic import BaseModel, ValidationError

from components import versions
from components.config import ChartPin, CohortConfig, Mig, StackConfig, TimeSlicing, show
from policy.gpu_allocation.vocab.gpu_models import known_profiles
from policy.gpu_allocation.vocab.grammar import is_exact_version
from policy.gpu_allocation.vocab.labels import COMPUTE_TYPE_LABEL, DEFAULT_COHORT_LABEL_KEY, HYBRID, OWNERS, PROJECT
from policy.gpu_allocation.vocab.selectors import selectors_overlap

MAX_PER_KIND: Final = 10
"""Problems of one kind listed before the rest are summed up: 40 duplicate cohorts make 780 overlaps."""
CHART_YAML_MAX: Final = 1 << 20
"""A Chart.yaml larger than this is not read (a chart's own is a few KiB)."""


@dataclass(frozen=True)
class Problem:
    """One invalid setting: where it is and what to do about it."""

    path: str
    message: str
    kind: str = field(default="", compare=False)
    """Problems of the same kind are capped together; empty: derived from the path and the message's words."""

    def __str__(self) -> str:
        return f"{PROJECT}:{self.path}: {self.message}"

    def kind_key(self) -> str:
        """What makes two problems 'of the same kind'."""
        if self.kind:
            return self.kind
        words = re.sub(r"'[^']*'|\{[^}]*\}|\[[0-9]+\]|[0-9]+", "_", self.message)
        return re.sub(r"\[[0-9]+\]", "[]", self.path) + "|" + words


def capped_lines(problems: list[Problem]) -> list[str]:
    """One line per problem, at most MAX_PER_KIND of each kind, then one line counting the rest."""
    counts = Counter(p.kind_key() for p in problems)
    shown: Counter[str] = Counter()
    lines: list[str] = []
    for problem in problems:
        key = problem.kind_key()
        shown[key] += 1
        if shown[key] <= MAX_PER_KIND:
            lines.append(f"  - {problem}")
        if shown[key] == MAX_PER_KIND and counts[key] > MAX_PER_KIND:
            lines.append(f"  - ...and {counts[key] - MAX_PER_KIND} more of the same kind")
    return lines


class StackConfigError(Exception):
    """The stack config is invalid; `problems` lists every problem found."""

    def __init__(self, problems: list[Problem], stack_file: str | None = None, subject: str | None = None) -> None:
        self.problems = problems
        where = f" in {stack_file}" if stack_file else ""
        if subject is None:
            head = f"The stack config{where} has {len(problems)} problem(s); nothing was changed:"
        else:
            head = f"{subject} do not fit the stack config{where}: {len(problems)} problem(s); nothing was changed:"
        super().__init__("\n".join([head, *capped_lines(problems)]))


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster itself says (EKS describe-cluster), overriding declared values."""

    kubernetes_version: str | None = None
    auto_mode: bool | None = None


_PLAIN_KEY: Final = re.compile(r"[A-Za-z0-9_./-]{1,253}", re.ASCII)


def _format_loc(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("none", "time-slicing", "mig", "[key]") or part.startswith("function-"):
            continue  # discriminator tags of the sharing union, pydantic's own markers
        elif not _PLAIN_KEY.fullmatch(part):
            out += f"[{show(part)}]"  # a user's key: escaped, so it cannot break the line or hide
        else:
            out += f".{part}" if out else part
    return out or "(the stack config)"


_PLAIN_TYPES: Final = {
    "bool_type": "true or false: write true or false without quotes",
    "bool_parsing": "true or false: write true or false without quotes",
    "int_type": "a whole number: write a whole number without quotes",
    "int_parsing": "a whole number: write a whole number without quotes",
    "int_from_float": "a whole number: write a number without a fraction",
    "string_type": "text: write it as a string",
    "dict_type": "a mapping: write it as key: value pairs",
    "model_type": "a mapping of settings: write it as key: value pairs",
    "model_attributes_type": "a mapping of settings: write it as key: value pairs",
    "tuple_type": "a list: write a list of cohorts, each with a name and an owner",
    "list_type": "a list: write it as a list",
}


def _pydantic_message(item: Mapping[str, Any]) -> str:
    """Pydantic's error, in the project's words: what the value is, what it should be, what to write."""
    kind = item["type"]
    context = item.get("ctx") or {}
    value = show(item.get("input"))
    if kind == "value_error":
        return str(item["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        return "is not a setting of this program; remove it or check its spelling"
    if kind == "missing":
        return "is required; add it to the stack file"
    if kind == "union_tag_invalid":
        return "sharing.mode must be one of none, time-slicing or mig"
    if kind == "union_tag_not_found":
        return "has no mode: set sharing.mode to none, time-slicing or mig"
    if kind in _PLAIN_TYPES:
        return f"is {value}, not {_PLAIN_TYPES[kind]}"
    if kind in {"greater_than_equal", "greater_than"}:
        bound = context.get("ge", context.get("gt"))
        word = "at least" if kind == "greater_than_equal" else "more than"
        return f"is {value}; it must be {word} {bound}: raise it"
    if kind in {"less_than_equal", "less_than"}:
        bound = context.get("le", context.get("lt"))
        word = "at most" if kind == "less_than_equal" else "less than"
        return f"is {value}; it must be {word} {bound}: lower it"
    if kind == "literal_error":
        return f"is {value}; use one of {context.get('expected', 'the documented values')}"
    return f"is {value}, which is not valid here ({item['msg']}): correct it"


def _pydantic_problems(error: ValidationError) -> list[Problem]:
    return [Problem(_format_loc(item["loc"]), _pydantic_message(item)) for item in error.errors(include_url=False)]


def parse_version(text: str) -> tuple[int, int, int]:
    """`v1.34.2-eks-abc` -> (1, 34, 2); a missing patch reads as 0."""
    match = re.match(r"v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?", text, re.ASCII)
    if not match:
        msg = f"not a version: {text}"
        raise ValueError(msg)
    return int(match[1]), int(match[2]), int(match[3] or 0)


def selectors_disjoint(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Two equality selectors select disjoint node sets iff some key has different values (the pack's rule)."""
    return not selectors_overlap(a, b)


def _cohort_problems(config: StackConfig) -> Iterable[Problem]:
    names: dict[str, int] = {}
    label_key = config.cohort_label_key
    for i, cohort in enumerate(config.cohorts):
        path = f"cohorts[{i}]"
        if cohort.name in names:
            yield Problem(
                f"{path}.name",
                f"'{cohort.name}' is also the name of cohorts[{names[cohort.name]}]; "
                "cohort names must be unique: rename one",
                kind="duplicate-name",
            )
        names.setdefault(cohort.name, i)
        selector = cohort.selector(label_key)
        if selector.get(COMPUTE_TYPE_LABEL) != HYBRID:
            found = selector.get(COMPUTE_TYPE_LABEL, "<absent>")
            yield Problem(
                f"{path}.nodeSelector",
                f"{COMPUTE_TYPE_LABEL} is {found}; a selector without "
                f"{COMPUTE_TYPE_LABEL}: {HYBRID} could match EKS Auto Mode nodes, whose GPUs AWS "
                f"already manages: set {COMPUTE_TYPE_LABEL}: {HYBRID}",
            )
        if label_key not in selector:
            yield Problem(
                f"{path}.nodeSelector",
                f"has no {label_key} label; cohorts are told apart by "
                f"owner-managed labels: add {label_key}: <cohort value>",
            )
        yield from _sharing_problems(path, cohort)
        if not cohort.host_driver_verified and cohort.owner != "gpu-operator":
            yield Problem(
                f"{path}.hostDriverVerified",
                f"is false; the standalone {cohort.owner} path needs a "
                "prepared host driver, and being on premises does not imply that a driver exists: run "
                "`eks-hybrid-gpu hostcheck` on every host of the cohort, then set it to true",
            )

    # Each selector is built once, not once per pair: the pairwise check is quadratic in the cohorts.
    selectors = [cohort.selector(label_key) for cohort in config.cohorts]
    for i, j in combinations(range(len(selectors)), 2):
        sel_a, sel_b = selectors[i], selectors[j]
        if not selectors_disjoint(sel_a, sel_b):
            yield Problem(
                f"cohorts[{j}].nodeSelector",
                f"{sel_b} can select the same nodes as cohorts[{i}] "
                f"({config.cohorts[i].name}: {sel_a}); one GPU must have one allocation owner: give the cohorts "
                f"different values of {label_key}",
                kind="overlap",
            )


def _sharing_problems(path: str, cohort: CohortConfig) -> Iterable[Problem]:
    sharing = cohort.sharing
    if isinstance(sharing, TimeSlicing) and cohort.owner != "device-plugin":
        yield Problem(
            f"{path}.sharing.mode",
            f"time-slicing is configured on the device plugin, but the owner is "
            f"{cohort.owner}: use owner device-plugin or sharing mode none",
        )
    if not isinstance(sharing, Mig):
        return
    if cohort.owner == "dra":
        yield Problem(
            f"{path}.sharing.mode",
            "mig sharing configures the device plugin's MIG strategy; DRA "
            "allocates existing MIG devices through the mig.nvidia.com DeviceClass: use sharing mode none",
        )
    if sharing.mig_strategy == "none":
        yield Problem(
            f"{path}.sharing.migStrategy",
            "is none, so the plugin advertises no MIG devices and a "
            "nvidia.com/mig-* request never schedules: prepare the MIG geometry, then set single or mixed",
        )
    if sharing.mig_strategy == "mixed" and sharing.mig_profile is None:
        yield Problem(
            f"{path}.sharing.migProfile",
            "is required with migStrategy mixed: name the profile the smoke Job requests, e.g. 1g.5gb",
        )
    if sharing.gpu_model is not None:
        table = known_profiles(sharing.gpu_model)
        if table is None:
            yield Problem(
                f"{path}.sharing.gpuModel",
                f"{show(sharing.gpu_model)} has no known MIG profile table: use "
                "one of A100-40GB, A100-80GB, H100-80GB, H200-141GB",
            )
        elif sharing.mig_profile is not None and sharing.mig_profile not in table:
            yield Problem(
                f"{path}.sharing.migProfile",
                f"'{sharing.mig_profile}' is not a MIG profile of {sharing.gpu_model}: use one of {', '.join(table)}",
            )


def _owner_problems(config: StackConfig, facts: ClusterFacts) -> Iterable[Problem]:
    operators = config.cohorts_of("gpu-operator")
    dra = config.cohorts_of("dra")
    for i, _ in operators[1:]:
        yield Problem(
            f"cohorts[{i}].owner",
            f"is a second gpu-operator cohort (cohorts[{operators[0][0]}] is the "
            "first); the Operator is cluster-wide and cannot be pinned to a cohort: keep one",
        )
    for i, _ in dra[1:]:
        yield Problem(
            f"cohorts[{i}].owner",
            f"is a second dra cohort (cohorts[{dra[0][0]}] is the first); the DRA "
            "chart's names and DeviceClasses are cluster-wide, so it installs once: merge the cohorts",
        )
    if operators and config.operator.mode == "gpu-cluster":
        for i, _ in dra:
            yield Problem(
                f"cohorts[{i}].owner",
                "is dra next to an Operator in gpu-cluster mode; GPUCluster "
                "deploys its own DRA driver and must not get an additional standalone DRA release: "
                "remove this cohort or set operator.mode to cluster-policy",
            )
    plugins = config.cohorts_of("device-plugin")
    if operators and plugins and config.operator.mode == "cluster-policy" and config.operator.device_plugin_enabled:
        names = ", ".join(f"cohorts[{i}] ({cohort.name})" for i, cohort in plugins)
        yield Problem(
            "operator.devicePluginEnabled",
            f"is true while the standalone device plugin serves {names}; ClusterPolicy operands are not "
            "restricted by the cohort selector, so both plugins would advertise nvidia.com/gpu on the same GPUs: "
            "set operator.devicePluginEnabled to false, or move those cohorts to owner gpu-operator",
        )
    auto_mode = facts.auto_mode if facts.auto_mode is not None else config.cluster.auto_mode
    if operators and auto_mode:
        yield Problem(
            f"cohorts[{operators[0][0]}].owner",
            "is gpu-operator on an EKS Auto Mode cluster; Operator "
            "operands are placed by GPU discovery, not by the cohort selector, and would reach Auto "
            "Mode GPUs: use the standalone device-plugin or dra owner, or an isolated cluster",
        )
    if operators and not config.operator.driver_enabled:
        for i, cohort in operators:
            if not cohort.host_driver_verified:
                yield Problem(
                    f"cohorts[{i}].hostDriverVerified",
                    "is false while operator.driverEnabled is false; "
                    "driver.enabled=false is only right where the host driver is verified: run "
                    "`eks-hybrid-gpu hostcheck`, then set it to true, or set operator.driverEnabled",
                )
    uses_dra = bool(dra) or (bool(operators) and config.operator.mode == "gpu-cluster")
    if uses_dra:
        yield from _dra_version_problems(config, facts)


def _dra_version_problems(config: StackConfig, facts: ClusterFacts) -> Iterable[Problem]:
    declared = facts.kubernetes_version or config.cluster.kubernetes_version
    floor = ".".join(map(str, versions.DRA_MIN_KUBERNETES))
    if declared is None and config.cluster.source == "eks":
        return  # EKS reports its version; the check runs again once the describe-cluster facts are known
    if declared is None:
        yield Problem(
            "cluster.kubernetesVersion",
            f"is not set, and DRA needs Kubernetes {floor}+: declare the cluster's version, e.g. 1.34.4",
        )
        return
    found = parse_version(declared)
    # EKS reports major.minor only; its 1.34 platform versions already run a 1.34.2+ patch.
    minor_only = facts.kubernetes_version is not None and declared.count(".") == 1
    if found[:2] < versions.DRA_MIN_KUBERNETES[:2] or (not minor_only and found < versions.DRA_MIN_KUBERNETES):
        yield Problem(
            "cluster.kubernetesVersion",
            f"is {declared}; DRA GPU allocation with resource.k8s.io/v1 "
            f"needs Kubernetes {floor}+: upgrade the cluster or use owner device-plugin",
        )


def _cluster_problems(config: StackConfig) -> Iterable[Problem]:
    cluster = config.cluster
    if cluster.source == "eks" and (not cluster.name or not cluster.region):
        yield Problem("cluster", "source eks needs both name and region: set cluster.name and cluster.region")
    if cluster.source == "kubeconfig" and not cluster.kubeconfig:
        yield Problem("cluster.kubeconfig", "is required with source kubeconfig: set the path of the file")
    if cluster.source != "local" and cluster.skip_await:
        yield Problem(
            "cluster.skipAwait",
            "is true on a real cluster; Pulumi would report GPU owners as ready "
            "before their pods run: remove it (it exists for the node-less local API server)",
        )


def _smoke_problems(config: StackConfig) -> Iterable[Problem]:
    approved = config.smoke_jobs.approved_cohort
    if approved is None:
        return
    names = [c.name for c in config.cohorts]
    if approved not in names:
        yield Problem(
            "smokeJobs.approvedCohort",
            f"{show(approved)} is not a cohort of this stack: use one of "
            f"{', '.join(names)}, or remove it to keep every smoke Job suspended",
        )
    if config.smoke_jobs.image == versions.SMOKE_IMAGE_PLACEHOLDER:
        yield Problem(
            "smokeJobs.image",
            "is the deliberately unusable placeholder, so no smoke Job can be "
            "approved to run: set a tested image pinned by digest",
        )


def _namespace_problems(config: StackConfig) -> Iterable[Problem]:
    roles = {
        "devicePlugin": config.namespaces.device_plugin,
        "draDriver": config.namespaces.dra_driver,
        "gpuOperator": config.namespaces.gpu_operator,
        "workloads": config.namespaces.workloads,
    }
    first: dict[str, str] = {}
    for role, namespace in roles.items():
        if namespace in first:
            yield Problem(
                f"namespaces.{role}",
                f"'{namespace}' is also namespaces.{first[namespace]}; each role needs its own namespace (the "
                "owners' namespaces are privileged, the workloads' restricted): choose a different name",
            )
        first.setdefault(namespace, role)


def _chart_problems(config: StackConfig, project_dir: Path) -> Iterable[Problem]:
    pins: list[tuple[str, ChartPin, bool, str]] = [
        (
            "devicePlugin",
            config.charts.device_plugin,
            bool(config.cohorts_of("device-plugin")),
            versions.DEVICE_PLUGIN_CHART,
        ),
        ("draDriver", config.charts.dra_driver, bool(config.cohorts_of("dra")), versions.DRA_DRIVER_CHART),
        (
            "gpuOperator",
            config.charts.gpu_operator,
            bool(config.cohorts_of("gpu-operator")),
            versions.GPU_OPERATOR_CHART,
        ),
    ]
    for key, pin, used, chart_name in pins:
        source = pin.source
        if source is None or not used:
            continue
        path = f"charts.{key}.source"
        chosen = [name for name in ("repo", "oci", "archive") if getattr(source, name)]
        if len(chosen) != 1:
            yield Problem(path, f"sets {chosen or 'none'} of repo, oci and archive; choose exactly one")
            continue
        if source.archive is not None:
            yield from _archive_problems(f"{path}.archive", project_dir, source.archive, pin.version, chart_name)


class _Unreadable(Exception):
    """Why an archive cannot be used as the chart, in the words of the refusal."""


def _chart_yaml(archive: Path) -> Mapping[str, Any]:
    """The archive's top-level Chart.yaml as a mapping, or _Unreadable saying what is wrong."""
    not_helm = "is not a Helm chart archive ({why}): use the .tgz that `helm package` writes"
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = [m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/Chart.yaml")]
            if not members:
                raise _Unreadable(not_helm.format(why="no <chart>/Chart.yaml inside"))
            member = members[0]
            if not member.isfile():
                raise _Unreadable(not_helm.format(why=f"{member.name} is a link or folder, not a file"))
            if member.size > CHART_YAML_MAX:
                raise _Unreadable(not_helm.format(why=f"{member.name} is larger than 1 MiB"))
            handle = tar.extractfile(member)
            text = handle.read() if handle is not None else b""
    except (tarfile.TarError, EOFError, OSError, zlib.error, KeyError) as error:
        why = "truncated" if isinstance(error, EOFError) else "not a readable gzip tar"
        raise _Unreadable(not_helm.format(why=why)) from None
    try:
        chart = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, UnicodeDecodeError, ValueError):
        raise _Unreadable(not_helm.format(why="its Chart.yaml is not valid YAML")) from None
    if not isinstance(chart, Mapping) or not chart:
        raise _Unreadable(not_helm.format(why="its Chart.yaml is empty or not a mapping"))
    return chart


def _archive_problems(path: str, project_dir: Path, relative: str, version: str, chart_name: str) -> Iterable[Problem]:
    try:
        archive = (project_dir / relative).resolve()
        usable = archive.is_file()
    except (OSError, ValueError, RuntimeError):
        yield Problem(path, "cannot be opened (the path is too long or malformed): point it at the chart's .tgz")
        return
    if not usable:
        what = "is not a file" if archive.exists() else "does not exist"
        yield Problem(path, f"{archive} {what}: point it at the chart's .tgz")
        return
    try:
        chart = _chart_yaml(archive)
    except _Unreadable as error:
        yield Problem(path, f"{archive} {error}")
        return
    found_name, found_version = chart.get("name"), chart.get("version")
    if found_name != chart_name:
        yield Problem(
            path,
            f"{archive} holds chart {show(found_name)}, not {chart_name}: use the archive of {chart_name}",
        )
    if str(found_version) != version:
        yield Problem(
            path,
            f"{archive} holds version {found_version if is_exact_version(found_version) else show(found_version)}"
            f", but the pinned version is {version}: pin the archive's version or use the archive of the pinned "
            "version",
        )


def validate(config: StackConfig, project_dir: Path, facts: ClusterFacts | None = None) -> list[Problem]:
    """Every cross-field problem of a config that passed the field-level model."""
    facts = facts or ClusterFacts()
    return [
        *_cluster_problems(config),
        *_cohort_problems(config),
        *_owner_problems(config, facts),
        *_smoke_problems(config),
        *_namespace_problems(config),
        *_chart_problems(config, project_dir),
    ]


def _parse(
    raw: Mapping[str, Any], context: Mapping[str, Any]
) -> tuple[StackConfig | None, list[Problem], set[str], list[int] | None]:
    """The model, or field problems plus the best partial model of the settings that did parse.

    The partial model drops each failed top-level key (its defaults stand in) and each failed cohort, so that
    cross-field problems elsewhere are reported in the same run; `index_map` maps kept cohorts to their index.
    """
    try:
        return StackConfig.model_validate(dict(raw), context=context), [], set(), None
    except ValidationError as error:
        problems = _pydantic_problems(error)
        failed = {str(item["loc"][0]) for item in error.errors() if item["loc"]}
    partial = {key: value for key, value in raw.items() if key not in failed}
    index_map: list[int] | None = None
    cohorts = raw.get("cohorts")
    if "cohorts" in failed:
        if not isinstance(cohorts, list):
            return None, problems, failed, None
        index_map = []
        kept = []
        for index, item in enumerate(cohorts):
            try:
                CohortConfig.model_validate(item)
            except ValidationError:
                continue
            index_map.append(index)
            kept.append(item)
        partial["cohorts"] = kept
    try:
        return StackConfig.model_validate(partial, context=context), problems, failed, index_map
    except ValidationError:
        return None, problems, failed, index_map


def _reindexed(problem: Problem, index_map: list[int]) -> Problem:
    def original(match: re.Match[str]) -> str:
        return f"cohorts[{index_map[int(match[1])]}]"

    return Problem(
        re.sub(r"cohorts\[([0-9]+)\]", original, problem.path),
        re.sub(r"cohorts\[([0-9]+)\]", original, problem.message),
        problem.kind,
    )


def _model_words(model: type[BaseModel], words: set[str]) -> set[str]:
    """Every setting name and Literal value of a model and the models inside it."""

    def walk(annotation: Any) -> None:
        if isinstance(annotation, str):
            words.add(annotation)
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            _model_words(annotation, words)
        for argument in get_args(annotation):
            walk(argument)

    for name, info in model.model_fields.items():
        words.update({name, info.alias or name})
        walk(info.annotation)
    return words


_NOT_SECRET: Final = frozenset(
    {*OWNERS, HYBRID, "true", "false", COMPUTE_TYPE_LABEL, DEFAULT_COHORT_LABEL_KEY} | _model_words(StackConfig, set())
)
"""Setting names and vocabulary a secret value may equal without the refusal's own wording being redacted."""


def _leaves(value: Any, depth: int = 0) -> Iterable[str]:
    if depth > 64:
        return  # refusals quote containers as "a list" / "a mapping": nothing deeper is ever echoed
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _leaves(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item, depth + 1)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def redact(problems: list[Problem], raw: Mapping[str, Any], secret_keys: Collection[str]) -> list[Problem]:
    """Refusals never echo a value set as a secret: it reads `the secret value at <path>` instead."""
    secrets = {leaf for key in secret_keys for leaf in _leaves(raw.get(key))}
    secrets -= _NOT_SECRET
    if not secrets:
        return problems
    ordered = sorted(secrets, key=len, reverse=True)
    redacted = []
    for problem in problems:
        message = problem.message
        for secret in ordered:
            message = message.replace(show(secret), f"the secret value at {problem.path}")
            message = message.replace(repr(secret), f"the secret value at {problem.path}")
            if len(secret) >= 4:  # also inside a longer word or path: over-redacting is the safe side
                message = message.replace(secret, "the secret value")
            elif len(secret) == 3:
                message = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", "the secret value", message)
        redacted.append(Problem(problem.path, message, problem.kind))
    return redacted


def load_stack_config(
    raw: Mapping[str, Any],
    project_dir: Path,
    facts: ClusterFacts | None = None,
    stack_file: str | None = None,
    secret_keys: Collection[str] = (),
) -> StackConfig:
    """Parse and validate raw config values (keys without the project namespace) or raise StackConfigError.

    Field problems and the cross-field problems of the settings that still parse are reported together;
    values of `secret_keys` never appear in the refusal.
    """
    config, problems, failed, index_map = _parse(raw, {"secret_keys": frozenset(secret_keys)})
    if config is not None:
        cross = validate(config, project_dir, facts)
        if index_map is not None:
            cross = [_reindexed(p, index_map) for p in cross if p.path != "smokeJobs.approvedCohort"]
        cross = [p for p in cross if re.split(r"[.\[]", p.path, maxsplit=1)[0] not in failed - {"cohorts"}]
        problems = [*problems, *(p for p in cross if p not in problems)]
    if problems or config is None:
        raise StackConfigError(redact(problems, raw, secret_keys), stack_file)
    return config
