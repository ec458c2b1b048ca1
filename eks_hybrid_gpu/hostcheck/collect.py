"""Reads the host: runs nvidia-smi, nvidia-ctk and containerd, and reads containerd and CDI files.

Every command goes through a Runner and every path is joined under a root, so tests feed captured
output and a fixture tree, and a privileged Pod can inspect a host mounted at /host.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Final

from eks_hybrid_gpu.hostcheck import consumers, containerd, devnodes, parse

COMMAND_TIMEOUT_SECONDS: Final = 60
CONFIG_DIRS_FOR_DROPINS: Final[tuple[str, ...]] = ("/etc/containerd/conf.d", "/etc/containerd/config.d")


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and returned."""

    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str]], CommandResult | None]
"""Runs argv; returns None when the executable does not exist."""


def run_command(argv: Sequence[str]) -> CommandResult | None:
    """Run a host command with a timeout; None when it is not installed."""
    executable = shutil.which(argv[0])
    if executable is None:
        return None
    try:
        completed = subprocess.run(  # noqa: S603 - fixed argv, no shell; executables are the operator's
            [executable, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return CommandResult(124, "", f"{argv[0]} did not answer within {COMMAND_TIMEOUT_SECONDS} s")
    except OSError as error:
        return CommandResult(126, "", f"{argv[0]} could not be started: {error}")
    return CommandResult(completed.returncode, completed.stdout, completed.stderr)


@dataclass(frozen=True)
class Sources:
    """Where the check looks; the defaults are the real host."""

    runner: Runner = run_command
    root: Path = Path("/")
    nvidia_smi: str = "nvidia-smi"
    nvidia_ctk: str = "nvidia-ctk"
    containerd: str = "containerd"
    containerd_config: str = "/etc/containerd/config.toml"
    cdi_dirs: tuple[str, ...] | None = None
    """None: the directories containerd is configured with, else /etc/cdi and /var/run/cdi."""
    hostname: Callable[[], str] = socket.gethostname
    nvidia_driver_root: str = "/"
    """The DRA chart's nvidiaDriverRoot: where the DRA driver looks for the driver's libraries and nvidia-smi."""

    def host_path(self, path: str) -> Path:
        """Map an absolute host path under the root."""
        return self.root / PurePosixPath(path).relative_to("/")


@dataclass(frozen=True)
class GpuFacts:
    """The GPUs, or why they could not be read."""

    gpus: tuple[parse.Gpu, ...]
    fields: tuple[str, ...]
    error: str | None = None


@dataclass(frozen=True)
class CdiDir:
    """One CDI spec directory and the device names its specs declare."""

    path: str
    exists: bool
    files: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostFacts:
    """Everything the checks decide on."""

    hostname: str
    gpu: GpuFacts
    toolkit_version: str | None
    toolkit_error: str | None
    containerd: containerd.ContainerdFacts
    cdi_dirs: tuple[CdiDir, ...] = field(default=())
    consumers: consumers.ConsumerFacts | None = None
    """The files the handler and the DRA driver open, found where they look (None when not read)."""
    device_nodes: devnodes.DeviceNodes | None = None
    """The GPUs' /dev nodes and what creates them at boot (None when not read)."""


def not_found(executable: str) -> str:
    """Say where an executable was looked for."""
    return f"no {executable} on PATH" if "/" not in executable else f"no executable at {executable}"


def first_line(result: CommandResult) -> str:
    """Return the first non-empty line of what a failed command said."""
    for line in (result.stderr + "\n" + result.stdout).splitlines():
        if line.strip():
            return line.strip()
    return "(no output)"


def read_gpus(sources: Sources) -> GpuFacts:
    """Query nvidia-smi; fall back to the GPU integration guide's fields when an older nvidia-smi rejects a field."""
    fields = parse.QUERY_FIELDS
    result = sources.runner(parse.query_argv(sources.nvidia_smi, fields))
    if result is not None and result.returncode != 0 and "not a valid field" in result.stdout + result.stderr:
        fields = parse.SEED_FIELDS
        result = sources.runner(parse.query_argv(sources.nvidia_smi, fields))
    if result is None:
        return GpuFacts((), fields, not_found(sources.nvidia_smi))
    if result.returncode != 0:
        message = f"nvidia-smi exited with status {result.returncode}: {first_line(result)}"
        return GpuFacts((), fields, message)
    try:
        gpus = parse.parse_gpu_csv(result.stdout, fields)
    except parse.ParseError as error:
        return GpuFacts((), fields, str(error))
    if not gpus:
        return GpuFacts((), fields, "nvidia-smi listed no GPUs")
    return GpuFacts(tuple(gpus), fields)


def read_toolkit(sources: Sources) -> tuple[str | None, str | None]:
    """Return (toolkit version, why it is unknown)."""
    result = sources.runner([sources.nvidia_ctk, "--version"])
    if result is None:
        return None, not_found(sources.nvidia_ctk)
    version = parse.find_tool_version(result.stdout + "\n" + result.stderr)
    if result.returncode != 0 or version is None:
        return None, f"nvidia-ctk --version exited with status {result.returncode}: {first_line(result)}"
    return version, None


def _read_text(path: Path, host_path: str, errors: list[str]) -> str | None:
    """Return the file's text; None when it is absent; a permission problem is recorded as an error."""
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except PermissionError:
        errors.append(f"{host_path} is not readable by this user; run the check as root")
        return None


def read_containerd(sources: Sources) -> containerd.ContainerdFacts:
    """Read config.toml, the drop-ins it imports, and the containerd version."""
    version_result = sources.runner([sources.containerd, "--version"])
    version = None
    if version_result is not None and version_result.returncode == 0:
        version = parse.find_tool_version(version_result.stdout)
    main_path = sources.containerd_config
    read_errors: list[str] = []
    main = containerd.ConfigFile(main_path, _read_text(sources.host_path(main_path), main_path, read_errors))
    imported: list[containerd.ConfigFile] = []
    patterns: list[str] = []
    if main.text is not None:
        try:
            patterns = containerd.import_patterns(tomllib.loads(main.text), main_path)
        except tomllib.TOMLDecodeError:
            patterns = []
    imported_paths: set[str] = set()
    for pattern in patterns:
        relative = str(PurePosixPath(pattern).relative_to("/"))
        for match in sorted(sources.root.glob(relative)):
            host = "/" + match.relative_to(sources.root).as_posix()
            if host not in imported_paths and match.is_file():
                imported_paths.add(host)
                imported.append(containerd.ConfigFile(host, _read_text(match, host, read_errors)))
    unimported = []
    for directory in CONFIG_DIRS_FOR_DROPINS:
        local = sources.host_path(directory)
        if local.is_dir():
            unimported += [
                f"{directory}/{entry.name}"
                for entry in sorted(local.glob("*.toml"))
                if f"{directory}/{entry.name}" not in imported_paths
            ]
    return containerd.analyse(main, imported, unimported, version, read_errors)


def read_cdi_dirs(sources: Sources, configured: tuple[str, ...]) -> tuple[CdiDir, ...]:
    """List the CDI spec files and the devices they declare."""
    found = []
    for directory in sources.cdi_dirs or configured:
        local = sources.host_path(directory)
        if not local.is_dir():
            found.append(CdiDir(directory, exists=False))
            continue
        files: list[str] = []
        devices: list[str] = []
        errors: list[str] = []
        for spec in sorted(local.iterdir()):
            if spec.suffix not in {".yaml", ".yml", ".json"} or not spec.is_file():
                continue
            files.append(spec.name)
            text = _read_text(spec, f"{directory}/{spec.name}", errors)
            if text is None:
                continue
            try:
                devices += parse.cdi_devices(text, spec.name)
            except parse.ParseError as error:
                errors.append(f"{directory}/{error}")
        found.append(CdiDir(directory, True, tuple(files), tuple(devices), tuple(errors)))
    return tuple(found)


def collect(sources: Sources) -> HostFacts:
    """Read everything the checks need from the host."""
    gpu = read_gpus(sources)
    toolkit_version, toolkit_error = read_toolkit(sources)
    runtime = read_containerd(sources)
    return HostFacts(
        hostname=sources.hostname(),
        gpu=gpu,
        toolkit_version=toolkit_version,
        toolkit_error=toolkit_error,
        containerd=runtime,
        cdi_dirs=read_cdi_dirs(sources, runtime.cdi_spec_dirs),
        consumers=consumers.read(sources.host_path, sources.nvidia_driver_root, runtime.runtime_binary),
        device_nodes=devnodes.read(sources.root, len(gpu.gpus)),
    )
