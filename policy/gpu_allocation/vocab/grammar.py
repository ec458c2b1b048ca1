"""The value grammars the program's config validation and the pack's rules both apply: one home for each.

Every pattern is matched whole (`fullmatch`) and ASCII only, so a trailing newline or a non-ASCII digit is
never a valid name, version or quantity. Where Kubernetes bounds a length, the `is_*` functions bound it too:
a pattern alone would accept a 300-character namespace.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

from . import versioning

DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)
"""RFC 1123 label (lengths: `is_dns_label`)."""
DNS_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
"""RFC 1123 subdomain (lengths: `is_dns_subdomain`)."""
LABEL_KEY: Final = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
"""A label key's shape (lengths and the prefix's subdomain rule: `is_label_key`)."""
LABEL_VALUE: Final = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?", re.ASCII)
"""A label value's shape, empty allowed (length: `is_label_value`)."""

EXACT_VERSION: Final = versioning.SEMVER
"""An exact SemVer 2.0 version, optionally with a leading v (Helm accepts both): no range, no wildcard."""
KUBERNETES_VERSION: Final = re.compile(
    r"v?(?P<major>[0-9]{1,3})\.(?P<minor>[0-9]{1,3})(\.(?P<patch>[0-9]{1,4}))?([-+][0-9A-Za-z.+-]{1,64})?", re.ASCII
)
"""A Kubernetes version as clusters report it: 1.34, 1.34.4, v1.34.2-eks-4f9d2c1."""

_DOMAIN_PART: Final = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_IMAGE_DOMAIN: Final = rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]{{1,5}})?"
_IMAGE_PATH: Final = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
DIGEST_IMAGE: Final = re.compile(
    rf"(?P<name>{_IMAGE_DOMAIN}/{_IMAGE_PATH}(?:/{_IMAGE_PATH})*|{_IMAGE_PATH}(?:/{_IMAGE_PATH})*)"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})",
    re.ASCII,
)
"""An image reference pinned by digest: name[:tag]@sha256:<64 hex> or @sha512:<128 hex>, lower-case.

The two algorithms the OCI image spec registers (opencontainers/image-spec ``descriptor.md``, "Registered
algorithms"); containerd and the registries resolve either, so either pins the image."""
OCI_CHART: Final = re.compile(rf"oci://{_IMAGE_DOMAIN}(?:/{_IMAGE_PATH})+", re.ASCII)
"""An OCI chart reference: oci://host[:port]/path/chart."""
HELM_REPO_URL: Final = re.compile(
    r"https?://(?P<userinfo>[A-Za-z0-9._~%!$&'()*+,;=:-]+@)?"
    rf"{_IMAGE_DOMAIN}(?P<path>/[A-Za-z0-9._~%!$&'()*+,;=:@/-]*)?",
    re.ASCII,
)
"""A Helm repository URL: http(s)://[user:password@]host[:port][/path]."""
FEATURE_GATE: Final = re.compile(r"[A-Z][A-Za-z0-9]{0,99}", re.ASCII)
"""A feature-gate name: an upper-camel-case identifier such as DynamicMIG."""
EKS_CLUSTER_NAME: Final = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}", re.ASCII)
AWS_REGION: Final = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}", re.ASCII)
KUBE_CONTEXT: Final = re.compile(r"[A-Za-z0-9@:._/+=-]{1,253}", re.ASCII)
AWS_PROFILE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+=,@-]{0,127}", re.ASCII)
"""A named profile of ~/.aws/config as a command line passes it (`--profile`): no spaces, quotes or slashes."""
IAM_ROLE_ARN: Final = re.compile(
    r"arn:aws(?:-cn|-us-gov|-iso|-iso-[a-z])?:iam::[0-9]{12}:role/(?:[A-Za-z0-9_+=,.@-]+/)*[A-Za-z0-9_+=,.@-]{1,64}",
    re.ASCII,
)
"""An IAM role's ARN, path included: arn:aws:iam::123456789012:role/gpu-admin."""
"""A kubeconfig context name as tools write them (EKS: arn:aws:eks:<region>:<account>:cluster/<name>)."""
MIG_PROFILE: Final = re.compile(r"[1-8]g\.[0-9]{1,4}gb(\+me)?", re.ASCII)
"""A MIG profile name as nvidia-smi prints it: 1g.5gb, 1g.10gb+me."""

