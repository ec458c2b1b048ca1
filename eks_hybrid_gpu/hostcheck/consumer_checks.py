"""Checks that read the host as its consumers do: handler binary, CDI specs' GPUs, driver root, device nodes.

Each check is placed after the check it completes (`runtime-binary` after `runtime-handler`, `cdi-spec-gpus`
after `cdi-specs`, `driver-root` after `driver`, `device-nodes` after `driver-root`), so the table reads in the
order a pod meets them.
"""

from typing import TYPE_CHECKING, List, Optional, Set

from eks_hybrid_gpu.hostcheck import consumers, devnodes
from eks_hybrid_gpu.hostcheck.collect import HostFacts
from eks_hybrid_gpu.hostcheck.floors import MODES, Check, Owner

if TYPE_CHECKING:
    from typing import Final

GPU_KIND: "Final" = "nvidia.com/gpu"
_REGENERATE: "Final" = "sudo nvidia-ctk cdi generate --output={directory}/nvidia.yaml"


def runtime_binary_check(facts: HostFacts) -> Optional[Check]:
    """Fail a `nvidia` handler whose BinaryName does not exist: every pod of RuntimeClass nvidia fails to start."""
    located = facts.consumers.handler_binary if facts.consumers else None
    if located is None:
        return None
    if located.found is None:
        where = located.searched[0]
        if len(located.searched) > 1:
            where = f"containerd's PATH ({', '.join(located.searched)})"
        return Check(
            "runtime-binary",
            "fail",
            f"the nvidia runtime handler's BinaryName {located.name} does not exist (looked at {where}); containerd "
            "cannot start a pod with runtimeClassName nvidia on this host",
            "install nvidia-container-toolkit (it provides nvidia-container-runtime), or point BinaryName at the "
            "installed binary with `sudo nvidia-ctk runtime configure --runtime=containerd`, then restart containerd",
        )
    if not located.executable:
        return Check(
            "runtime-binary",
            "fail",
            f"the nvidia runtime handler's BinaryName {located.found} is not executable",
            f"`sudo chmod 755 {located.found}` or reinstall nvidia-container-toolkit, then restart containerd",
        )
    return Check("runtime-binary", "pass", f"the nvidia runtime handler's BinaryName {located.found} exists")


def _stale(device: str, uuids: Set[str], count: int) -> bool:
    """A `nvidia.com/gpu` CDI device naming a GPU this host does not have (by UUID, index or index:MIG)."""
    kind, _, name = device.partition("=")
    if kind != GPU_KIND or name == "all" or name.startswith("MIG-"):
        return False
    if name.startswith("GPU-"):
        return name not in uuids
    parent = name.split(":", 1)[0]
    return parent.isdigit() and int(parent) >= count


def cdi_spec_gpus_check(facts: HostFacts) -> Optional[Check]:
    """Warn when a CDI spec names GPUs the host does not have: a spec left from another GPU or host."""
    uuids = {gpu.uuid for gpu in facts.gpu.gpus}
    count = len(facts.gpu.gpus)
    stale = [(cdi.path, device) for cdi in facts.cdi_dirs for device in cdi.devices if _stale(device, uuids, count)]
    named = [device for cdi in facts.cdi_dirs for device in cdi.devices if device.startswith(f"{GPU_KIND}=")]
    if not named:
        return None
    if not stale:
        return Check("cdi-spec-gpus", "pass", f"the {GPU_KIND} CDI devices name only GPUs this host has")
    directories = sorted({path for path, _ in stale})
    shown = ", ".join(device for _, device in stale[:4]) + (f" and {len(stale) - 4} more" if len(stale) > 4 else "")
    host = ", ".join(sorted(uuids)) or "none"
    return Check(
        "cdi-spec-gpus",
        "warn",
        f"CDI specs in {', '.join(directories)} name GPUs this host does not have: {shown} (this host's GPUs: "
        f"{host}); a container asking for them through CDI fails or gets another device",
        "regenerate the spec for this host's GPUs (`"
        + "`, `".join(_REGENERATE.format(directory=d) for d in directories)
        + "`) and remove specs left by other hardware",
    )


def _link_fix(located: consumers.Located, root: str) -> str:
    """How to make the DRA driver find a file the host keeps elsewhere: link it into a folder it searches."""
    source = located.elsewhere[0].rsplit("/", 1)[0]
    if located.name == consumers.NVML:
        target = consumers.join_root(root, "/usr/lib/x86_64-linux-gnu")
        return f"`sudo ln -s {source}/*.so* {target}/; sudo ldconfig` (on arm64 into /usr/lib/aarch64-linux-gnu)"
    return f"`sudo ln -s {source}/{located.name} {consumers.join_root(root, '/usr/bin')}/`"


