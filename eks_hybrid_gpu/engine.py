"""Drive the real Pulumi engine: its tools, an isolated Pulumi home, a file backend, the inline program.

The tools are the user's own `pulumi` and Kubernetes provider where they are installed, else the offline toolchain
(`eks_hybrid_gpu.engine_tools.choose`); either way each run gets its own Pulumi home and backend.

The program runs in-process through the Automation API, whose language server stands in for the Python
language host (the offline toolchain has none: the Go module proxy does not serve it). The policy pack
runs through its executable entry point `policy/analyzer`. Everything else — engine, Kubernetes
provider, Chart v4 rendering, server-side apply — is the real thing.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from pulumi import automation as auto

from cluster.records.lease_records import HOLDER_ENV, pid_alive
from eks_hybrid_gpu import projectdir
from eks_hybrid_gpu.localpaths import KUBE_DIRS_ENV
from policy.gpu_allocation.vocab.labels import PROJECT
from policy.gpu_allocation.vocab.stack_files import short_name

TOOLCHAIN_SCRIPT = projectdir.tool_file("scripts/toolchain.sh")
"""The offline toolchain's build script, shipped with the package (with toolchain-versions.env beside it)."""
PROVIDER_PLUGIN = "kubernetes"


def engine_state_dir() -> Path:
    """Pulumi home and file backend of the local default (beside the local cluster's state).

    `local up`, the `simulate` rehearsals and `migrate` of a local stack all run the engine here, so they see one
    set of local stacks.
    """
    from eks_hybrid_gpu.localpaths import local_state_dir

    return local_state_dir().parent / "local-engine"


def _versions() -> dict[str, str]:
    pairs = {}
    for line in projectdir.tool_file("scripts/toolchain-versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            pairs[key.strip()] = value.strip()
    return pairs


def default_kube_version() -> str:
    """The Kubernetes version a local cluster runs when the stack declares none (the toolchain's KUBE_VERSION)."""
    return _versions()["KUBE_VERSION"]


def provider_version() -> str:
    """The Kubernetes provider version the pinned Python SDK requires."""
    return _versions()["K8S_PROVIDER_VERSION"]


class EngineUnavailable(RuntimeError):
    """No engine can be had: no usable Pulumi of the user's and the offline toolchain could not be built.

    The message is one line that says what to install; every command that runs the engine prints it and exits 1.
    """


@dataclass(frozen=True)
class Toolchain:
    """Where the built tools are."""

    path_entries: tuple[str, ...]
    provider_binary: Path
    kube_dirs: str = ""
    """`v1.34.4=DIR,v1.37.2=DIR`: every built Kubernetes version (the default one is on `path_entries`)."""

    def activate(self) -> None:
        """Put the tools first on this process's PATH (once), for the CLI and the subprocesses it starts."""
        if self.kube_dirs:
            os.environ[KUBE_DIRS_ENV] = self.kube_dirs
        if self.path_entries and os.environ.get("PATH", "").startswith(self.path_entries[0]):
            return
        os.environ["PATH"] = os.pathsep.join([*self.path_entries, os.environ.get("PATH", "")])


def ensure_toolchain(steps: Sequence[str] = ()) -> Toolchain:
    """Build (or find in the cache) every tool, or only `steps` (`etcd`, `kube`, `pulumi`, `provider`, `kwok`).

    Progress goes to stderr, so long builds are visible. A failed build is EngineUnavailable, whose words fit where the
    command runs from (a checkout names the script; an installed wheel names what to install instead).
    """
    result = subprocess.run(  # noqa: S603
        ["bash", str(TOOLCHAIN_SCRIPT), "--print-env", *steps],  # noqa: S607
        check=False,
        stdout=subprocess.PIPE,
        text=True,
    )
    if result.returncode != 0:
        from eks_hybrid_gpu.engine_tools import toolchain_failed

        raise EngineUnavailable(toolchain_failed(result.returncode, steps))
    path_entries: tuple[str, ...] = ()
    provider = kube_dirs = ""
    for line in result.stdout.splitlines():
        if line.startswith("export PATH="):
            path_entries = tuple(p.strip("'\"") for p in line.removeprefix("export PATH=").split(":")[:-1])
        elif line.startswith("export EKS_HYBRID_GPU_PROVIDER_BIN="):
            provider = line.split("=", 1)[1].strip("'\"")
        elif line.startswith(f"export {KUBE_DIRS_ENV}="):
            kube_dirs = _shell_word(line.split("=", 1)[1])
    return Toolchain(path_entries, Path(provider), kube_dirs)


def _shell_word(quoted: str) -> str:
    """The value of a `printf %q` word: bash escapes the commas of `v1.34.4=DIR,v1.37.2=DIR` with a backslash."""
    words = shlex.split(quoted)
    return words[0] if len(words) == 1 else ""


@dataclass(frozen=True)
class EngineEnv:
    """An isolated Pulumi home and file-state backend for one working area."""

    state_dir: Path
    toolchain: Toolchain
    kubeconfig: Path

    @property
    def pulumi_home(self) -> Path:
        """Plugins and credentials of this area only."""
        return self.state_dir / "pulumi-home"

    @property
    def variables(self) -> dict[str, str]:
        """Environment for the CLI and the in-process program."""
        return {
            **isolated_variables(self.toolchain.path_entries, self.pulumi_home, self.state_dir / "backend"),
            "EKS_HYBRID_GPU_KUBECONFIG": str(self.kubeconfig),
        }


def isolated_variables(path_entries: Sequence[str], pulumi_home: Path, backend: Path) -> dict[str, str]:
    """The one engine environment: an own Pulumi home and file backend, no update checks, no plugin downloads.

    `eks-hybrid-gpu local up`, the tests, the benchmarks and `review` all run the CLI with these variables, so
    nothing reaches for the internet or for a user's own Pulumi state.
    """
    backend.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.pathsep.join([*path_entries, os.environ.get("PATH", "")]),
        "PULUMI_HOME": str(pulumi_home),
        "PULUMI_BACKEND_URL": f"file://{backend}",
        # Secrets in this local state are encrypted with this passphrase; the state never leaves the machine.
        "PULUMI_CONFIG_PASSPHRASE": os.environ.get("PULUMI_CONFIG_PASSPHRASE", "eks-hybrid-gpu-local"),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_DISABLE_REGISTRY_RESOLVE": "true",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        "PULUMI_PYTHON_CMD": sys.executable,
    }


