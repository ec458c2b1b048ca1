"""Names from the command line and from records, checked against their Kubernetes grammar before any use.

A name is pasted into an API path (`/api/v1/nodes/NAME`), a label or a file path. Unchecked, `NODE/status` reaches
the Node's status subresource (the cordon does nothing there), `..` walks up a path and `.` names a collection.
So every name a day-2 command takes is full-matched here first, with its grammar's lengths (the vocabulary's
grammar is the one home of those rules), and `kubeclient.segment` refuses anything that is not a name at all.
"""

from __future__ import annotations

from typing import Final

from policy.gpu_allocation.vocab.grammar import is_dns_label, is_dns_subdomain
from policy.gpu_allocation.vocab.labels import PROJECT
from policy.gpu_allocation.vocab.stack_files import STACK_REF_RULE, stack_parts

BAD_NAME_EXIT_CODE: Final = 2
"""What a command exits with when a name it was given is not one: a usage error, like argparse's own."""

SUBDOMAIN_RULE: Final = "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', at most 253 characters"
LABEL_RULE: Final = "a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters"


class NameRefused(ValueError):
    """A name that is not one of its kind; the message names where it came from, the value and the rule."""


def shown(value: object) -> str:
    """The value as it may be printed: quoted, control characters escaped, at most 80 characters."""
    text = repr(value) if isinstance(value, str) else f"{type(value).__name__} {value!r}"
    return text if len(text) <= 80 else text[:77] + "..."


def _refuse(where: str, value: object, kind: str, rule: str, fix: str) -> NameRefused:
    return NameRefused(f"{where} {shown(value)} is not a {kind} ({rule}): {fix}")


def node_name(value: object, where: str = "NODE") -> str:
    """A Node's name (DNS-1123 subdomain), or NameRefused."""
    if not is_dns_subdomain(value):
        raise _refuse(where, value, "node name", SUBDOMAIN_RULE, "pass the name as `kubectl get nodes` prints it")
    return str(value)


def object_name(value: object, where: str) -> str:
    """A namespaced object's name (ConfigMap, Pod, DaemonSet: DNS-1123 subdomains), or NameRefused."""
    if not is_dns_subdomain(value):
        fix = "pass the object's name as kubectl shows it"
        raise _refuse(where, value, "Kubernetes object name", SUBDOMAIN_RULE, fix)
    return str(value)


def namespace_name(value: object, where: str = "--namespace") -> str:
    """A namespace's name (DNS-1123 label), or NameRefused."""
    if not is_dns_label(value):
        raise _refuse(where, value, "namespace name", LABEL_RULE, "pass the namespace as `kubectl get ns` prints it")
    return str(value)


def cohort_name(value: object, where: str = "--cohort") -> str:
    """A cohort's name, as the stack config's grammar has it (DNS-1123 label), or NameRefused."""
    if not is_dns_label(value):
        raise _refuse(where, value, "cohort name", LABEL_RULE, "pass a cohort as named in the stack's config")
    return str(value)


def stack_name(value: object, where: str = "--stack") -> str:
    """A Pulumi stack's name as the Pulumi CLI takes it (`prod`, `myorg/prod`, `myorg/PROJECT/prod`), or NameRefused.

    Its last segment is the NAME of stacks/Pulumi.NAME.yaml; a project segment must be this project's.
    """
    parts = stack_parts(value) if isinstance(value, str) else None
    if parts is None:
        raise _refuse(where, value, "stack name", STACK_REF_RULE, "pass NAME of stacks/Pulumi.NAME.yaml (or ORG/NAME)")
    project = parts[1]
    if project is not None and project != PROJECT:
        msg = (
            f"{where} {shown(value)} names project {project!r}, but this program's project is {PROJECT!r} "
            f"(Pulumi.yaml): pass {parts[0]}/{PROJECT}/{parts[2]} or {parts[0]}/{parts[2]}"
        )
        raise NameRefused(msg)
    return str(value)


def configmap_ref(value: object, where: str = "--ledger") -> tuple[str, str]:
    """NAMESPACE/NAME of a ConfigMap, each part checked, or NameRefused."""
    if not isinstance(value, str) or value.count("/") != 1:
        msg = f"{where} {shown(value)} is not NAMESPACE/NAME: pass it as e.g. kube-system/gpu-allocation-ledger"
        raise NameRefused(msg)
    namespace, name = value.split("/")
    return namespace_name(namespace, f"the namespace of {where}"), object_name(name, f"the name of {where}")
