"""Where the host's consumers look for their files: containerd for a handler's binary, the DRA driver for NVML.

A config that names a file is only as good as the file: containerd's runc shim executes the `nvidia` handler's
`BinaryName` when a pod with `runtimeClassName: nvidia` starts, and the DRA kubelet plugin stops at start-up
("failed to locate driver libraries: error locating libnvidia-ml.so.1") when the driver's libraries are not
where it searches. Both searches are copied from their source, not guessed:

- the DRA driver (`cmd/gpu-kubelet-plugin/root.go` at v0.4.1, `getDriverLibraryPath`/`getNvidiaSMIPath`) joins
  the chart's `nvidiaDriverRoot` with a fixed list of folders; no ld.so.cache, no LD_LIBRARY_PATH;
- containerd's runc shim runs an absolute `BinaryName` as is and a bare name through containerd's PATH.
"""

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, List, Optional, Tuple

from eks_hybrid_gpu.hostcheck.hostfs import HostTree, Unreadable

if TYPE_CHECKING:
    from typing import Final

NVML: "Final" = "libnvidia-ml.so.1"
NVIDIA_SMI: "Final" = "nvidia-smi"
LIBRARY_SEARCH: "Final" = (
    "/",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
)
"""Folders under the driver root where the DRA driver looks for libnvidia-ml.so.1, in its order (root.go)."""
SMI_SEARCH: "Final" = ("/", "/opt/bin", "/usr/bin", "/usr/sbin", "/bin", "/sbin")
"""Folders under the driver root where it looks for nvidia-smi (root.go)."""
LIBRARY_ELSEWHERE: "Final" = (
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/nvidia",
    "/usr/local/lib",
    "/opt/nvidia/lib64",
)
"""Where hosts keep driver libraries outside the driver's search (the lent H200: /usr/local/nvidia/lib64), beside
the folders ld.so.conf names."""
SMI_ELSEWHERE: "Final" = ("/usr/local/nvidia/bin", "/usr/local/bin", "/opt/nvidia/bin")
CONTAINERD_PATH: "Final" = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""The PATH of containerd's systemd unit, through which the shim finds a bare BinaryName."""


@dataclass(frozen=True)
class Located:
    """One file a consumer needs: where the consumer finds it, where it looked, where else the host has it."""

    name: str
    found: Optional[str]
    searched: Tuple[str, ...]
    elsewhere: Tuple[str, ...] = ()
    executable: bool = True


@dataclass(frozen=True)
class ConsumerFacts:
    """The files the allocators' consumers open, found as they find them."""

    driver_root: str
    nvml: Located
    nvidia_smi: Located
    handler_binary: Optional[Located]
    """None when containerd has no nvidia handler or it names no BinaryName."""


def join_root(root: str, folder: str, name: str = "") -> str:
    """`folder/name` under the driver root, as the DRA driver joins them (filepath.Join)."""
    return str(PurePosixPath(root) / PurePosixPath(folder).relative_to("/") / name)


def _ld_conf_dirs(tree: HostTree) -> List[str]:
    """The folders /etc/ld.so.conf and its includes name (ldconfig's search, which the DRA driver does not use)."""
    folders: List[str] = []
    files = ["/etc/ld.so.conf", *("/etc/ld.so.conf.d/" + name for name in tree.names("/etc/ld.so.conf.d", "*.conf"))]
    for file in files:
        try:
            text = tree.read_text(file)
        except Unreadable:
            continue  # ldconfig's folders only suggest where else the host keeps a file
        lines = (text or "").splitlines()
        folders += [line.strip() for line in lines if line.strip().startswith("/")]
    return folders


def find_in_root(tree: HostTree, root: str, name: str, search: Tuple[str, ...], elsewhere: List[str]) -> Located:
    """Find `name` as the DRA driver does under `root`; list other folders of the host that hold it."""
    searched = tuple(join_root(root, folder, name) for folder in search)
    found = next((path for path in searched if tree.is_file(path)), None)
    others = tuple(
        dict.fromkeys(
            f"{folder.rstrip('/')}/{name}"
            for folder in elsewhere
            if f"{folder.rstrip('/')}/{name}" not in searched and tree.is_file(f"{folder.rstrip('/')}/{name}")
        )
    )
    return Located(name, found, searched, () if found else others)


def find_handler_binary(tree: HostTree, binary: Optional[str]) -> Optional[Located]:
    """Find the nvidia handler's BinaryName as the runc shim does: as is when absolute, else on containerd's PATH."""
    if not binary:
        return None
    if binary.startswith("/"):
        candidates: Tuple[str, ...] = (binary,)
    else:
        candidates = tuple(f"{folder}/{binary}" for folder in CONTAINERD_PATH)
    found = next((path for path in candidates if tree.is_file(path)), None)
    executable = found is not None and tree.is_executable(found)
    return Located(binary, found, candidates, executable=executable)


def read(tree: HostTree, driver_root: str, handler_binary: Optional[str]) -> ConsumerFacts:
    """Look for each file where its consumer will, inside the check's root."""
    ld_dirs = _ld_conf_dirs(tree)
    return ConsumerFacts(
        driver_root=driver_root,
        nvml=find_in_root(tree, driver_root, NVML, LIBRARY_SEARCH, [*LIBRARY_ELSEWHERE, *ld_dirs]),
        nvidia_smi=find_in_root(tree, driver_root, NVIDIA_SMI, SMI_SEARCH, list(SMI_ELSEWHERE)),
        handler_binary=find_handler_binary(tree, handler_binary),
    )
