"""What a workload's DRA claims ask for: each device request, its DeviceClass and its CEL selectors, as written.

The scheduler's DRA allocator (kubernetes ``pkg/scheduler/framework/plugins/dynamicresources``, structured
parameters in ``k8s.io/dynamic-resource-allocation/structured``) gives a request one device that its DeviceClass's
selectors *and* its own selectors all accept: ``exactly`` is one request, ``firstAvailable`` a list of subrequests
tried in order (one must fit). A pod names its claims in ``spec.resourceClaims`` by ``resourceClaimTemplateName`` or
``resourceClaimName``; the claim (or the template's ``spec.spec``) holds ``devices.requests``. Plain data in: the
objects come from the stack (:class:`.stack_view.StackView`); a claim or class that is not in it is not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from .props import UNKNOWN, as_dict, as_list
from .resource import Resource

DRA_GROUP: Final = "resource.k8s.io"
MIG_CLASS: Final = "mig.nvidia.com"
"""The DeviceClass the DRA chart renders for MIG devices (dra-driver-nvidia-gpu ``templates/deviceclass-mig.yaml``:
``device.attributes['gpu.nvidia.com'].type == 'mig'``)."""
GPU_CLASSES: Final = frozenset({"gpu.nvidia.com", MIG_CLASS, "vfio.gpu.nvidia.com"})
"""The DeviceClasses the DRA chart renders for the GPUs its driver publishes (``templates/deviceclass-*.yaml``; the
compute-domain classes are IMEX channels and daemons, no GPU)."""
_NAMES_GPU_DRIVER: Final = re.compile(r"""device\.driver\s*==\s*(['"])gpu\.nvidia\.com\1""")
"""A CEL selector that admits only the NVIDIA GPU driver's devices (``device.driver == 'gpu.nvidia.com'``)."""
CLAIM_KINDS: Final = frozenset({"ResourceClaimTemplate", "ResourceClaim", "DeviceClass"})
"""The DRA kinds this reader needs read from a stack."""


@dataclass(frozen=True)
class Expression:
    """One CEL selector expression and where it sits (object and field), for messages."""

    text: str
    subject: str
    field: str
    urn: str


@dataclass(frozen=True)
class DeviceRequest:
    """One device request (or one ``firstAvailable`` subrequest) of a claim, with every selector that applies."""

    claim: Resource
    name: str
    field: str
    """Where the request sits in the claim object, e.g. ``spec.spec.devices.requests[0].exactly``."""
    device_class: str | None
    class_object: Resource | None
    expressions: tuple[Expression, ...]


def asks_nvidia_gpu(request: DeviceRequest) -> bool:
    """Tell whether a device request asks for the NVIDIA DRA driver's GPUs.

    It does when it names one of the chart's GPU classes, or a CEL selector (of the request or of its class) admits
    only that driver's devices.
    """
    if request.device_class in GPU_CLASSES:
        return True
    return any(_NAMES_GPU_DRIVER.search(expression.text) for expression in request.expressions)


def is_dra_object(resource: Resource, kind: str) -> bool:
    """A ``resource.k8s.io/*`` object of this kind."""
    return resource.is_kubernetes and resource.api_group_version.startswith(f"{DRA_GROUP}/") and resource.kind == kind


def _selector_expressions(selectors: Any, owner: Resource, base: str) -> Iterator[Expression]:
    for index, selector in enumerate(as_list(selectors)):
        text = as_dict(as_dict(selector).get("cel")).get("expression")
        if isinstance(text, str):
            yield Expression(text, owner.describe, f"{base}[{index}].cel.expression", owner.urn)
        elif text is not None and text is not UNKNOWN:
            owner.cannot_read(f"{base}[{index}].cel.expression", "is not a string (a CEL expression)")


def claim_requests(claim: Resource, classes: dict[str, Resource]) -> list[list[DeviceRequest]]:
    """Each request of a claim or template as its options (one for ``exactly``, several for ``firstAvailable``)."""
    base = "spec.spec.devices" if claim.kind == "ResourceClaimTemplate" else "spec.devices"
    spec = as_dict(claim.props.get("spec"))
    if claim.kind == "ResourceClaimTemplate":
        spec = as_dict(spec.get("spec"))
    devices = as_dict(spec.get("devices"))
    found: list[list[DeviceRequest]] = []
    for index, request in enumerate(as_list(devices.get("requests"))):
        request = as_dict(request)
        name = str(request.get("name") or f"requests[{index}]")
        where = f"{base}.requests[{index}]"
        options: list[tuple[str, dict[str, Any], str]] = []
        if isinstance(request.get("exactly"), dict):
            options.append((name, request["exactly"], f"{where}.exactly"))
        for sub_index, sub in enumerate(as_list(request.get("firstAvailable"))):
            sub = as_dict(sub)
            options.append((f"{name}/{sub.get('name') or sub_index}", sub, f"{where}.firstAvailable[{sub_index}]"))
        built = []
        for option_name, body, field in options:
            class_name = body.get("deviceClassName")
            class_name = class_name if isinstance(class_name, str) else None
            class_object = classes.get(class_name) if class_name is not None else None
            expressions = list(_selector_expressions(body.get("selectors"), claim, f"{field}.selectors"))
            if class_object is not None:
                expressions += _selector_expressions(
                    as_dict(class_object.props.get("spec")).get("selectors"), class_object, "spec.selectors"
                )
            built.append(DeviceRequest(claim, option_name, field, class_name, class_object, tuple(expressions)))
        if built:
            found.append(built)
    return found


@dataclass
class ClaimIndex:
    """The stack's DeviceClasses, ResourceClaims and ResourceClaimTemplates, by name (claims by namespace too)."""

    classes: dict[str, Resource]
    claims: dict[tuple[str, str, str], Resource]

    @classmethod
    def of(cls, resources: list[Resource]) -> ClaimIndex:
        """Index the DRA objects of a stack."""
        classes: dict[str, Resource] = {}
        claims: dict[tuple[str, str, str], Resource] = {}
        for resource in resources:
            name = resource.metadata.get("name")
            if not isinstance(name, str):
                continue
            if is_dra_object(resource, "DeviceClass"):
                classes[name] = resource
            elif is_dra_object(resource, "ResourceClaim") or is_dra_object(resource, "ResourceClaimTemplate"):
                namespace = resource.metadata.get("namespace")
                claims[(resource.kind, namespace if isinstance(namespace, str) else "", name)] = resource
        return cls(classes, claims)

    def pod_claims(self, workload: Resource, pod: dict[str, Any]) -> Iterator[tuple[str, Resource]]:
        """(the pod's claim entry name, the claim or template object in the stack) for each claim it can find."""
        namespace = workload.metadata.get("namespace")
        namespace = namespace if isinstance(namespace, str) else ""
        for entry in as_list(pod.get("resourceClaims")):
            entry = as_dict(entry)
            for field, kind in (
                ("resourceClaimTemplateName", "ResourceClaimTemplate"),
                ("resourceClaimName", "ResourceClaim"),
            ):
                name = entry.get(field)
                found = self.claims.get((kind, namespace, name)) if isinstance(name, str) else None
                if found is None and isinstance(name, str):
                    # An object without a namespace lands in the provider's default one: matched by name.
                    found = next(
                        (
                            c
                            for (k, ns, n), c in self.claims.items()
                            if k == kind and n == name and "" in (ns, namespace)
                        ),
                        None,
                    )
                if found is not None:
                    yield str(entry.get("name")), found