def driver_root_check(facts: HostFacts, owner: Owner) -> Optional[Check]:
    """For the DRA owners: fail unless the driver finds libnvidia-ml.so.1 and nvidia-smi under nvidiaDriverRoot."""
    found = facts.consumers
    if found is None or MODES[owner].mechanism != "dra":
        return None
    missing = [located for located in (found.nvml, found.nvidia_smi) if located.found is None]
    root = found.driver_root
    if not missing:
        return Check(
            "driver-root",
            "pass",
            f"the DRA driver finds {found.nvml.found} and {found.nvidia_smi.found} under nvidiaDriverRoot {root}",
        )
    details: List[str] = []
    fixes: List[str] = []
    for located in missing:
        folders = ", ".join(path.rsplit("/", 1)[0] or "/" for path in located.searched)
        text = f"{located.name} is not in any folder the DRA driver searches under nvidiaDriverRoot {root} ({folders})"
        if located.elsewhere:
            text += f"; this host keeps it at {', '.join(located.elsewhere)}"
            fixes.append(_link_fix(located, root))
        details.append(text)
    detail = "; ".join(details) + (
        '; the driver stops at start-up ("failed to locate driver libraries" or "failed to locate nvidia-smi") and '
        "publishes no ResourceSlice"
    )
    if fixes:
        fix = (
            "link the driver's files into the folders the DRA driver searches, as on the lent H200: "
            + " and ".join(fixes)
            + ", then re-run this check"
        )
    else:
        fix = (
            "install the NVIDIA driver's user-space libraries and nvidia-smi into the standard folders (the driver "
            "package), or, if the chart's nvidiaDriverRoot is not /, re-run this check with --nvidia-driver-root "
            "set to it"
        )
    return Check("driver-root", "fail", detail, fix)


def device_nodes_check(facts: HostFacts, owner: Owner) -> Optional[Check]:
    """For the DRA owners: fail when a GPU's /dev node is missing, warn when nothing recreates them at boot."""
    nodes = facts.device_nodes
    if nodes is None or MODES[owner].mechanism != "dra":
        return None
    if not nodes.dev_readable:
        return Check(
            "device-nodes",
            "warn",
            "cannot judge the NVIDIA device nodes: the checked root has no /dev folder (a copied tree, or a Pod "
            "without the host's /dev)",
            "run the check on the host itself, or mount the host's / (with /dev) at the root given to --root",
        )
    creators = devnodes.creators_said(nodes)
    boot = devnodes.creator_fix(nodes)
    if nodes.missing:
        return Check(
            "device-nodes",
            "fail",
            f"{', '.join(nodes.missing)} missing (GPU minors from {nodes.minors_from}); the DRA driver writes a "
            "claim's CDI spec from what /dev holds and skips missing nodes, so the first GPU workload fails "
            f"(NVIDIA DRA driver issues #1380, #1458); on this host {creators}",
            f"create them now with {devnodes.create_now(nodes.expected)}, then restart the DRA kubelet plugin's pod "
            f"so it writes its CDI specs again; so they exist after every boot: {boot}",
        )
    if not (nodes.udev_creates or nodes.refresh_creates):
        return Check(
            "device-nodes",
            "warn",
            f"{', '.join(nodes.expected)} present now, but nothing on this host creates them at boot ({creators}): "
            "after a reboot the first DRA workload fails until something runs nvidia-modprobe "
            "(NVIDIA DRA driver issues #1380, #1458)",
            boot,
        )
    return Check("device-nodes", "pass", f"{', '.join(nodes.expected)} present; {creators}")


_AFTER: "Final" = {
    "runtime-binary": "runtime-handler",
    "cdi-spec-gpus": "cdi-specs",
    "driver-root": "driver",
    "device-nodes": "driver-root",
}


def extend(checks: List[Check], facts: HostFacts, owner: Owner) -> List[Check]:
    """The owner's checks with these inserted, each after the check it completes."""
    extra = [
        runtime_binary_check(facts),
        cdi_spec_gpus_check(facts),
        driver_root_check(facts, owner),
        device_nodes_check(facts, owner),
    ]
    result = list(checks)
    for check in extra:
        if check is None:
            continue
        anchor = next((i for i, c in enumerate(result) if c.name == _AFTER[check.name]), len(result) - 1)
        result.insert(anchor + 1, check)
    return result
