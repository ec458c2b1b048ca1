"""What the NVIDIA DRA driver's kubelet plugin publishes on a device: attribute names, their types, capacities.

The authority is the ResourceSlice the real `gpu-kubelet-plugin` v0.4.1 published for an H200
(`../shared/reference/hardware/h200-dra-0.4.1-resourceslice.json`, recorded in
`tests/fixtures/dra/h200-dra-0.4.1-resourceslice.json`), and for the attributes a full GPU on one host cannot
show, the driver's source at v0.4.1: `GpuInfo.Attributes()` in `cmd/gpu-kubelet-plugin/deviceinfo.go` and
`CommonAttributesMig()` in `cmd/gpu-kubelet-plugin/mig.go`. Two things follow from that source that a
selector must know:

- there is no `index`, `minor`, `migEnabled` or `pcieBusID` attribute (device names carry the minor, `gpu-0`);
- the PCI attributes are the standard ones, qualified with `resource.kubernetes.io`, so in CEL they are
  `device.attributes["resource.kubernetes.io"].pciBusID` and `....pcieRoot`, never under `gpu.nvidia.com`.

Versions are published as SemVer (`driverVersion` 580.159.4 for NVML's 580.159.04, `cudaDriverVersion` 13.0.0,
`cudaComputeCapability` 9.0.0). `addressingMode` is published only where NVML reports one ("None" on the H200),
`pcieRoot` only where sysfs resolves it. In CEL a missing attribute is an error and the device is not selected.
"""

from __future__ import annotations

from typing import Final

DRIVER_DOMAIN: Final = "gpu.nvidia.com"
"""The driver's own attribute domain: an unqualified name in the slice is in it."""
STANDARD_DOMAIN: Final = "resource.kubernetes.io"
"""Kubernetes' standard device attributes (KEP-5491 `deviceattribute`): pciBusID, pcieRoot."""

STRING: Final = "string"
VERSION: Final = "version"
INT: Final = "int"
BOOL: Final = "bool"
"""Attribute types, named as the slice's value keys (`{"string": ...}`) and CEL names them."""

_COMMON: Final[dict[str, str]] = {
    "addressingMode": STRING,
    "architecture": STRING,
    "brand": STRING,
    "cudaComputeCapability": VERSION,
    "cudaDriverVersion": VERSION,
    "driverVersion": VERSION,
    "productName": STRING,
    "type": STRING,
    "uuid": STRING,
}

FULL_GPU_ATTRIBUTES: Final[dict[str, dict[str, str]]] = {
    DRIVER_DOMAIN: dict(_COMMON),
    STANDARD_DOMAIN: {"pciBusID": STRING, "pcieRoot": STRING},
}
"""Attributes of a device of type "gpu" (a full GPU), by domain: exactly the recorded H200 slice's set."""

MIG_ATTRIBUTES: Final[dict[str, dict[str, str]]] = {
    DRIVER_DOMAIN: {**_COMMON, "parentUUID": STRING, "profile": STRING},
    STANDARD_DOMAIN: {"pciBusID": STRING, "pcieRoot": STRING},
}
"""Attributes of a device of type "mig" (a MIG instance): the parent's, plus parentUUID and profile (mig.go)."""

FULL_GPU_CAPACITY: Final = ("memory",)
"""Capacities of a full GPU: `memory`, NVML's total memory in bytes as a binary quantity (143771Mi on the H200)."""


def slice_key(domain: str, name: str) -> str:
    """The attribute's key in a ResourceSlice: unqualified in the driver's domain, `domain/name` otherwise."""
    return name if domain == DRIVER_DOMAIN else f"{domain}/{name}"


def cel_reference(domain: str, name: str) -> str:
    """How a CEL selector names the attribute: `device.attributes["<domain>"].<name>`."""
    return f'device.attributes["{domain}"].{name}'


def slice_attribute_types(table: dict[str, dict[str, str]]) -> dict[str, str]:
    """A table as a slice writes it: slice key -> value type, e.g. `resource.kubernetes.io/pcieRoot` -> string."""
    return {slice_key(domain, name): kind for domain, names in table.items() for name, kind in names.items()}


def nvml_semver(version: str) -> str:
    """An NVML version as the driver publishes it (Masterminds semver): 580.159.04 -> 580.159.4, 9.0 -> 9.0.0."""
    parts = [str(int(part)) for part in version.split(".")]
    return ".".join([*parts, "0", "0"][:3])
