"""How the DRA driver reads its feature gates: its maturity table, component-base parsing and strconv.ParseBool.

The driver judges gates by its own table: an unknown gate or a value that is no boolean stops it, and an Alpha gate
is off by default. :func:`gate_findings` judges gates as the driver does, so the rule refuses what the driver would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from ...vocab import versioning
from ...vocab.owners import DRA_KIND
from ..findings import Finding

_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_go_bool(text: str) -> bool | None:
    """``strconv.ParseBool`` (how component-base reads ``FEATURE_GATES``): True/False, None if not a boolean."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


DRA_GATES: Final[Mapping[str, tuple[str, tuple[int, int]]]] = {
    "TimeSlicingSettings": ("alpha", (0, 2)),
    "MPSSupport": ("alpha", (0, 2)),
    "IMEXDaemonsWithDNSNames": ("beta", (0, 2)),
    "PassthroughSupport": ("alpha", (0, 3)),
    "DynamicMIG": ("alpha", (0, 3)),
    "NVMLDeviceHealthCheck": ("alpha", (0, 3)),
    "ComputeDomainCliques": ("beta", (0, 3)),
    "CrashOnNVLinkFabricErrors": ("beta", (0, 3)),
    "DeviceMetadata": ("alpha", (0, 4)),
    "DRAListTypeAttributes": ("alpha", (0, 4)),
    "FabricManagerPartitioning": ("alpha", (0, 5)),
    "HostManagedIMEXDaemon": ("alpha", (0, 5)),
    "ConsumableShares": ("alpha", (0, 5)),
    "NodeLocalFabricIPC": ("alpha", (0, 6)),
}
"""The driver's own gates: maturity and the driver minor that added them.

From ``pkg/featuregates`` of kubernetes-sigs/dra-driver-nvidia-gpu (docs/reference/feature-gates.md); a gate exists
in a release from its minor on.
"""

LOGGING_GATES: Final[Mapping[str, str]] = {
    "ContextualLogging": "beta",
    "LoggingBetaOptions": "beta",
    "LoggingAlphaOptions": "alpha",
    "AllAlpha": "alpha",
    "AllBeta": "beta",
}
"""Gates every component-base feature gate knows (``logsapi.AddFeatureGates`` and the AllAlpha/AllBeta switches)."""

_NEWEST: Final = DRA_KIND.chart.version
"""The reviewed DRA driver release this program installs (the registry's pin)."""


def dra_minor(version: Any) -> tuple[tuple[int, int], str]:
    """The driver's (major, minor) and how it is named; an unknown version is judged as the newest supported."""
    found = versioning.parse(version.strip(), partial=True) if isinstance(version, str) else None
    if found is not None:
        return (found.major, found.minor), f"DRA driver {version.strip().lstrip('v')}"
    major, minor, _ = _NEWEST.split(".")
    return (int(major), int(minor)), f"DRA driver {_NEWEST} (the version is not told; judged as the newest supported)"


def gate_maturity(gate: str, minor: tuple[int, int]) -> str | None:
    """``alpha``/``beta`` (logging gates too), or None when that driver release does not know the gate."""
    if gate in LOGGING_GATES:
        return LOGGING_GATES[gate]
    known = DRA_GATES.get(gate)
    if known is None or known[1] > minor:
        return None
    return known[0]


def gate_text(value: Any) -> str:
    """How the chart prints a gate value into ``FEATURE_GATES`` (``{{ $key }}={{ $value }}``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def parse_feature_gates(text: str) -> list[tuple[str, str]]:
    """``A=true,B=false,`` as component-base splits it: (name, value text) pairs."""
    pairs = []
    for item in text.split(","):
        name, _, value = item.strip().partition("=")
        if name.strip():
            pairs.append((name.strip(), value.strip()))
    return pairs


def gate_findings(
    subject: str,
    field: str,
    gates: Iterable[tuple[str, Any, bool | None]],
    version: Any,
    allowed: Iterable[str],
    fix_path: str,
    urn: str | None = None,
    not_boolean: str = "which the driver cannot parse as a boolean (strconv.ParseBool), so it fails to start",
) -> list[Finding]:
    """Judge gates as the driver does: an unknown gate or a non-boolean value stops it; alpha gates on are refused.

    An alpha gate reviewed into ``allowed`` passes; beta, GA and logging beta gates pass.

    ``gates``: (name, value as written, enabled: True/False/None when it is no boolean).
    """
    minor, named = dra_minor(version)
    reviewed = set(allowed)
    findings = []
    for gate, raw, enabled in gates:
        maturity = gate_maturity(gate, minor)
        where = f"{field} {gate}"
        if maturity is None:
            known = sorted([*(g for g, (_, since) in DRA_GATES.items() if since <= minor), *LOGGING_GATES])
            findings.append(
                Finding(
                    subject,
                    where,
                    f"names a gate {named} does not know: it refuses to start on an unrecognized feature gate",
                    f"Remove {gate} ({fix_path}); the gates it knows are {', '.join(known)}",
                    urn=urn,
                )
            )
        elif enabled is None:
            findings.append(
                Finding(
                    subject,
                    where,
                    not_boolean,
                    f"Set {gate} to true or false ({fix_path})",
                    value=raw,
                    shown=True,
                    urn=urn,
                )
            )
        elif enabled and maturity == "alpha" and gate not in reviewed:
            findings.append(
                Finding(
                    subject,
                    where,
                    f"which turns on an Alpha gate of {named} (off by default); the guide says not to enable gates "
                    "to make a demo start, and Alpha features change or disappear between releases",
                    f"Remove {gate} ({fix_path}), or add '{gate}' to this policy's allowedFeatureGates after a review",
                    value=raw,
                    shown=True,
                    urn=urn,
                )
            )
    return findings
