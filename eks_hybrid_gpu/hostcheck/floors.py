"""Compatibility floors per allocation owner, and the checks that compare a host with them.

The floors come from the reviewed guide (DRA driver 0.5.0 prerequisites, GPU Operator 26.7 DRA workflow,
device plugin 0.20.0) and are kept with each owner kind's modes in the registry
(policy/gpu_allocation/vocab/owners.py, standard library only like this check). They are compatibility floors,
not current patch or branch recommendations: choose the actual driver and toolkit from NVIDIA's support matrix
for the GPU, OS and kernel.
"""

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from eks_hybrid_gpu.hostcheck import parse
from eks_hybrid_gpu.hostcheck.collect import HostFacts
from policy.gpu_allocation.vocab.labels import OWNERS as KIND_ORDER
from policy.gpu_allocation.vocab.owners import HostFloor, Mode, hostcheck_modes, hostcheck_owners

if TYPE_CHECKING:
    from typing import Final

Owner = str
"""A host check `--owner` value: one mode of an owner kind (a key of MODES)."""
if sys.version_info >= (3, 8):
    from typing import Literal

    MigExpectation = Literal["disabled", "enabled"]
else:  # typing.Literal is 3.8+; the host check's artifact runs on 3.6 and 3.7
    MigExpectation = str
if sys.version_info >= (3, 8):
    Status = Literal["pass", "fail", "warn", "info"]
else:  # typing.Literal is 3.8+; the host check's artifact runs on 3.6 and 3.7
    Status = str

FLOORS_NOTE: "Final" = "These are compatibility floors, not recommendations."

Floor = HostFloor
"""What one mode needs on the host before it can work: the registry's `HostFloor`."""

MODES: "Final[Dict[Owner, Mode]]" = hostcheck_modes()
"""The host check's `--owner` values -> the registry's modes (policy/gpu_allocation/vocab/owners.py)."""
FLOORS: "Final[Dict[Owner, Floor]]" = {key: mode.host for key, mode in MODES.items()}
COHORT_VALUES: "Final[Dict[Owner, str]]" = dict(hostcheck_owners())
"""Default cohort label value per `--owner`: its owner kind, so the Operator's two modes share one value."""
OWNERS: "Final[Tuple[Owner, ...]]" = tuple(
    sorted(MODES, key=lambda key: (KIND_ORDER.index(hostcheck_owners()[key]), MODES[key].mechanism != "dra"))
)
"""The `--owner` choices: per owner kind in the vocabulary's order, a kind's DRA mode before its other one."""


@dataclass(frozen=True)
class Check:
    """One verdict: what was found, and what to install or change when it is not enough."""

    name: str
    status: Status
    detail: str
    fix: Optional[str] = None


def cannot_inspect(facts: HostFacts, owner: Owner) -> Optional[str]:
    """Return the reason the GPUs could not be read, with what to install, or None."""
    if facts.gpu.error is None:
        return None
    message = (
        f"cannot inspect the GPUs: {facts.gpu.error.rstrip('.')}. Being on premises does not imply that a driver "
        "exists: install the NVIDIA data-center driver approved for this GPU, OS and kernel (it provides "
        "nvidia-smi), load it (check `lsmod | grep nvidia` and `dmesg`), then re-run this check."
    )
    if MODES[owner].key == "cluster-policy":
        message += " If the GPU Operator is to install the driver (driver.enabled=true), run it after that."
    return message


def driver_check(facts: HostFacts, owner: Owner) -> Check:
    """Compare the driver branch with the owner's floor."""
    floor = FLOORS[owner]
    versions = sorted({gpu.driver_version for gpu in facts.gpu.gpus})
    version = versions[0]
    if floor.driver_major is None:
        return Check("driver", "pass", f"driver {version} present ({floor.title} names no driver floor)")
    if parse.driver_major(version) < floor.driver_major:
        return Check(
            "driver",
            "fail",
            f"driver {version} is below the {floor.driver_major} floor for {floor.title}",
            f"install an NVIDIA driver of branch {floor.driver_major} or newer that NVIDIA's matrix "
            "supports for this GPU, OS and kernel, then reboot",
        )
    return Check("driver", "pass", f"driver {version} meets the {floor.driver_major} floor for {floor.title}")


