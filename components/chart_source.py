"""Turn a pinned chart and its optional source override into Helm arguments."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi

from components.config import ChartPin
from policy.gpu_allocation.vocab.grammar import url_has_credentials


@dataclass(frozen=True)
class HelmSource:
    """What Chart v4 and Release take: a chart reference, a version or None, and a repository URL or None.

    A repository URL is a secret Output when it holds user:password@ or the `charts` config key is a secret, so
    credentials never sit in plain inputs.
    """

    chart: str
    version: str | None
    repo: pulumi.Input[str] | None
    plain_http: bool = False


def resolve(
    pin: ChartPin, chart_name: str, default_repo: str | None, default_oci: str | None, project_dir: Path
) -> HelmSource:
    """Resolve the upstream default or the configured override (Helm repo, OCI mirror, local archive).

    The pinned version is passed for a local archive too: Helm ignores it for a path, config validation
    checked that the archive holds exactly that version, and reviewers and policies see it.
    """
    source = pin.source
    if source is not None and source.archive:
        return HelmSource(str((project_dir / source.archive).resolve()), pin.version, None)
    if source is not None and source.oci:
        return HelmSource(source.oci, pin.version, None, source.plain_http)
    if source is not None and source.repo:
        secret = source.secret or url_has_credentials(source.repo)
        repo = pulumi.Output.secret(source.repo) if secret else source.repo
        return HelmSource(chart_name, pin.version, repo)
    if default_oci is not None:
        return HelmSource(default_oci, pin.version, None)
    return HelmSource(chart_name, pin.version, default_repo)
