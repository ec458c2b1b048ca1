"""Where `eks-hybrid-gpu local up` keeps the loopback cluster, as the environment says: read here, at the edge.

The program reads no environment (components/ takes everything as arguments), so the entry points read it here
and pass the result down: `__main__.py` and the CLI's inline programs give `local_kubeconfig()` to
`components.program.run(..., local_kubeconfig=...)`; `local`, `simulate` and `migrate` find the cluster's state
with `local_state_dir()`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

CACHE_ENV: Final = "EKS_HYBRID_GPU_CACHE"
"""The cache root (default ~/.cache/eks-hybrid-gpu); the local cluster's state is its `local-cluster/`."""
LOCAL_KUBECONFIG_ENV: Final = "EKS_HYBRID_GPU_KUBECONFIG"
"""The kubeconfig a local stack's program uses instead of the local cluster's own (the engine and tests set it)."""
KUBE_DIRS_ENV: Final = "EKS_HYBRID_GPU_KUBE_DIRS"
"""`v1.34.4=DIR,v1.37.2=DIR`: each built Kubernetes version's bin directory (`scripts/toolchain.sh --print-env`)."""


def kube_dirs(environ: Mapping[str, str] = os.environ) -> dict[str, Path]:
    """The built Kubernetes versions and their bin directories, as the toolchain's environment lists them."""
    dirs = {}
    for entry in environ.get(KUBE_DIRS_ENV, "").split(","):
        version, _, directory = entry.partition("=")
        if version and directory:
            dirs[version] = Path(directory)
    return dirs


def local_state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where `eks-hybrid-gpu local up` keeps the loopback cluster (overridable for tests)."""
    root = environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "eks-hybrid-gpu")
    return Path(root) / "local-cluster"


def local_kubeconfig(environ: Mapping[str, str] = os.environ) -> Path:
    """The kubeconfig of the local API server."""
    override = environ.get(LOCAL_KUBECONFIG_ENV)
    return Path(override) if override else local_state_dir(environ) / "kubeconfig"
