"""`operator`: the GPU Operator's settings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.strict import StrictModel


class OperatorConfig(StrictModel):
    """GPU Operator settings; used only when a cohort's owner is gpu-operator."""

    mode: Literal["cluster-policy", "gpu-cluster"] = "cluster-policy"
    driver_enabled: bool = Field(
        default=False,
        alias="driverEnabled",
        description="Let the Operator manage the driver. false only where the host driver is verified.",
    )
    toolkit_enabled: bool = Field(
        default=False,
        alias="toolkitEnabled",
        description="Let the Operator manage the container toolkit. false only after the runtime is prepared.",
    )
    device_plugin_enabled: bool = Field(
        default=True,
        alias="devicePluginEnabled",
        description="ClusterPolicy mode: the Operator's own device plugin owns the cohort.",
    )
    mig_manager_enabled: bool = Field(default=False, alias="migManagerEnabled")
    nfd_enabled: bool = Field(
        default=False,
        alias="nfdEnabled",
        description="Deploy NFD with the Operator. Off: discovery labels come from the approved process.",
    )
