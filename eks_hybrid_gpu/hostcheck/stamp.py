"""Which host check this is: the version (and, in the artifact, the digest of its sources) for `--version` and JSON.

The artifact carries `eks_hybrid_gpu/hostcheck/_stamp.py`, written when it is built (eks_hybrid_gpu/hostartifact.py);
run from an installed package or a checkout, the version is the distribution's.
"""

import importlib
import platform
from typing import Dict, Optional


def stamped() -> Dict[str, Optional[str]]:
    """{version, source, python}: `source` is the artifact's source digest, None outside an artifact."""
    version: str = "unknown"
    source: Optional[str] = None
    try:
        stamp = importlib.import_module("eks_hybrid_gpu.hostcheck._stamp")
        version, source = str(stamp.VERSION), str(stamp.SOURCE)
    except ImportError:
        try:
            from importlib import metadata  # 3.8+; older interpreters run the artifact, which is stamped

            version = metadata.version("eks-hybrid-gpu")
        except Exception:  # noqa: S110 - not installed (a checkout): the version stays unknown
            pass
    return {"version": version, "source": source, "python": platform.python_version()}


def line() -> str:
    """`--version`: one line."""
    found = stamped()
    source = f", artifact source {found['source']}" if found["source"] else ""
    return f"eks-hybrid-gpu hostcheck {found['version']} (Python {found['python']}{source})"
