"""DRA policies: API shapes, feature gates, webhook TLS, the name mapping, claims on DRA nodes; one module per rule.

The seed's words for each rule are in its module; this package lists the family's policies in README order.
"""

from __future__ import annotations

from typing import Final

from .api_current import DRA_API_CURRENT
from .claim_cohort import DRA_CLAIM_ON_DRA_COHORT
from .extended_resource_names import DRA_EXTENDED_RESOURCE_NAME_UNIQUE
from .feature_gates import DRA_FEATURE_GATES_ALLOWLISTED
from .mapped_name_publishers import DRA_EXTENDED_RESOURCE_ONE_PUBLISHER
from .mapping_gate import DRA_EXTENDED_RESOURCE_GATE_ON
from .plain_requests import DRA_EXTENDED_RESOURCE_REQUEST_SERVED
from .webhook import DRA_WEBHOOK_NEEDS_TLS

__all__ = [
    "DRA_API_CURRENT",
    "DRA_CLAIM_ON_DRA_COHORT",
    "DRA_EXTENDED_RESOURCE_GATE_ON",
    "DRA_EXTENDED_RESOURCE_NAME_UNIQUE",
    "DRA_EXTENDED_RESOURCE_ONE_PUBLISHER",
    "DRA_EXTENDED_RESOURCE_REQUEST_SERVED",
    "DRA_FEATURE_GATES_ALLOWLISTED",
    "DRA_WEBHOOK_NEEDS_TLS",
    "POLICIES",
]

POLICIES: Final = (
    DRA_API_CURRENT,
    DRA_FEATURE_GATES_ALLOWLISTED,
    DRA_WEBHOOK_NEEDS_TLS,
    DRA_EXTENDED_RESOURCE_NAME_UNIQUE,
    DRA_EXTENDED_RESOURCE_ONE_PUBLISHER,
    DRA_EXTENDED_RESOURCE_REQUEST_SERVED,
    DRA_CLAIM_ON_DRA_COHORT,
    DRA_EXTENDED_RESOURCE_GATE_ON,
)