def prepare(state_dir: Path, kubeconfig: Path, toolchain: Toolchain | None = None) -> EngineEnv:
    """Register the Kubernetes provider (the user's, else the toolchain's) under the exact version the SDK asks for."""
    if toolchain is None:
        from eks_hybrid_gpu.engine_tools import choose

        toolchain = choose()
    engine = EngineEnv(state_dir, toolchain, kubeconfig)
    version = provider_version()
    plugin_dir = engine.pulumi_home / "plugins" / f"resource-{PROVIDER_PLUGIN}-v{version}"
    if not (plugin_dir / f"pulumi-resource-{PROVIDER_PLUGIN}").exists():
        subprocess.run(  # noqa: S603
            [  # noqa: S607
                "pulumi",
                "plugin",
                "install",
                "resource",
                PROVIDER_PLUGIN,
                version,
                "--file",
                str(engine.toolchain.provider_binary),
            ],
            check=True,
            env={**os.environ, **engine.variables},
            capture_output=True,
        )
    # The in-process program reads these too (the kubeconfig of the local source, the passphrase).
    os.environ.update({k: v for k, v in engine.variables.items() if k != "PATH"})
    return engine


RUNS: Final = "runs"
"""Under the engine's state dir: one work folder per run (`STACK.PID.RANDOM`), its own copy of the stack file."""
SALTS: Final = "salts"
"""Under the engine's state dir: each stack's `encryptionsalt`, written once, copied into every run's folder."""
PROJECT_FOLDER: Final = "project"
"""Under the engine's state dir: Pulumi.yaml alone, a stable `--cwd` for `pulumi cancel` (a run's folder goes)."""


def project_folder(engine: EngineEnv) -> Path:
    """A folder with this project's Pulumi.yaml and no stack file: where `pulumi cancel` of this engine runs."""
    return engine.state_dir / PROJECT_FOLDER


