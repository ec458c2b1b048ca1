"""The machine a benchmark ran on, and how busy it was."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0


def _version(argv: list[str]) -> str:
    try:
        result = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return result.stdout.strip() or "unknown"


def pulumi_version(pulumi_binary: str) -> str:
    """`pulumi version` of a CLI binary (run it while PULUMI_HOME points somewhere that may be written)."""
    return _version([pulumi_binary, "version"])


def describe(pulumi_cli: str | None = None) -> dict[str, Any]:
    """CPU model, cores, memory, kernel, Python, Pulumi CLI (as given) and SDK versions."""
    from importlib.metadata import version

    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(_memory_gib(), 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pulumi_cli": pulumi_cli or "not used",
        "pulumi_sdk": version("pulumi"),
        "pulumi_kubernetes_sdk": version("pulumi-kubernetes"),
        "pulumi_policy_sdk": version("pulumi-policy"),
    }


def load() -> tuple[float, float, float]:
    """os.getloadavg(): run-queue length over 1, 5 and 15 minutes."""
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)
