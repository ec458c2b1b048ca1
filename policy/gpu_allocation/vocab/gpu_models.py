"""Published MIG profiles per GPU model: profile name -> maximum instances of that profile.

Sources: the GPU integration guide's A100 40 GB table, and NVIDIA's MIG User Guide "Supported MIG Profiles" tables
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html, checked 2026-10) for
A100 40/80 GB, H100 80 GB and H200 141 GB; `+me` profiles include the media engines (one per GPU).
Other SKUs (A30, H100 94/96 GB, B200, ...) are not tabulated: such a model is treated as unknown.
Nominal memory labels are not a usable-memory guarantee, and mixed
placements have further geometry limits; this table only says which names exist for a model.
A model name as people and GFD write it (``A100 80GB``, ``NVIDIA-A100-SXM4-40GB``) is normalised to a table key by
:func:`normalize_gpu_model`, for the program and the pack alike.
"""

from __future__ import annotations

import re
from typing import Final

MIG_PROFILES: Final[dict[str, dict[str, int]]] = {
    "A100-40GB": {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
    "A100-80GB": {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "H100-80GB": {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "H200-141GB": {
        "1g.18gb": 7,
        "1g.18gb+me": 1,
        "1g.35gb": 4,
        "2g.35gb": 3,
        "3g.71gb": 2,
        "4g.71gb": 1,
        "7g.141gb": 1,
    },
}


def known_profiles(model: str) -> dict[str, int] | None:
    """The profile table of a model, or None when the model is not in the table."""
    return MIG_PROFILES.get(model)


GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
"""GFD node label with the product name, e.g. ``NVIDIA-A100-SXM4-40GB``."""


def normalize_gpu_model(value: object) -> str | None:
    """Map a model name or GFD product label to a :data:`MIG_PROFILES` key, or None when it is not tabulated."""
    if not isinstance(value, str):
        return None
    text = value.upper().replace("_", "-").replace(" ", "-")
    family = re.search(r"(A100|H100|H200)", text)
    if family is None:
        return None
    memory = re.search(r"(\d+)\s*GB?\b", text[family.end() :])
    if family.group(1) == "H200":
        return "H200-141GB" if memory is None or memory.group(1) == "141" else None
    if memory is None:
        return None
    key = f"{family.group(1)}-{memory.group(1)}GB"
    return key if key in MIG_PROFILES else None