QUANTITY: Final = re.compile(
    r"(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE](?P<exp>[+-]?[0-9]+))?"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?",
    re.ASCII,
)
"""The one Kubernetes quantity grammar (resource.Quantity), used by the config and the pack."""
_SUFFIXES: Final[Mapping[str, Fraction]] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}

DNS_LABEL_MAX: Final = 63
DNS_SUBDOMAIN_MAX: Final = 253
LABEL_NAME_MAX: Final = 63
PATH_MAX: Final = 4096
PATH_COMPONENT_MAX: Final = 255


def _whole(pattern: re.Pattern[str], value: object) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def is_dns_label(value: object, max_length: int = DNS_LABEL_MAX) -> bool:
    """An RFC 1123 label of at most `max_length` characters (63 by default)."""
    return _whole(DNS_LABEL, value) and len(str(value)) <= max_length


def is_dns_subdomain(value: object) -> bool:
    """An RFC 1123 subdomain of at most 253 characters, each label at most 63."""
    return (
        _whole(DNS_SUBDOMAIN, value)
        and len(str(value)) <= DNS_SUBDOMAIN_MAX
        and all(len(part) <= DNS_LABEL_MAX for part in str(value).split("."))
    )


def is_label_key(value: object) -> bool:
    """A Kubernetes label key: optional DNS-subdomain prefix and '/', then a name of at most 63 characters."""
    if not isinstance(value, str) or not LABEL_KEY.fullmatch(value):
        return False
    prefix, _, name = value.rpartition("/")
    return len(name) <= LABEL_NAME_MAX and (not prefix or is_dns_subdomain(prefix))


def is_label_value(value: object) -> bool:
    """A Kubernetes label value: empty, or at most 63 characters of the label-name alphabet."""
    return _whole(LABEL_VALUE, value) and len(str(value)) <= LABEL_NAME_MAX


def is_exact_version(value: object) -> bool:
    """An exact SemVer version (optionally v-prefixed): what a chart pin must be."""
    return _whole(EXACT_VERSION, value)


def is_digest_image(value: object) -> bool:
    """An image reference pinned by a registered OCI digest (sha256, sha512), its name at most 255 characters."""
    if not isinstance(value, str):
        return False
    match = DIGEST_IMAGE.fullmatch(value)
    return match is not None and len(match["name"]) <= 255


def is_oci_chart(value: object) -> bool:
    """An oci:// chart reference."""
    return _whole(OCI_CHART, value) and len(str(value)) <= 2048


def is_helm_repo_url(value: object) -> bool:
    """An http(s) Helm repository URL."""
    return _whole(HELM_REPO_URL, value) and len(str(value)) <= 2048


def url_has_credentials(value: str) -> bool:
    """Whether a repository URL carries user:password@ (which must then travel as a secret)."""
    match = HELM_REPO_URL.fullmatch(value)
    return match is not None and match["userinfo"] is not None


def is_quantity(value: object) -> bool:
    """A Kubernetes quantity string, exactly as the API server parses it (no surrounding spaces)."""
    return _whole(QUANTITY, value) and len(str(value)) <= 64


def is_path(value: object) -> bool:
    """A file path the OS can open: no NUL or line break, at most 4096 characters, components at most 255."""
    if not isinstance(value, str) or not value or len(value) > PATH_MAX:
        return False
    if any(ch in value for ch in "\x00\n\r"):
        return False
    return all(len(part.encode()) <= PATH_COMPONENT_MAX for part in value.split("/"))


def parse_quantity(value: Any) -> Fraction | None:
    """Parse a Kubernetes quantity (number or string); None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in {float("inf"), float("-inf")}:
            return None
        return Fraction(value)
    if not isinstance(value, str):
        return None
    match = QUANTITY.fullmatch(value.strip())
    if match is None:
        return None
    number = Fraction(match["num"])
    if match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > 30:
            return None
        number *= Fraction(10) ** exponent
    return number * _SUFFIXES[match["suffix"] or ""]
