"""The version floors and placeholders that belong to no owner kind.

Each owner's chart (name, pinned version, upstream, archive digest) and kubelet floors live in its registry entry,
policy/gpu_allocation/vocab/owners.py, the one place a version changes. What is left here is the container
runtime's CDI floors, which every DRA mode shares, and the smoke image placeholder.
"""

from __future__ import annotations

from typing import Final

# CDI in containerd: 1.7 added it behind `enable_cdi = true` in the CRI plugin's config; 2.0 turned it on by default
# (containerd's release notes; eks_hybrid_gpu/hostcheck/containerd.py reads the setting on a host).
CDI_MIN_CONTAINERD: Final = (1, 7, 0)
"""The first containerd with CDI; it needs `enable_cdi = true` in the CRI plugin's config."""
CDI_DEFAULT_CONTAINERD: Final = (2, 0, 0)
"""From here containerd enables CDI by default."""

SMOKE_IMAGE_PLACEHOLDER: Final = "registry.example.invalid/approved/gpu-smoke@sha256:" + "0" * 64
"""Deliberately unusable default smoke image: a Job using it can never be approved to run."""
