"""The one version reader: SemVer 2.0 versions as charts, clusters, kubelets and host tools write them.

Why not a library: `packaging.version` reads PEP 440, which refuses SemVer pre-releases such as `1.0.0-alpha.beta`
and the `-eks-3025e55` builds EKS kubelets report; `semver` reads `-eks-...` as a pre-release (below its release)
and is not among the pack's requirements. This module is standard library only, so the pack stays publishable on
its own and the host check (which runs with a bare `python3 -S` and already imports this vocabulary) reads tool
output through it too.

Reading rules:
- `v` may lead (Helm, Kubernetes); `partial=True` also reads `MAJOR.MINOR` (EKS reports `1.34`), patch 0;
- a pre-release (`-rc.1`) orders below its release, identifiers compared as SemVer 2.0 says;
- a Kubernetes distribution build (`-eks-3025e55`, `-gke.100`) and `+build` metadata are builds of the
  release: they do not order, so `v1.34.2-eks-abc` meets a 1.34.2 floor.
"""

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, List, Optional, Tuple, Union

if TYPE_CHECKING:
    from typing import Final

_NUMBER: "Final" = r"(?:0|[1-9][0-9]*)"
_IDENTIFIER: "Final" = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD: "Final" = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
SEMVER: "Final" = re.compile(
    rf"v?(?P<major>{_NUMBER})\.(?P<minor>{_NUMBER})\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<pre>{_IDENTIFIER}(?:\.{_IDENTIFIER})*))?(?:\+(?P<build>{_BUILD}))?",
    re.ASCII,
)
"""An exact SemVer 2.0 version, optionally v-prefixed (group `pre`: the pre-release, `build`: the metadata)."""
_LOOSE: "Final" = re.compile(
    r"v?(?P<major>[0-9]{1,6})\.(?P<minor>[0-9]{1,6})(?:\.(?P<patch>[0-9]{1,6}))?"
    r"(?:[-~](?P<pre>[0-9A-Za-z.~_-]{0,100}))?(?:\+(?P<build>[0-9A-Za-z.+~_-]{0,100}))?",
    re.ASCII,
)
"""What clusters and tools report (`2.0.5-1`, `1.7.27-0ubuntu1~24.04.1`, `v1.31.9+k3s1`); patch optional (partial)."""
_DISTRIBUTION_BUILD: "Final" = re.compile(r"(?:eks|gke|aks)[-.][0-9A-Za-z.-]+", re.ASCII)
"""A Kubernetes distribution's build suffix: it names a build of the release, not a pre-release."""
_IN_TEXT: "Final" = re.compile(r"\bv?[0-9]{1,6}\.[0-9]{1,6}\.[0-9]{1,6}(?:[-~+][0-9A-Za-z.]+)?", re.ASCII)
"""A version inside a tool's `--version` output."""


@dataclass(frozen=True)
class Version:
    """A parsed version; `<` and `sorted` follow SemVer 2.0 precedence (builds never order)."""

    major: int
    minor: int
    patch: int
    prerelease: Tuple[Union[int, str], ...] = ()
    build: str = field(default="", compare=False)

    @property
    def release(self) -> Tuple[int, int, int]:
        """(major, minor, patch): what a floor compares."""
        return self.major, self.minor, self.patch

    def key(self) -> Tuple[Tuple[int, int, int], int, Tuple[Tuple[int, Union[int, str]], ...]]:
        """The sort key: release, then a release above its pre-releases, then identifiers (numbers first)."""
        identifiers = tuple((0, p) if isinstance(p, int) else (1, p) for p in self.prerelease)
        return self.release, 0 if self.prerelease else 1, identifiers

    def __lt__(self, other: "Version") -> bool:
        return self.key() < other.key()

    def __le__(self, other: "Version") -> bool:
        return self.key() <= other.key()

    def __gt__(self, other: "Version") -> bool:
        return self.key() > other.key()

    def __ge__(self, other: "Version") -> bool:
        return self.key() >= other.key()

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(str(p) for p in self.prerelease)
        return f"{text}+{self.build}" if self.build else text


def _identifiers(text: str) -> Tuple[Union[int, str], ...]:
    return tuple(int(p) if p.isdigit() else p for p in text.split("."))


def _build(match: "re.Match[str]") -> Version:
    pre, build = match["pre"] or "", match["build"] or ""
    if pre and _DISTRIBUTION_BUILD.fullmatch(pre):
        pre, build = "", f"{pre}+{build}" if build else pre
    major, minor, patch = int(match["major"]), int(match["minor"]), int(match["patch"] or 0)
    return Version(major, minor, patch, _identifiers(pre) if pre else (), build)


def parse_exact(text: object) -> Optional[Version]:
    """An exact SemVer 2.0 version (what a chart pin must be), whole string; None otherwise."""
    if not isinstance(text, str):
        return None
    found = SEMVER.fullmatch(text)
    return _build(found) if found else None


CEL_NUMBER_MAX: "Final" = 2**64 - 1
"""blang/semver reads each number with strconv.ParseUint(s, 10, 64)."""


def parse_cel_semver(text: object) -> Optional[Version]:
    """What Kubernetes' CEL `semver("...")` parses, whole string; None for what it refuses.

    Source: k8s.io/apiserver/pkg/cel/library/semverlib.go builds `semver()` on github.com/blang/semver/v4's
    `semver.Parse` — strict SemVer 2.0: three numbers without leading zeros, no `v`, a pre-release
    (`580.0.0-rc.1`, ordered below its release) and build metadata allowed, each number fitting a uint64.
    """
    if not isinstance(text, str) or text.startswith("v"):
        return None
    found = parse_exact(text)
    if found is None:
        return None
    numbers = [*found.release, *(p for p in found.prerelease if isinstance(p, int))]
    return found if all(n <= CEL_NUMBER_MAX for n in numbers) else None


def parse(text: object, *, partial: bool = False) -> Optional[Version]:
    """A reported version, whole string (`v1.34.4-eks-3025e55`, `2.0.5-1`); `partial` also takes `1.34`."""
    if not isinstance(text, str) or len(text) > 256:
        return None
    found = _LOOSE.fullmatch(text)
    if found is None or (found["patch"] is None and not partial):
        return None
    return _build(found)


def find(text: str) -> Optional[str]:
    """The first MAJOR.MINOR.PATCH version in a tool's output, as written there less a leading v; None if none."""
    found = _IN_TEXT.search(text)
    if found is None or parse(found[0]) is None:
        return None
    return found[0][1:] if found[0].startswith("v") else found[0]


def search(text: str) -> Optional[Version]:
    """The first version in a tool's output (`NVIDIA Container Toolkit CLI version 1.17.8`), parsed."""
    found = find(text)
    return parse(found) if found else None


def newest(versions: List[str]) -> str:
    """The highest of version strings by SemVer precedence (a release above its pre-releases); unparsed lowest."""
    floor = Version(-1, -1, -1)
    return max(versions, key=lambda v: (parse(v) or floor).key())
