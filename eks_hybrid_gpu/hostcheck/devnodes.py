"""The NVIDIA device nodes a DRA workload needs, and what on the host creates them at boot.

The kernel module does not create `/dev/nvidiactl`, `/dev/nvidia<minor>`, `/dev/nvidia-uvm` and
`/dev/nvidia-uvm-tools`: user space does, on a host-installed driver through the driver package's udev rule
(`RUN+="/usr/bin/nvidia-modprobe"`) and the NVIDIA Container Toolkit's `nvidia-cdi-refresh` units (a oneshot
service running `nvidia-ctk cdi generate` at boot, and a path unit re-running it when the driver changes). Where
neither ran, the DRA driver's kubelet plugin writes a claim's CDI spec from a `/dev` without them (a missing node
is only a warning to it), and the first GPU workload on the node fails (kubernetes-sigs/dra-driver-nvidia-gpu
#1380; #1458 reproduced it on a fresh boot with both creators disabled).

Everything is read under the check's root (`--root /host` in a Pod), and symbolic links are followed inside that
root: `/lib` -> `usr/lib` and a unit's `*.wants/` link to `/usr/lib/systemd/system/...` name the host's paths, not
this process's.
"""

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Set, Tuple

from eks_hybrid_gpu.hostcheck.hostfs import HostTree, Unreadable

if TYPE_CHECKING:
    from typing import Final

