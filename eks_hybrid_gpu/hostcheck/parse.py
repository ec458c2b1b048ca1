"""Pure parsers for what the host check reads: nvidia-smi CSV, tool versions, CDI specs.

Everything here takes text and returns values, so the tests can feed captured host output.
"""

import csv
import io
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from policy.gpu_allocation.vocab import versioning  # standard library only, like the rest of the vocabulary

if TYPE_CHECKING:
    from typing import Final

QUERY_FIELDS: "Final[Tuple[str, ...]]" = (
    "index",
    "name",
    "uuid",
    "driver_version",
    "memory.total",
    "mig.mode.current",
    "mig.mode.pending",
    "pci.bus_id",
    "compute_cap",
)
"""The full query: the GPU integration guide's four fields plus what the MIG and inventory checks need."""

SEED_FIELDS: "Final[Tuple[str, ...]]" = ("name", "driver_version", "uuid", "memory.total")
"""The GPU integration guide's query, the fallback when an old nvidia-smi rejects a newer field name."""

_NOT_AVAILABLE: "Final" = frozenset({"[N/A]", "N/A", "[Not Supported]", "Not Supported", ""})
_DRIVER_RE: "Final" = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")
_UUID_RE: "Final" = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]+$")


class ParseError(ValueError):
    """Output that does not have the shape the check relies on."""


@dataclass(frozen=True)
class Gpu:
    """One physical GPU as nvidia-smi reports it."""

    index: int
    model: str
    uuid: str
    driver_version: str
    memory_mib: int
    mig_mode: Optional[str]
    """"Enabled", "Disabled", or None when the GPU is not MIG-capable or the field was not read."""
    mig_mode_pending: Optional[str]
    pci_bus_id: Optional[str]
    compute_capability: Optional[str]


def query_argv(nvidia_smi: str, fields: Tuple[str, ...]) -> List[str]:
    """Build the nvidia-smi query command for the given fields."""
    return [
        nvidia_smi,
        f"--query-gpu={','.join(fields)}",
        "--format=csv,noheader,nounits",
    ]


def _optional(value: str) -> Optional[str]:
    return None if value.strip() in _NOT_AVAILABLE else value.strip()


def parse_gpu_csv(text: str, fields: Tuple[str, ...]) -> List[Gpu]:
    """Parse `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` output.

    Raises ParseError naming the first line that is not a GPU row, because a half-parsed inventory
    would give the cohort the wrong labels.
    """
    gpus: List[Gpu] = []
    lines = [line for line in text.splitlines() if line.strip()]
    for number, line in enumerate(lines, start=1):
        row = next(csv.reader(io.StringIO(line), skipinitialspace=True))
        if len(row) != len(fields):
            msg = (
                f"nvidia-smi output line {number} has {len(row)} fields, expected {len(fields)} "
                f"({','.join(fields)}): {line.strip()[:120]!r}"
            )
            raise ParseError(msg)
        values = dict(zip(fields, (cell.strip() for cell in row)))  # lengths checked above
        gpus.append(_gpu_from_row(values, number, line))
    return gpus


def _gpu_from_row(values: Dict[str, str], number: int, line: str) -> Gpu:
    memory = values["memory.total"]
    memory = (memory[: -len("MiB")] if memory.endswith("MiB") else memory).strip()
    driver = values["driver_version"]
    uuid = values["uuid"]
    if not memory.isdigit() or not _DRIVER_RE.match(driver) or not _UUID_RE.match(uuid):
        msg = (
            f"nvidia-smi output line {number} is not a GPU row (memory.total in MiB, a driver "
            f"version such as 580.95.05 and a GPU-... UUID expected): {line.strip()[:120]!r}"
        )
        raise ParseError(msg)
    index_text = values.get("index", str(number - 1))
    return Gpu(
        index=int(index_text) if index_text.isdigit() else number - 1,
        model=values["name"],
        uuid=uuid,
        driver_version=driver,
        memory_mib=int(memory),
        mig_mode=_optional(values.get("mig.mode.current", "")),
        mig_mode_pending=_optional(values.get("mig.mode.pending", "")),
        pci_bus_id=_optional(values.get("pci.bus_id", "")),
        compute_capability=_optional(values.get("compute_cap", "")),
    )


def driver_major(version: str) -> int:
    """Return the driver branch, e.g. 580 for 580.159.04."""
    match = _DRIVER_RE.match(version)
    if match is None:
        msg = f"not a driver version: {version!r}"
        raise ParseError(msg)
    return int(match.group(1))


def find_tool_version(text: str) -> Optional[str]:
    """Return the first x.y.z version in a tool's --version output, or None."""
    return versioning.find(text)


def version_tuple(version: str) -> Tuple[int, int, int]:
    """Return (major, minor, patch); a pre-release suffix is ignored."""
    found = versioning.search(version)
    if found is None:
        msg = f"not a version: {version!r}"
        raise ParseError(msg)
    return found.release


def cdi_devices(text: str, filename: str) -> List[str]:
    """Return the fully qualified device names (kind=name) that one CDI spec file declares.

    JSON specs are parsed fully. YAML specs, the toolkit's default, are read line by line for `kind:`
    and the `- name:` items of the top-level `devices:` list, since the check may use only the
    standard library.
    """
    if filename.endswith(".json"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as error:
            msg = f"{filename} is not valid JSON: {error.msg} at line {error.lineno}"
            raise ParseError(msg) from error
        if not isinstance(spec, dict):
            msg = f"{filename} holds JSON {type(spec).__name__}, not an object: it is not a CDI spec"
            raise ParseError(msg)
        kind = str(spec.get("kind", ""))
        devices = spec.get("devices") or []
        if not isinstance(devices, list) or not all(isinstance(device, dict) for device in devices):
            msg = f"{filename}: devices is not a list of objects: it is not a CDI spec"
            raise ParseError(msg)
        names = [str(device.get("name", "")) for device in devices]
    else:
        kind, names = _yaml_kind_and_devices(text)
    if not kind:
        msg = f"{filename} has no top-level kind: it is not a CDI spec"
        raise ParseError(msg)
    return [f"{kind}={name}" for name in names if name]


def _yaml_kind_and_devices(text: str) -> Tuple[str, List[str]]:
    kind = ""
    names: List[str] = []
    in_devices = False
    item_indent: Optional[int] = None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0 and not line.startswith("-"):
            key, _, value = line.partition(":")
            in_devices = key == "devices"
            if key == "kind":
                kind = value.strip().strip("'\"")
            continue
        if not in_devices:
            continue
        stripped = line.lstrip()
        if stripped.startswith("- "):
            if item_indent is None:
                item_indent = indent
            if indent != item_indent:
                continue
            stripped = stripped[2:].lstrip()
            indent += 2
        if stripped.startswith("name:") and item_indent is not None and indent == item_indent + 2:
            names.append(stripped.partition(":")[2].strip().strip("'\""))
    return kind, names
