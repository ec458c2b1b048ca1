"""Which Pulumi engine a command runs: the user's own `pulumi` and provider first, else the offline toolchain.

A machine with the Pulumi CLI (v3, no older than the Pulumi SDK this package runs) and the Kubernetes provider
the pinned SDK asks for (`pulumi-resource-kubernetes` 4.25.0, where `pulumi plugin install resource kubernetes
4.25.0` puts it: `$PULUMI_HOME/plugins`, default `~/.pulumi/plugins`) runs those: `review`, `migrate`, the
`simulate` rehearsals and `local up` build neither. The CLI is the first `pulumi` on PATH, else the installer's
`~/.pulumi/bin/pulumi`. The commands still run them in their own Pulumi home and file backend (`engine.prepare`,
the review's render areas): the user's binaries, never the user's state. An EKS stack's `migrate` runs `pulumi up`
in the user's own workspace and backend, as `pulumi up` itself would.

The offline toolchain (`toolchain.sh`, shipped with the package) is for machines without them: it builds what is
missing from the Go module proxy (about 40 minutes on 2 cores, once; cached under the user cache). Only the tools
no Pulumi install provides (kube-apiserver, etcd, kwok for a local cluster) are always its.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Final

from eks_hybrid_gpu import engine, projectdir
from eks_hybrid_gpu.engine import PROVIDER_PLUGIN, Toolchain, provider_version

LOCAL_CLUSTER_TOOLS: Final = ("etcd", "kube", "kwok")
"""What a local cluster with simulated nodes needs from the toolchain whatever the engine (`local up`)."""
API_SERVER_TOOLS: Final = ("etcd", "kube")
"""What a private API server for Helm's capabilities needs (`review` without --kubeconfig)."""
VERSION_SECONDS: Final = 20.0
"""How long `pulumi version` may take before the CLI is taken as unusable."""


def pulumi_home(environ: Mapping[str, str] = os.environ) -> Path:
    """Where Pulumi keeps its plugins: $PULUMI_HOME, else ~/.pulumi."""
    home = environ.get("PULUMI_HOME")
    return Path(home).expanduser() if home else Path(environ.get("HOME") or Path.home()) / ".pulumi"


def sdk_floor() -> tuple[int, int, int]:
    """The installed Pulumi SDK's version: a CLI older than it may lack what the SDK asks of it."""
    try:
        return _parsed(metadata.version("pulumi")) or (3, 0, 0)
    except metadata.PackageNotFoundError:
        return (3, 0, 0)


def _parsed(version: str) -> tuple[int, int, int] | None:
    parts = version.strip().removeprefix("v").split("-", 1)[0].split("+", 1)[0].split(".")
    try:
        major, minor, patch = (int(p) for p in [*parts, "0", "0"][:3])
    except ValueError:
        return None
    return major, minor, patch


def _shown(version: tuple[int, int, int]) -> str:
    return ".".join(str(p) for p in version)


@dataclass(frozen=True)
class UserEngine:
    """What of the user's own Pulumi install was found, and why it cannot be used (empty when it can)."""

    pulumi: Path | None
    version: str | None
    provider: Path | None
    problem: str

    @property
    def usable(self) -> bool:
        """The CLI at a version the SDK can drive, and the provider at the pinned version."""
        return not self.problem

    def toolchain(self, rest: Toolchain | None = None, environ: Mapping[str, str] = os.environ) -> Toolchain:
        """The user's CLI and provider, with `rest` (the toolchain's API server binaries) behind them on PATH.

        The engine's first folder is a `bin/` holding `pulumi` (the Automation API runs ROOT/bin/pulumi): the
        CLI's own folder when it is one, else a link to the CLI in the user cache, with the CLI's folder after it.
        """
        if self.pulumi is None or self.provider is None:
            raise ValueError(self.problem)
        folders = [str(self.pulumi.parent)]
        if self.pulumi.parent.name != "bin":
            folders.insert(0, str(_bin_link(self.pulumi, environ)))
        after = rest.path_entries if rest else ()
        return Toolchain((*folders, *after), self.provider, rest.kube_dirs if rest else "")


def _bin_link(pulumi: Path, environ: Mapping[str, str]) -> Path:
    """A `bin/` folder in the user cache whose `pulumi` links to `pulumi` (one folder per CLI path)."""
    cache = environ.get("EKS_HYBRID_GPU_CACHE") or str(
        Path(environ.get("XDG_CACHE_HOME") or Path(environ.get("HOME") or Path.home()) / ".cache") / "eks-hybrid-gpu"
    )
    real = pulumi.resolve()
    folder = Path(cache) / "pulumi-bin" / hashlib.sha256(str(real).encode()).hexdigest()[:16] / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "pulumi"
    if not (link.is_symlink() and link.resolve() == real):
        link.unlink(missing_ok=True)
        link.symlink_to(real)
    return folder


