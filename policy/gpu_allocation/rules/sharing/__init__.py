"""Sharing policies: time-slicing configs and MIG strategies, judged per device-plugin install; one module per rule.

The config and strategy come from what the plugin's DaemonSet mounts and runs (or a Release's values), wherever it
came from (:mod:`..plugin_configs`). The seed's words for each rule are in its module; this package lists the
family's policies in README order.
"""

from __future__ import annotations

from typing import Final

from .config_attached import TIME_SLICING_CONFIG_ATTACHED
from .mig import MIG_STRATEGY_CONSISTENT
from .time_slicing import SHARED_GPU_RESOURCE_NAME

__all__ = ["MIG_STRATEGY_CONSISTENT", "POLICIES", "SHARED_GPU_RESOURCE_NAME", "TIME_SLICING_CONFIG_ATTACHED"]

POLICIES: Final = (SHARED_GPU_RESOURCE_NAME, TIME_SLICING_CONFIG_ATTACHED, MIG_STRATEGY_CONSISTENT)
