"""The smoke image placeholder: the one version-like default that belongs to no owner kind.

Each owner's chart (name, pinned version, upstream, archive digest) and kubelet floors live in its registry entry,
policy/gpu_allocation/vocab/owners.py, the one place a version changes; the container runtime's CDI floors, which
every DRA mode shares, are the node-facts judge's (`cluster.judge.node_facts`).
"""

from __future__ import annotations

from typing import Final

SMOKE_IMAGE_PLACEHOLDER: Final = "registry.example.invalid/approved/gpu-smoke@sha256:" + "0" * 64
"""Deliberately unusable default smoke image: a Job using it can never be approved to run."""
