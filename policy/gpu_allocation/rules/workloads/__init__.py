"""Workload policies: hardened smoke Jobs and well-formed GPU requests; one module per rule.

Time-slicing and MIG live in :mod:`..sharing`. The seed's words for each rule are in its module; this package lists
the family's policies in README order.
"""

from __future__ import annotations

from typing import Final

from .dual_allocation import NO_DUAL_ALLOCATION
from .request_shape import GPU_REQUEST_SHAPE
from .smoke_job_token import SMOKE_JOB_TOKEN_UNMOUNTED
from .smoke_jobs import SMOKE_JOB_HARDENED, SMOKE_JOB_RUN_APPROVED
from .visible_devices import NO_VISIBLE_DEVICES_OVERRIDE

__all__ = [
    "GPU_REQUEST_SHAPE",
    "NO_DUAL_ALLOCATION",
    "NO_VISIBLE_DEVICES_OVERRIDE",
    "POLICIES",
    "SMOKE_JOB_HARDENED",
    "SMOKE_JOB_RUN_APPROVED",
    "SMOKE_JOB_TOKEN_UNMOUNTED",
]

POLICIES: Final = (
    SMOKE_JOB_HARDENED,
    SMOKE_JOB_RUN_APPROVED,
    SMOKE_JOB_TOKEN_UNMOUNTED,
    GPU_REQUEST_SHAPE,
    NO_VISIBLE_DEVICES_OVERRIDE,
    NO_DUAL_ALLOCATION,
)
