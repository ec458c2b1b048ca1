"""Whether containerd resolves CDI devices, judged by what that containerd version reads.

From containerd's own source (github.com/containerd/containerd, tags v1.7.34, v2.0.11, v2.1.9, v2.2.7, v2.3.4
and its RELEASES.md "Deprecated config properties"):

- **1.x (1.7)** reads `enable_cdi` in `plugins."io.containerd.grpc.v1.cri"` (config version 2; a version 1
  `plugins.cri` is migrated to it); unset means off (`pkg/cri/config/config_unix.go`: `EnableCDI: false`).
- **2.0 to 2.3** read it in `plugins."io.containerd.cri.v1.runtime"`; an older config's `grpc.v1.cri` keys
  are migrated into that table where it has none (`plugins/cri/runtime/plugin.go` `configMigration`, for a
  config older than `version.ConfigVersion`: 3 up to 2.2, 4 from 2.3); unset means on
  (`internal/cri/config/config_unix.go`: `EnableCDI: true`); `false` turns CDI off (2.3 also logs the
  `enable-cdi` deprecation).
- **2.4 and newer** read no `enable_cdi`: RELEASES.md removes it in v2.4 ("CDI support will always be
  enabled"), and containerd 2.4.2 on the lent H200 logged "Ignoring unknown key ... enable_cdi".

So `enable_cdi = false` fails a DRA host on 2.0-2.3 but not on 2.4, and `enable_cdi = true` in a
`cri.v1.runtime` table does nothing for 1.7. Standard library only, like the rest of the host check.
"""

import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

if TYPE_CHECKING:
    from typing import Final

V1_CRI: "Final" = ("plugins", "cri")
V2_CRI: "Final" = ("plugins", "io.containerd.grpc.v1.cri")
V3_RUNTIME: "Final" = ("plugins", "io.containerd.cri.v1.runtime")
DEFAULT_SPEC_DIRS: "Final" = ("/etc/cdi", "/var/run/cdi")
ALWAYS_ON_FROM: "Final" = (2, 4)
"""containerd 2.4 removed `enable_cdi`: CDI is always on."""

_MAJOR_MINOR: "Final" = re.compile(r"v?([0-9]{1,3})\.([0-9]{1,3})")


def major_minor(version: str) -> Optional[Tuple[int, int]]:
    """(major, minor) of a containerd version such as 2.4.2 or v1.7.27; None when it is not one."""
    match = _MAJOR_MINOR.match(version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def dig(table: Dict[str, Any], path: Tuple[str, ...]) -> Any:
    """The value at `path` in nested TOML tables; None where a table or key is missing."""
    node: Any = table
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _where(path: Tuple[str, ...]) -> str:
    return "[" + ".".join(f'"{part}"' if "." in part else part for part in path) + "]"


def _tables_read(release: Tuple[int, int], config_version: Optional[int]) -> Tuple[Tuple[str, ...], ...]:
    """The CRI tables whose keys that containerd applies, the winning table first.

    2.x migrates `grpc.v1.cri` into `cri.v1.runtime` for a config older than its own version: 3 up to 2.2,
    4 from 2.3 (`version.ConfigVersion`).
    """
    if release[0] < 2:
        return (V2_CRI, V1_CRI)
    current = 4 if release >= (2, 3) else 3
    if config_version is not None and config_version >= current:
        return (V3_RUNTIME,)
    return (V3_RUNTIME, V2_CRI, V1_CRI)


def _spec_dirs(merged: Dict[str, Any], tables: Tuple[Tuple[str, ...], ...]) -> Tuple[str, ...]:
    for table in tables:
        configured = dig(merged, (*table, "cdi_spec_dirs"))
        if isinstance(configured, list):
            return tuple(str(d) for d in configured)
    return DEFAULT_SPEC_DIRS


def _ignored_keys(merged: Dict[str, Any], read: Tuple[Tuple[str, ...], ...]) -> List[str]:
    """`enable_cdi` keys in tables this containerd does not apply."""
    return [
        f"enable_cdi in {_where(table)}"
        for table in (V3_RUNTIME, V2_CRI, V1_CRI)
        if table not in read and isinstance(dig(merged, table), dict) and "enable_cdi" in dig(merged, table)
    ]


def decide(
    merged: Dict[str, Any], containerd_version: Optional[str], config_version: Optional[int]
) -> Tuple[Optional[bool], str, Tuple[str, ...]]:
    """(CDI on, why, spec dirs) for this merged config under this containerd version; None when undecidable."""
    release = major_minor(containerd_version) if containerd_version else None
    if release is None:
        return _without_version(merged, config_version)
    read = _tables_read(release, config_version)
    dirs = _spec_dirs(merged, read)
    ignored = _ignored_keys(merged, read)
    note = f"; it does not read {', '.join(ignored)}" if ignored else ""
    if release >= ALWAYS_ON_FROM:
        set_here = [f"enable_cdi in {_where(t)}" for t in read if "enable_cdi" in (dig(merged, t) or {})]
        ignored_all = set_here + ignored
        suffix = f" and ignores {', '.join(ignored_all)}" if ignored_all else ""
        return True, f"containerd {containerd_version} always enables CDI (enable_cdi was removed in 2.4){suffix}", dirs
    for table in read:
        cri = dig(merged, table)
        if isinstance(cri, dict) and "enable_cdi" in cri:
            return bool(cri["enable_cdi"]), f"enable_cdi in {_where(table)}{note}", dirs
    if release[0] >= 2:
        return True, f"containerd {containerd_version} enables CDI by default{note}", dirs
    return False, f"containerd {containerd_version} leaves CDI off unless enable_cdi = true{note}", dirs


def _without_version(
    merged: Dict[str, Any], config_version: Optional[int]
) -> Tuple[Optional[bool], str, Tuple[str, ...]]:
    """No containerd binary answered: judge from the config alone, as the check always has."""
    tables = (V3_RUNTIME, V2_CRI, V1_CRI)
    dirs = _spec_dirs(merged, tables)
    for table in tables:
        cri = dig(merged, table)
        if isinstance(cri, dict) and "enable_cdi" in cri:
            return bool(cri["enable_cdi"]), f"enable_cdi in {_where(table)}", dirs
    if config_version == 3:
        return True, "a version 3 config means containerd 2.x, which enables CDI by default", dirs
    return None, "enable_cdi is not set and the containerd version is unknown", dirs
