"""What containerd's configuration says about the `nvidia` runtime handler and CDI.

containerd has used three config layouts; the CRI plugin's table moved between them:
version 1 `plugins.cri`, version 2 `plugins."io.containerd.grpc.v1.cri"`, version 3 (containerd 2.x)
`plugins."io.containerd.cri.v1.runtime"`. Drop-ins count only when `imports` names them, as in
containerd itself; a drop-in that is not imported is reported, because `nvidia-ctk runtime configure`
writes one and an edited config.toml can lose the import line.
"""

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from eks_hybrid_gpu.hostcheck import cdi_versions, tomlread

if TYPE_CHECKING:
    from typing import Final

CRI_TABLES: "Final[Tuple[Tuple[str, ...], ...]]" = (
    ("plugins", "io.containerd.cri.v1.runtime"),
    ("plugins", "io.containerd.grpc.v1.cri"),
    ("plugins", "cri"),
)
DEFAULT_CDI_SPEC_DIRS: "Final[Tuple[str, ...]]" = ("/etc/cdi", "/var/run/cdi")
RUNTIME_HANDLER: "Final" = "nvidia"


@dataclass(frozen=True)
class ConfigFile:
    """One containerd config file: its host path and text (None when it does not exist)."""

    path: str
    text: Optional[str]


@dataclass(frozen=True)
class ContainerdFacts:
    """The parts of containerd's merged config that decide GPU allocation."""

    config_path: str
    config_found: bool
    files_read: Tuple[str, ...]
    errors: Tuple[str, ...]
    config_version: Optional[int]
    containerd_version: Optional[str]
    runtime_handler: bool
    runtime_binary: Optional[str]
    default_runtime: Optional[str]
    cdi_enabled: Optional[bool]
    """True/False when decided; None when neither the config nor the containerd version decides it."""
    cdi_source: str
    cdi_spec_dirs: Tuple[str, ...]
    unimported_dropins: Tuple[str, ...] = field(default=())


def deep_merge(base: Dict[str, Any], extra: Dict[str, Any]) -> Dict[str, Any]:
    """Merge extra into a copy of base, tables recursively, later scalars winning."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def import_patterns(config: Dict[str, Any], config_path: str) -> List[str]:
    """Return the absolute paths or glob patterns in `imports`, relative ones resolved against the config."""
    patterns = config.get("imports")
    base = PurePosixPath(config_path).parent
    paths = [PurePosixPath(str(raw)) for raw in patterns] if isinstance(patterns, list) else []
    return [str(path) if path.is_absolute() else str(base / path) for path in paths]


def analyse(
    main: ConfigFile,
    dropins: List[ConfigFile],
    unimported: List[str],
    containerd_version: Optional[str],
    read_errors: Optional[List[str]] = None,
) -> ContainerdFacts:
    """Merge the main config with its imported drop-ins and read the handler and CDI settings."""
    errors: List[str] = list(read_errors or [])
    files_read: List[str] = []
    merged: Dict[str, Any] = {}
    for config in [main, *dropins]:
        if config.text is None:
            continue
        try:
            merged = deep_merge(merged, tomlread.loads(config.text))
        except tomlread.TomlError as error:
            errors.append(f"{config.path} is not valid TOML ({error}); containerd will not start with it")
            continue
        files_read.append(config.path)
    raw_version = merged.get("version", 1 if files_read else None)
    config_version = raw_version if isinstance(raw_version, int) else None
    runtime, binary, default_runtime = _runtime_handler(merged)
    cdi_enabled, cdi_source, spec_dirs = cdi_versions.decide(merged, containerd_version, config_version)
    return ContainerdFacts(
        config_path=main.path,
        config_found=main.text is not None,
        files_read=tuple(files_read),
        errors=tuple(errors),
        config_version=config_version,
        containerd_version=containerd_version,
        runtime_handler=runtime,
        runtime_binary=binary,
        default_runtime=default_runtime,
        cdi_enabled=cdi_enabled,
        cdi_source=cdi_source,
        cdi_spec_dirs=spec_dirs,
        unimported_dropins=tuple(unimported),
    )


def _runtime_handler(merged: Dict[str, Any]) -> Tuple[bool, Optional[str], Optional[str]]:
    for table in CRI_TABLES:
        runtimes = cdi_versions.dig(merged, (*table, "containerd", "runtimes"))
        default = cdi_versions.dig(merged, (*table, "containerd", "default_runtime_name"))
        if isinstance(runtimes, dict) and isinstance(runtimes.get(RUNTIME_HANDLER), dict):
            handler = runtimes[RUNTIME_HANDLER]
            binary = cdi_versions.dig(handler, ("options", "BinaryName"))
            return True, str(binary) if binary else None, str(default) if default else None
    return False, None, None
