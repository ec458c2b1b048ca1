"""`charts`: the pinned owner charts and where each comes from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, PrivateAttr, field_validator

from cluster.findings import show
from components.config.strict import StrictModel, owner_field
from policy.gpu_allocation.vocab import grammar
from policy.gpu_allocation.vocab.labels import (
    DEVICE_PLUGIN,
    DRA,
    GPU_OPERATOR,
    Owner,
)
from policy.gpu_allocation.vocab.owners import owner_kind


class ChartSource(StrictModel):
    """Where a chart comes from: exactly one of repo, oci or archive."""

    repo: str | None = Field(default=None, description="Helm repository URL.")
    oci: str | None = Field(default=None, description="OCI chart reference, oci://host/path/chart.")
    archive: str | None = Field(default=None, description="Local .tgz path, relative to the project.")
    plain_http: bool = Field(default=False, alias="plainHttp", description="OCI mirror on plain HTTP.")
    _secret: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any) -> None:
        """Remember whether the `charts` config key was set as a secret (the validation context says so)."""
        self._secret = isinstance(context, Mapping) and "charts" in context.get("secret_keys", ())

    @property
    def secret(self) -> bool:
        """The repository URL must reach the provider as a secret."""
        return self._secret

    @field_validator("repo")
    @classmethod
    def _repo(cls, value: str | None) -> str | None:
        if value is not None and not grammar.is_helm_repo_url(value):
            msg = "is not a Helm repository URL: write https://host/path (credentials as https://user:token@host/path)"
            raise ValueError(msg)
        return value

    @field_validator("oci")
    @classmethod
    def _oci(cls, value: str | None) -> str | None:
        if value is not None and not grammar.is_oci_chart(value):
            msg = f"{show(value)} is not an OCI reference: write oci://host/path/chart"
            raise ValueError(msg)
        return value

    @field_validator("archive")
    @classmethod
    def _archive(cls, value: str | None) -> str | None:
        if value is not None and not grammar.is_path(value):
            msg = (
                "is not a usable file path (empty, a NUL or line break, over 4096 characters or a name over 255 "
                "bytes): point it at the chart's .tgz"
            )
            raise ValueError(msg)
        return value


class ChartPin(StrictModel):
    """An exact chart version and its source."""

    version: str
    source: ChartSource | None = None

    @field_validator("version")
    @classmethod
    def _exact(cls, value: str) -> str:
        if not grammar.is_exact_version(value):
            msg = f"{show(value)} is not an exact chart version; pin one release such as 0.20.0"
            raise ValueError(msg)
        return value


def _pinned(owner: Owner) -> ChartPin:
    """The registry's pinned release of an owner's chart, with its default (upstream) source."""
    return ChartPin(version=owner_kind(owner).chart.version)


class ChartsConfig(StrictModel):
    """Pinned versions of the owner charts, one field per owner kind under its `config_key`."""

    device_plugin: ChartPin = Field(default_factory=lambda: _pinned(DEVICE_PLUGIN), alias="devicePlugin")
    dra_driver: ChartPin = Field(default_factory=lambda: _pinned(DRA), alias="draDriver")
    gpu_operator: ChartPin = Field(default_factory=lambda: _pinned(GPU_OPERATOR), alias="gpuOperator")

    def of(self, owner: Owner) -> ChartPin:
        """The pin of one owner's chart."""
        pin: ChartPin = getattr(self, owner_field(ChartsConfig, owner))
        return pin