CONTROL_NODES: "Final" = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
"""The nodes every GPU container needs beside its GPU's own (the nodes #1458 validates before writing a spec)."""
UDEV_DIRS: "Final" = ("/etc/udev/rules.d", "/run/udev/rules.d", "/usr/local/lib/udev/rules.d", "/usr/lib/udev/rules.d")
"""udev's rule folders, highest priority first: a file of the same name in an earlier folder replaces a later one."""
UDEV_LEGACY_DIR: "Final" = "/lib/udev/rules.d"
"""Where hosts without merged /usr keep packaged rules (on merged /usr, /lib is a link to usr/lib)."""
UNIT_DIRS: "Final" = (
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
)
"""systemd's system unit folders, highest priority first."""
REFRESH_SERVICE: "Final" = "nvidia-cdi-refresh.service"
REFRESH_PATH: "Final" = "nvidia-cdi-refresh.path"
REFRESH_UNITS: "Final" = (REFRESH_SERVICE, REFRESH_PATH)
MASK_TARGET: "Final" = "/dev/null"
_MODPROBE_RUN: "Final" = re.compile(r"""RUN\s*\+?=\s*"([^"\s]*nvidia-modprobe)\b""")
_MINOR: "Final" = re.compile(r"^Device Minor:\s*(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class UdevRule:
    """A rule file that runs nvidia-modprobe, as udev sees it after overrides."""

    path: str
    binary: str
    binary_exists: bool
    masked_by: Optional[str] = None
    """The /etc or /run file of the same name that replaces it (a link to /dev/null or another rule), if any."""


@dataclass(frozen=True)
class RefreshUnit:
    """One nvidia-cdi-refresh unit: where it is installed, whether a `*.wants/` link enables it, whether masked."""

    name: str
    path: Optional[str]
    enabled: bool
    masked: bool


@dataclass(frozen=True)
class DeviceNodes:
    """The device nodes a GPU container needs, and the host's creators of them."""

    dev_readable: bool
    """False when the root has no /dev folder (a copied tree, a Pod without the host's /dev): nothing is judged."""
    expected: Tuple[str, ...]
    missing: Tuple[str, ...]
    minors_from: str
    """Where the GPUs' minor numbers came from: /proc/driver/nvidia/gpus, or the GPU count (minors 0..n-1)."""
    udev_rules: Tuple[UdevRule, ...]
    refresh_units: Tuple[RefreshUnit, ...]

    @property
    def udev_creates(self) -> bool:
        """A rule that udev runs (not replaced) and whose nvidia-modprobe is installed."""
        return any(rule.binary_exists and rule.masked_by is None for rule in self.udev_rules)

    @property
    def refresh_creates(self) -> bool:
        """nvidia-cdi-refresh.service installed, enabled and not masked: it runs at every boot."""
        return any(
            unit.name == REFRESH_SERVICE and unit.path and unit.enabled and not unit.masked
            for unit in self.refresh_units
        )


def _text(tree: HostTree, path: str) -> str:
    """A small host file's text, empty when it is absent or not a readable UTF-8 file (nothing here fails on it)."""
    try:
        return tree.read_text(path) or ""
    except Unreadable:
        return ""


def gpu_minors(tree: HostTree, gpu_count: int) -> Tuple[Tuple[int, ...], str]:
    """The GPUs' device minors from the driver's procfs (`Device Minor:`), else 0..count-1."""
    folder = "/proc/driver/nvidia/gpus"
    minors: Set[int] = set()
    for bus in tree.names(folder):
        minors.update(int(m) for m in _MINOR.findall(_text(tree, f"{folder}/{bus}/information")))
    if minors:
        return tuple(sorted(minors)), folder
    return tuple(range(gpu_count)), "the GPU count (no /proc/driver/nvidia/gpus under the root)"


def _rule_files(tree: HostTree) -> Dict[str, str]:
    """Rule name -> the path udev uses for it (the highest-priority folder holding that name)."""
    chosen: Dict[str, str] = {}
    for folder in (*UDEV_DIRS, UDEV_LEGACY_DIR):
        for name in tree.names(folder, "*.rules"):
            chosen.setdefault(name, f"{folder}/{name}")
    return chosen


def _modprobe_binary(tree: HostTree, path: str) -> Optional[str]:
    text = _text(tree, path) if tree.is_file(path) else ""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        found = _MODPROBE_RUN.search(line)
        if found:
            return found.group(1)
    return None


def read_udev(tree: HostTree) -> Tuple[UdevRule, ...]:
    """Every rule file that runs nvidia-modprobe, once per name, with the higher-priority file that replaces it."""
    chosen = _rule_files(tree)
    rules: List[UdevRule] = []
    seen: Set[str] = set()
    for folder in (*UDEV_DIRS, UDEV_LEGACY_DIR):
        for name in tree.names(folder, "*.rules"):
            path = f"{folder}/{name}"
            binary = _modprobe_binary(tree, path)  # a mask (a link to /dev/null) reads as no rule
            if binary is None or name in seen:
                continue
            seen.add(name)
            # Folders are read in udev's order: a winner of another path here is an earlier file not running it.
            winner = chosen[name]
            exists = tree.exists(binary) if binary.startswith("/") else _on_udev_path(tree, binary)
            rules.append(UdevRule(path, binary, exists, None if winner == path else winner))
    return tuple(rules)


def _on_udev_path(tree: HostTree, binary: str) -> bool:
    """A bare RUN program: udev runs it from its own folders (/usr/lib/udev)."""
    return any(tree.exists(f"{folder}/{binary}") for folder in ("/usr/lib/udev", "/lib/udev"))


def read_refresh(tree: HostTree) -> Tuple[RefreshUnit, ...]:
    """The nvidia-cdi-refresh units: installed where, enabled by a `*.wants/` link, masked."""
    units = []
    for name in REFRESH_UNITS:
        masked = any(tree.is_link_to(f"{folder}/{name}", MASK_TARGET) for folder in UNIT_DIRS[:2])
        path = next(
            (
                f"{folder}/{name}"
                for folder in UNIT_DIRS
                if not tree.is_link_to(f"{folder}/{name}", MASK_TARGET) and tree.exists(f"{folder}/{name}")
            ),
            None,
        )
        enabled = any(
            name in tree.names(f"{folder}/{wants}", name) or tree.exists(f"{folder}/{wants}/{name}")
            for folder in UNIT_DIRS
            for wants in tree.names(folder, "*.wants")
        )
        units.append(RefreshUnit(name, path, enabled, masked))
    return tuple(units)


def read(tree: HostTree, gpu_count: int) -> DeviceNodes:
    """The device nodes this host's GPUs need, which of them are missing, and what would create them."""
    minors, minors_from = gpu_minors(tree, gpu_count)
    expected = (*CONTROL_NODES, *(f"/dev/nvidia{minor}" for minor in minors))
    readable = tree.is_dir("/dev")
    missing = tuple(node for node in expected if readable and not tree.exists(node))
    return DeviceNodes(readable, expected, missing, minors_from, read_udev(tree), read_refresh(tree))


def creators_said(nodes: DeviceNodes) -> str:
    """What on this host creates the nodes at boot, in words, naming what is masked, disabled or missing."""
    said: List[str] = []
    rules = [rule for rule in nodes.udev_rules if rule.masked_by is None]
    if any(rule.binary_exists for rule in rules):
        said.append(f"the udev rule {next(r.path for r in rules if r.binary_exists)} runs nvidia-modprobe")
    elif rules:
        said.append(f"the udev rule {rules[0].path} runs {rules[0].binary}, which is not installed")
    elif nodes.udev_rules:
        rule = nodes.udev_rules[0]
        said.append(f"the udev rule {rule.path} is replaced by {rule.masked_by}, which does not run nvidia-modprobe")
    else:
        said.append("no udev rule runs nvidia-modprobe")
    service = next(unit for unit in nodes.refresh_units if unit.name == REFRESH_SERVICE)
    if service.masked:
        said.append(f"{REFRESH_SERVICE} is masked")
    elif service.path is None:
        said.append(f"{REFRESH_SERVICE} is not installed (NVIDIA Container Toolkit 1.18 or newer ships it)")
    elif not service.enabled:
        said.append(f"{REFRESH_SERVICE} is installed ({service.path}) but not enabled")
    else:
        said.append(f"{REFRESH_SERVICE} is enabled")
    return "; ".join(said)


def creator_fix(nodes: DeviceNodes) -> str:
    """How to make the host create the nodes at every boot."""
    units = " ".join(REFRESH_UNITS)
    service = next(unit for unit in nodes.refresh_units if unit.name == REFRESH_SERVICE)
    if service.masked:
        refresh = f"`sudo systemctl unmask {units} && sudo systemctl enable --now {units}`"
    elif service.path is None:
        refresh = (
            f"install NVIDIA Container Toolkit 1.18 or newer (it ships {units}) and `sudo systemctl enable --now "
            f"{units}`"
        )
    else:
        refresh = f"`sudo systemctl enable --now {units}`"
    udev = (
        "or install the driver package's udev rule (60-nvidia.rules: "
        '`ACTION=="add|bind", KERNEL=="nvidia", RUN+="/usr/bin/nvidia-modprobe"`) with nvidia-modprobe'
    )
    return f"{refresh}, {udev}"


def create_now(expected: Sequence[str]) -> str:
    """The command that creates the missing nodes now: nvidia-modprobe, one `-c` per GPU minor, `-u` for UVM."""
    prefix = "/dev/nvidia"
    minors = [node[len(prefix) :] for node in expected if node.startswith(prefix) and node[len(prefix) :].isdigit()]
    return "`sudo nvidia-modprobe -u" + "".join(f" -c {minor}" for minor in minors) + "`"