def toolkit_check(facts: HostFacts, owner: Owner) -> Check:
    """Compare the NVIDIA Container Toolkit with the owner's floor."""
    floor = FLOORS[owner]
    wanted = f"{floor.toolkit[0]}.{floor.toolkit[1]}" if floor.toolkit else None
    install = "install nvidia-container-toolkit" + (f" {wanted} or newer" if wanted else "")
    install += " from NVIDIA's repository (it provides nvidia-ctk and nvidia-container-runtime)"
    if facts.toolkit_version is None:
        if not floor.toolkit_required:
            return Check(
                "toolkit",
                "warn",
                f"NVIDIA Container Toolkit not found: {facts.toolkit_error}; {floor.title} must then manage it",
                "keep the Operator's toolkit component enabled (toolkit.enabled=true), or " + install,
            )
        return Check(
            "toolkit",
            "fail",
            f"NVIDIA Container Toolkit not found: {facts.toolkit_error}; {floor.title} needs it",
            install,
        )
    if floor.toolkit is not None and parse.version_tuple(facts.toolkit_version)[:2] < floor.toolkit:
        return Check(
            "toolkit",
            "fail",
            f"NVIDIA Container Toolkit {facts.toolkit_version} is below the {wanted} floor for {floor.title}",
            f"upgrade nvidia-container-toolkit to {wanted} or newer",
        )
    suffix = f"meets the {wanted} floor" if wanted else "is installed"
    return Check("toolkit", "pass", f"NVIDIA Container Toolkit {facts.toolkit_version} {suffix}")


def containerd_check(facts: HostFacts) -> Check:
    """Every owner runs on containerd, which Node Bootstrap (nodeadm) installs on a Hybrid Node."""
    runtime = facts.containerd
    if runtime.containerd_version is None and not runtime.config_found:
        return Check(
            "containerd",
            "fail",
            f"containerd not found: no containerd on PATH and no {runtime.config_path}; the host has not "
            "completed Node Bootstrap",
            "complete Node Bootstrap first (`nodeadm install` installs containerd for EKS Hybrid Nodes, then "
            "`nodeadm init` joins the node), then re-run this check",
        )
    version = runtime.containerd_version or "version unknown (binary not on PATH)"
    config = ", ".join(runtime.files_read) if runtime.files_read else f"no {runtime.config_path}, built-in defaults"
    return Check("containerd", "pass", f"containerd {version}; config: {config}")


def containerd_config_check(facts: HostFacts) -> Optional[Check]:
    """Fail on a containerd config that does not parse: containerd would not start with it."""
    if not facts.containerd.errors:
        return None
    return Check(
        "containerd-config",
        "fail",
        "; ".join(facts.containerd.errors),
        "make each file valid TOML that this user can read (`containerd config dump` shows what containerd "
        "reads), restart containerd and re-run this check",
    )


def runtime_handler_check(facts: HostFacts, owner: Owner) -> Check:
    """Look for containerd's `nvidia` runtime handler, which the RuntimeClass nvidia points at."""
    floor = FLOORS[owner]
    runtime = facts.containerd
    if runtime.runtime_handler:
        binary = f" ({runtime.runtime_binary})" if runtime.runtime_binary else ""
        return Check("runtime-handler", "pass", f"containerd defines the nvidia runtime handler{binary}")
    where = ", ".join(runtime.files_read) if runtime.files_read else "no containerd config was found"
    detail = f"containerd has no nvidia runtime handler ({where})"
    if runtime.unimported_dropins:
        detail += f"; drop-ins present but not imported: {', '.join(runtime.unimported_dropins)}"
    fix = (
        "run `sudo nvidia-ctk runtime configure --runtime=containerd` and restart containerd; the "
        "RuntimeClass named nvidia must use handler nvidia (the class name alone does not configure it)"
    )
    if floor.runtime_handler_required:
        return Check("runtime-handler", "fail", detail + f"; {floor.title} needs it", fix)
    return Check("runtime-handler", "info", f"{detail}; {floor.without_handler}")


def cdi_check(facts: HostFacts, owner: Owner) -> Check:
    """Decide whether containerd resolves CDI devices, which DRA needs."""
    floor = FLOORS[owner]
    runtime = facts.containerd
    if runtime.cdi_enabled:
        return Check("cdi-runtime", "pass", f"CDI is enabled in containerd ({runtime.cdi_source})")
    if not runtime.config_found and runtime.containerd_version is None:
        detail = f"CDI is not enabled: neither containerd nor {runtime.config_path} was found"
    else:
        state = "disabled" if runtime.cdi_enabled is False else "not known to be enabled"
        detail = f"CDI is {state} ({runtime.cdi_source})"
    fix = (
        "install containerd 2.x (CDI on by default) or set enable_cdi = true in the CRI plugin table, e.g. "
        "`sudo nvidia-ctk runtime configure --runtime=containerd --cdi.enabled`, then restart containerd"
    )
    if floor.cdi_required:
        return Check("cdi-runtime", "fail", detail + f"; {floor.title} needs a CDI-enabled runtime", fix)
    return Check("cdi-runtime", "info", detail + f"; {floor.title} does not need CDI")


