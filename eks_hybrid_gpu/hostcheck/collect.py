"""Reads the host: runs nvidia-smi, nvidia-ctk and containerd, and reads containerd and CDI files.

Every command goes through a Runner and every path is joined under a root, so tests feed captured
output and a fixture tree, and a privileged Pod can inspect a host mounted at /host.
"""

import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Set, Tuple

from eks_hybrid_gpu.hostcheck import consumers, containerd, devnodes, hostfs, parse, tomlread

if TYPE_CHECKING:
    from typing import Final

COMMAND_TIMEOUT_SECONDS: "Final" = 60
CONFIG_DIRS_FOR_DROPINS: "Final" = ("/etc/containerd/conf.d", "/etc/containerd/config.d")
MAX_CONFIG_FILES: "Final" = 256
"""Config files read through `imports` at most (containerd follows imports of imports; a cycle is read once)."""


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and returned; `error` says why its output could not be read as text."""

    returncode: int
    stdout: str
    stderr: str
    error: Optional[str] = None


Runner = Callable[[Sequence[str]], Optional[CommandResult]]
"""Runs argv; returns None when the executable does not exist."""


def run_command(argv: Sequence[str]) -> Optional[CommandResult]:
    """Run a host command with a timeout; None when it is not installed. Output that is not UTF-8 is named."""
    executable = shutil.which(argv[0])
    if executable is None:
        return None
    try:
        completed = subprocess.run(  # noqa: S603, UP022 - fixed argv, no shell; capture_output is 3.7+
            [executable, *argv[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            timeout=COMMAND_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return CommandResult(124, "", f"{argv[0]} did not answer within {COMMAND_TIMEOUT_SECONDS} s")
    except OSError as error:
        return CommandResult(126, "", f"{argv[0]} could not be started: {error.strerror or error}")
    problem = hostfs.undecodable(completed.stdout, f"the output of {argv[0]}")
    return CommandResult(
        completed.returncode,
        completed.stdout.decode("utf-8", errors="replace"),
        completed.stderr.decode("utf-8", errors="replace"),
        problem,
    )


@dataclass(frozen=True)
class Sources:
    """Where the check looks; the defaults are the real host."""

    runner: Runner = run_command
    root: Path = Path("/")
    """Where the host's / is (`--root /host` in a Pod): every host file is read inside it (hostfs)."""
    nvidia_smi: str = "nvidia-smi"
    nvidia_ctk: str = "nvidia-ctk"
    containerd: str = "containerd"
    containerd_config: str = "/etc/containerd/config.toml"
    cdi_dirs: Optional[Tuple[str, ...]] = None
    """None: the directories containerd is configured with, else /etc/cdi and /var/run/cdi."""
    hostname: Callable[[], str] = socket.gethostname
    nvidia_driver_root: str = "/"
    """The DRA chart's nvidiaDriverRoot: where the DRA driver looks for the driver's libraries and nvidia-smi."""

    @property
    def tree(self) -> hostfs.HostTree:
        """The host's files, read inside the root."""
        return hostfs.HostTree(self.root)


@dataclass(frozen=True)
class GpuFacts:
    """The GPUs, or why they could not be read."""

    gpus: Tuple[parse.Gpu, ...]
    fields: Tuple[str, ...]
    error: Optional[str] = None


@dataclass(frozen=True)
class CdiDir:
    """One CDI spec directory and the device names its specs declare."""

    path: str
    exists: bool
    files: Tuple[str, ...] = ()
    devices: Tuple[str, ...] = ()
    errors: Tuple[str, ...] = ()


@dataclass(frozen=True)
class HostFacts:
    """Everything the checks decide on."""

    hostname: str
    gpu: GpuFacts
    toolkit_version: Optional[str]
    toolkit_error: Optional[str]
    containerd: containerd.ContainerdFacts
    cdi_dirs: Tuple[CdiDir, ...] = field(default=())
    consumers: "Optional[consumers.ConsumerFacts]" = None
    """The files the handler and the DRA driver open, found where they look (None when not read)."""
    device_nodes: Optional[devnodes.DeviceNodes] = None
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
    if result.error is not None:
        return GpuFacts((), fields, result.error)
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


