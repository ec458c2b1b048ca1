"""MIG profile names and the extended-resource names the device plugin advertises for them (mixed strategy).

The device plugin turns a profile's `+` into `.`: `1g.10gb+me` is advertised as `nvidia.com/mig-1g.10gb.me`,
because `+` is not allowed in a Kubernetes resource name. Only the profiles of the tabulated GPU models
(`gpu_models.MIG_PROFILES`) are accepted, so free text never becomes a resource name.
"""

from __future__ import annotations

from typing import Final

from .gpu_models import MIG_PROFILES
from .grammar import MIG_PROFILE

RESOURCE_PREFIX: Final = "nvidia.com/mig-"


def tabulated_profiles() -> tuple[str, ...]:
    """Every profile of every tabulated model, in table order, without repeats."""
    seen: dict[str, None] = {}
    for table in MIG_PROFILES.values():
        seen.update(dict.fromkeys(table))
    return tuple(seen)


def is_tabulated_profile(profile: object) -> bool:
    """A well-formed profile name that some tabulated GPU model publishes."""
    return isinstance(profile, str) and MIG_PROFILE.fullmatch(profile) is not None and profile in tabulated_profiles()


def mig_resource_name(profile: str) -> str:
    """The extended resource the device plugin advertises for a profile under the mixed strategy."""
    return RESOURCE_PREFIX + profile.replace("+", ".")


SHARED_SUFFIX: Final = ".shared"
"""What the device plugin appends to every resource a time-slicing or MPS config lists when ``renameByDefault`` is
true (k8s-device-plugin v0.20.0, README "Shared Access to GPUs" and ``api/config/v1/replicas.go``), MIG
resources under the mixed strategy included: ``nvidia.com/mig-1g.18gb.shared`` is a replica of a ``1g.18gb``
instance."""


def normalize_profile(resource_name: str) -> str:
    """The profile a mixed-strategy resource name advertises: ``nvidia.com/mig-1g.5gb.me`` -> ``1g.5gb+me``.

    A time-sliced replica's ``.shared`` suffix names no profile: ``nvidia.com/mig-1g.18gb.shared`` -> ``1g.18gb``.
    """
    profile = resource_name[len(RESOURCE_PREFIX) :]
    profile = profile.removesuffix(SHARED_SUFFIX)
    if profile.endswith(".me"):
        profile = profile[: -len(".me")] + "+me"
    return profile