def _run_folder(engine: EngineEnv, name: str) -> Path:
    """A new work folder for this run only; the folders of runs whose process has exited are removed first.

    Every run used to copy its stack file into one shared folder, so a teammate's `pulumi up` replaced the config a
    running migration's next phase read; a folder per run keeps each run's config its own.
    """
    runs = engine.state_dir / RUNS
    runs.mkdir(parents=True, exist_ok=True)
    for folder in runs.iterdir():
        parts = folder.name.rsplit(".", 2)
        if len(parts) == 3 and parts[1].isdigit() and not pid_alive(int(parts[1])):
            shutil.rmtree(folder, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{name}.{os.getpid()}.", dir=runs))


def _salt_of(engine: EngineEnv, stack_file: str) -> str | None:
    """The stack's `encryptionsalt` as kept (or as the old shared work folder kept it); None for a new stack."""
    for kept in (engine.state_dir / SALTS / stack_file, engine.state_dir / "work" / "stacks" / stack_file):
        document = yaml.safe_load(kept.read_text()) if kept.is_file() else None
        if isinstance(document, dict) and document.get("encryptionsalt"):
            return str(document["encryptionsalt"])
    return None


def _keep_salt(engine: EngineEnv, work: Path, stack_file: str) -> None:
    """Keep the salt the engine wrote into this run's copy, once: without it the stack's secrets cannot be read."""
    written = yaml.safe_load((work / "stacks" / stack_file).read_text()) or {}
    salt = written.get("encryptionsalt") if isinstance(written, dict) else None
    if not salt or _salt_of(engine, stack_file) is not None:
        return
    (engine.state_dir / SALTS).mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError), (engine.state_dir / SALTS / stack_file).open("x") as kept:
        kept.write(yaml.safe_dump({"encryptionsalt": salt}))


def _work_copy(engine: EngineEnv, name: str, source_dir: Path, charts: Mapping[str, Any] | None = None) -> Path:
    """Copy Pulumi.yaml and the stack file into a work folder of this run's own.

    The Automation API writes the stack's `encryptionsalt` into its stack file; working on a copy keeps
    the repository's stack files clean. The stack's salt is kept apart (`SALTS`) and put into every copy, or the
    stack's secrets could no longer be read. `charts` entries (a chart mirror's version + archive, from the command
    that chose the mirror) replace the stack file's `charts.<key>` in the copy only. Another run's copy is another
    folder: nothing it writes reaches this run's config.
    """
    project = project_folder(engine)
    project.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source_dir / "Pulumi.yaml", project / "Pulumi.yaml")
    work = _run_folder(engine, name)
    (work / "stacks").mkdir()
    shutil.copyfile(source_dir / "Pulumi.yaml", work / "Pulumi.yaml")
    source = projectdir.stack_file(name, source_dir)
    document = yaml.safe_load(source.read_text()) or {}
    salt = _salt_of(engine, source.name)
    if salt is not None:
        document["encryptionsalt"] = salt
    if charts:
        config = document.setdefault("config", {})
        config[f"{PROJECT}:charts"] = {**(config.get(f"{PROJECT}:charts") or {}), **charts}
    (work / "stacks" / source.name).write_text(yaml.safe_dump(document, sort_keys=False))
    return work


def stack(
    engine: EngineEnv,
    name: str,
    work_dir: Path | None = None,
    program: Callable[[], None] | None = None,
    charts: Mapping[str, Any] | None = None,
    lease_holder: str | None = None,
) -> auto.Stack:
    """Select or create a stack whose config lives in `work_dir`/stacks (default: the project's), run inline.

    The private engine's backend has no organizations: `myorg/prod` is its stack `prod` (stacks/Pulumi.prod.yaml).

    `lease_holder`: the holderIdentity of the run (`migrate`) whose own `pulumi up` this stack runs: the program
    counts that run's cohort Leases as its own (inline, as an argument; for the engine's children, in `HOLDER_ENV`).
    Without it, an update takes its cohorts' Leases and refuses while another run holds one.
    """
    project = work_dir or projectdir.current()
    name = short_name(name)

    def default_program() -> None:
        from components.program import run

        run(project, local_kubeconfig=engine.kubeconfig, lease_holder=lease_holder)

    work = _work_copy(engine, name, project, charts)
    workspace = auto.LocalWorkspaceOptions(
        work_dir=str(work),
        pulumi_home=str(engine.pulumi_home),
        env_vars={**engine.variables, **({HOLDER_ENV: lease_holder} if lease_holder else {})},
        pulumi_command=auto.PulumiCommand(
            root=str(Path(_which("pulumi", engine)).parent.parent), skip_version_check=True
        ),
    )
    selected = auto.create_or_select_stack(
        name, project_name=PROJECT, program=program or default_program, opts=workspace
    )
    _keep_salt(engine, work, projectdir.stack_file(name, project).name)
    return selected


def _which(binary: str, engine: EngineEnv) -> str:
    for entry in engine.toolchain.path_entries:
        candidate = Path(entry) / binary
        if candidate.exists():
            return str(candidate)
    msg = f"{binary} is in none of the engine's folders ({', '.join(engine.toolchain.path_entries) or 'none'})"
    raise RuntimeError(msg)


def policy_packs() -> list[str]:
    """The `policy_packs` argument of preview/up: the project's pack, through its executable entry point."""
    return [str(projectdir.policy_pack())]