def read_toolkit(sources: Sources) -> Tuple[Optional[str], Optional[str]]:
    """Return (toolkit version, why it is unknown)."""
    result = sources.runner([sources.nvidia_ctk, "--version"])
    if result is None:
        return None, not_found(sources.nvidia_ctk)
    if result.error is not None:
        return None, result.error
    version = parse.find_tool_version(result.stdout + "\n" + result.stderr)
    if result.returncode != 0 or version is None:
        return None, f"nvidia-ctk --version exited with status {result.returncode}: {first_line(result)}"
    return version, None


def _read_text(tree: hostfs.HostTree, host_path: str, errors: List[str]) -> Optional[str]:
    """The file's text; None when it is absent or unreadable (then the reason, naming the file, is in `errors`)."""
    try:
        return tree.read_text(host_path)
    except hostfs.Unreadable as problem:
        errors.append(str(problem))
        return None


def read_containerd(sources: Sources) -> containerd.ContainerdFacts:
    """Read config.toml and the files it imports (and they import), as containerd does, and the version.

    A missing config.toml means built-in defaults, as in containerd; a config.toml that is a directory, an import
    without `*` that does not exist, or any file that cannot be read stops containerd, so each is an error.
    """
    version_result = sources.runner([sources.containerd, "--version"])
    version = None
    if version_result is not None and version_result.returncode == 0 and version_result.error is None:
        version = parse.find_tool_version(version_result.stdout)
    tree = sources.tree
    main_path = sources.containerd_config
    read_errors: List[str] = []
    main = containerd.ConfigFile(main_path, _read_text(tree, main_path, read_errors))
    imported: List[containerd.ConfigFile] = []
    loaded: Set[str] = {main_path}
    pending = [(main_path, main.text)]
    while pending and len(loaded) < MAX_CONFIG_FILES:
        parent, text = pending.pop(0)
        for path in _imports(tree, parent, text, read_errors):
            if path in loaded or len(loaded) >= MAX_CONFIG_FILES:
                continue
            loaded.add(path)
            dropin = containerd.ConfigFile(path, _read_text(tree, path, read_errors))
            if dropin.text is None and not any(error.startswith(path + " ") for error in read_errors):
                read_errors.append(
                    f"{path} is imported by {parent} but does not exist; containerd will not start: create it or "
                    "remove it from imports"
                )
            imported.append(dropin)
            pending.append((path, dropin.text))
    unimported = [
        f"{directory}/{name}"
        for directory in CONFIG_DIRS_FOR_DROPINS
        for name in tree.names(directory, "*.toml")
        if f"{directory}/{name}" not in loaded
    ]
    return containerd.analyse(main, imported, unimported, version, read_errors)


def _imports(tree: hostfs.HostTree, parent: str, text: Optional[str], errors: List[str]) -> List[str]:
    """The files one config imports: a pattern with `*` globbed, any other path as is (containerd resolveImports)."""
    if text is None:
        return []
    try:
        config = tomlread.loads(text)
    except tomlread.TomlError:
        return []  # analyse reports the file
    paths: List[str] = []
    for pattern in containerd.import_patterns(config, parent):
        paths += tree.glob(pattern) if "*" in pattern else [pattern]
    return paths


def read_cdi_dirs(sources: Sources, configured: Tuple[str, ...]) -> Tuple[CdiDir, ...]:
    """List the CDI spec files and the devices they declare."""
    found = []
    tree = sources.tree
    for directory in sources.cdi_dirs or configured:
        if not tree.is_dir(directory):
            found.append(CdiDir(directory, exists=False))
            continue
        files: List[str] = []
        devices: List[str] = []
        errors: List[str] = []
        for name in tree.names(directory):
            if PurePosixPath(name).suffix not in {".yaml", ".yml", ".json"}:
                continue
            files.append(name)
            text = _read_text(tree, f"{directory}/{name}", errors)
            if text is None:
                continue
            try:
                devices += parse.cdi_devices(text, name)
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
        consumers=consumers.read(sources.tree, sources.nvidia_driver_root, runtime.runtime_binary),
        device_nodes=devnodes.read(sources.tree, len(gpu.gpus)),
    )