def cdi_specs_check(facts: HostFacts, owner: Owner) -> Check:
    """Report CDI specs; informational, since the DRA driver writes its own per-claim specs."""
    devices = [device for cdi in facts.cdi_dirs for device in cdi.devices]
    errors = [error for cdi in facts.cdi_dirs for error in cdi.errors]
    present = [cdi.path for cdi in facts.cdi_dirs if cdi.exists]
    if errors:
        return Check(
            "cdi-specs",
            "fail",
            f"unreadable CDI spec: {'; '.join(errors)}",
            "regenerate it (`sudo nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`) or remove it",
        )
    if devices:
        shown = ", ".join(devices[:6]) + (f" and {len(devices) - 6} more" if len(devices) > 6 else "")
        return Check("cdi-specs", "info", f"CDI devices declared: {shown}")
    where = ", ".join(present) if present else "no CDI spec directory exists"
    note = (
        "the DRA driver writes per-claim specs under /var/run/cdi when it prepares a claim"
        if FLOORS[owner].cdi_required
        else "this owner does not use CDI specs"
    )
    return Check("cdi-specs", "info", f"no CDI device specs ({where}); {note}")


def mig_checks(facts: HostFacts, expectation: MigExpectation) -> List[Check]:
    """Compare each GPU's MIG mode with what the cohort allocates."""
    checks: List[Check] = []
    if "mig.mode.current" not in facts.gpu.fields:
        return [Check("mig", "warn", "MIG mode not read: this nvidia-smi rejected the MIG query fields")]
    for gpu in facts.gpu.gpus:
        label = f"GPU {gpu.index} ({gpu.uuid})"
        if gpu.mig_mode is not None and gpu.mig_mode_pending not in (None, gpu.mig_mode):
            checks.append(
                Check(
                    "mig",
                    "fail",
                    f"{label} has a MIG mode change pending ({gpu.mig_mode} -> {gpu.mig_mode_pending})",
                    f"reset the GPU (`sudo nvidia-smi -i {gpu.index} -r`) or reboot to apply it",
                )
            )
        elif expectation == "disabled" and gpu.mig_mode == "Enabled":
            checks.append(
                Check(
                    "mig",
                    "fail",
                    f"{label} has MIG mode Enabled but the cohort allocates full GPUs",
                    f"disable MIG (`sudo nvidia-smi -i {gpu.index} -mig 0`, then reset the GPU) or run the "
                    "check with --mig enabled for a MIG cohort",
                )
            )
        elif expectation == "enabled" and gpu.mig_mode != "Enabled":
            mode = gpu.mig_mode or "not supported"
            checks.append(
                Check(
                    "mig",
                    "fail",
                    f"{label} has MIG mode {mode} but the cohort expects MIG",
                    f"enable MIG (`sudo nvidia-smi -i {gpu.index} -mig 1`, then reset the GPU) on a "
                    "MIG-capable GPU, or run the check with --mig disabled",
                )
            )
    if not checks:
        modes = sorted({gpu.mig_mode or "not supported" for gpu in facts.gpu.gpus})
        checks.append(Check("mig", "pass", f"MIG mode {'/'.join(modes)} matches --mig {expectation}"))
    return checks


def model_check(facts: HostFacts) -> Check:
    """Warn about mixed models, which one set of product labels cannot describe."""
    models = sorted({gpu.model for gpu in facts.gpu.gpus})
    if len(models) > 1:
        return Check(
            "models",
            "warn",
            f"GPU models differ on this host: {', '.join(models)}; the product label names only GPU 0",
            "put hosts with one GPU model in a cohort, or select devices by DRA attributes instead",
        )
    return Check("models", "pass", f"{len(facts.gpu.gpus)} x {models[0]}")


def evaluate(facts: HostFacts, owner: Owner, mig: MigExpectation) -> List[Check]:
    """Run every check for an inspectable host."""
    config = containerd_config_check(facts)
    return [
        driver_check(facts, owner),
        containerd_check(facts),
        *([config] if config else []),
        toolkit_check(facts, owner),
        runtime_handler_check(facts, owner),
        cdi_check(facts, owner),
        cdi_specs_check(facts, owner),
        *mig_checks(facts, mig),
        model_check(facts),
    ]