def find_pulumi(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The first `pulumi` on PATH, else the installer's ~/.pulumi/bin/pulumi."""
    found = shutil.which("pulumi", path=environ.get("PATH", ""))
    if found:
        return Path(found)
    installed = Path(environ.get("HOME") or Path.home()) / ".pulumi" / "bin" / "pulumi"
    return installed if installed.is_file() and os.access(installed, os.X_OK) else None


def provider_plugin(environ: Mapping[str, str] = os.environ, version: str | None = None) -> Path | None:
    """The Kubernetes provider plugin at `version` (default: the pinned one) as `pulumi plugin install` keeps it."""
    version = version or provider_version()
    folder = pulumi_home(environ) / "plugins" / f"resource-{PROVIDER_PLUGIN}-v{version}"
    binary = folder / f"pulumi-resource-{PROVIDER_PLUGIN}"
    partial = folder.with_name(folder.name + ".partial")  # Pulumi's marker of an install that did not finish
    if binary.is_file() and os.access(binary, os.X_OK) and not partial.exists():
        return binary
    return None


def cli_version(pulumi: Path, environ: Mapping[str, str] = os.environ) -> str | None:
    """`pulumi version` (`v3.274.1`), or None when it does not answer one."""
    try:
        done = subprocess.run(  # noqa: S603 (the CLI found on PATH, fixed arguments)
            [str(pulumi), "version"],
            capture_output=True,
            text=True,
            timeout=VERSION_SECONDS,
            env={**environ, "PULUMI_SKIP_UPDATE_CHECK": "true"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    return text[0].strip() if text and _parsed(text[0]) else None


def user_engine(environ: Mapping[str, str] = os.environ) -> UserEngine:
    """The user's own Pulumi CLI and Kubernetes provider, and what keeps them from being used."""
    pulumi = find_pulumi(environ)
    provider = provider_plugin(environ)
    wanted = provider_version()
    plugin_folder = pulumi_home(environ) / "plugins"
    missing_provider = (
        f"the Kubernetes provider {wanted} is not in {plugin_folder} (`pulumi plugin install resource "
        f"{PROVIDER_PLUGIN} {wanted}` puts it there)"
    )
    if pulumi is None:
        problem = "no `pulumi` on PATH or in ~/.pulumi/bin"
        return UserEngine(None, None, provider, problem + ("" if provider else f", and {missing_provider}"))
    version = cli_version(pulumi, environ)
    floor = sdk_floor()
    parsed = _parsed(version) if version else None
    if parsed is None:
        return UserEngine(pulumi, None, provider, f"{pulumi} did not answer `pulumi version`")
    if parsed[0] != floor[0] or parsed < floor:
        problem = f"{pulumi} is Pulumi {version}, older than the Pulumi SDK {_shown(floor)} this tool runs"
        return UserEngine(pulumi, version, provider, problem)
    return UserEngine(pulumi, version, provider, "" if provider else missing_provider)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def choose(
    local_tools: Sequence[str] = (),
    say: Callable[[str], None] = _say,
    environ: Mapping[str, str] = os.environ,
    build: Callable[[Sequence[str]], Toolchain] | None = None,
) -> Toolchain:
    """The engine a command runs: the user's Pulumi CLI and provider when usable, else the offline toolchain's.

    `local_tools` are the toolchain steps the command needs besides the engine (`LOCAL_CLUSTER_TOOLS`,
    `API_SERVER_TOOLS`); they come from the toolchain either way. One line says which engine runs, and why the
    toolchain is built when it is. `build` (default `engine.ensure_toolchain`) raises EngineUnavailable.
    """
    build = build or _build
    found = user_engine(environ)
    if found.usable and found.provider is not None:
        say(f"engine: your Pulumi {found.version} ({found.pulumi}) and Kubernetes provider ({found.provider.parent})")
        return found.toolchain(build(local_tools) if local_tools else None, environ)
    say(
        f"engine: the offline toolchain ({found.problem}); it is built once from the Go module proxy when not "
        f"cached, {offline_cost()}"
    )
    return build(())


def _build(steps: Sequence[str]) -> Toolchain:
    """The toolchain's `steps`, or all of it (`engine.ensure_toolchain`, looked up when called)."""
    return engine.ensure_toolchain(steps) if steps else engine.ensure_toolchain()


def offline_cost() -> str:
    """What building the offline toolchain takes, in a sentence's words."""
    return "which needs Go 1.26 on PATH and takes about 40 minutes on 2 cores"


def toolchain_failed(code: int, steps: Sequence[str] = ()) -> str:
    """The refusal when the offline toolchain could not be made: what the person can do, wherever they run from.

    From an installed wheel there is no `scripts/` folder to name: the words are the two ways out (the user's own
    Pulumi, or Go for the build); in a checkout the script is named too. With `steps` (only a local cluster's
    binaries, which no Pulumi install has) the way out is Go alone.
    """
    if steps and "pulumi" not in steps:
        return (
            f"{', '.join(steps)} (a local API server's binaries, which no Pulumi install has) come from the offline "
            f"toolchain, and building them failed (exit {code}; its lines above say where): install Go 1.26 and run "
            "the command again"
        )
    wanted = provider_version()
    own = (
        f"install the Pulumi CLI ({_shown(sdk_floor())} or newer) and its Kubernetes provider (`pulumi plugin install "
        f"resource {PROVIDER_PLUGIN} {wanted}`), which this command then uses"
    )
    if projectdir.SHIPPED.name == "_project":  # an installed wheel
        return (
            f"building the offline engine toolchain failed (exit {code}; its lines above say where). Either {own}, "
            "or install Go 1.26 and run the command again to build the toolchain (about 40 minutes on 2 cores, once)"
        )
    return (
        f"scripts/toolchain.sh failed with exit code {code}; its progress output above says where. Either fix that "
        f"and run it again, or {own}"
    )
