"""Pull a pinned chart archive from upstream into the user cache, once, and keep the cache a chart mirror.

Upstream is the chart's Helm repository (its index.yaml over HTTP(S), no helm needed) or OCI registry (`helm pull`,
helm from PATH or the dev dependencies). `EKS_HYBRID_GPU_CHART_UPSTREAM` names one Helm repository that stands in
for every chart's upstream: an internal proxy, or the tests' loopback server. The cache folder
(`$EKS_HYBRID_GPU_CACHE/charts`, default ~/.cache/eks-hybrid-gpu/charts) holds `<chart>-<version>.tgz` and an
index.yaml, so it can be served as a Helm repository like any mirror. Digests are checked by the caller
(eks_hybrid_gpu.chartmirror) before an archive is kept.

Every download goes through the proxy the environment names, as curl and requests read it: `https_proxy` /
`HTTPS_PROXY` for https, `http_proxy` / `HTTP_PROXY` for http (the lower-case name first), `all_proxy` for either,
and none for a host that `no_proxy` / `NO_PROXY` lists (`*`, a domain and its subdomains, `host:port`, an address or
a CIDR range). `helm pull` reads the same variables itself.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlparse

import yaml

from components.chart_archive import chart_metadata
from eks_hybrid_gpu import helmbin

UPSTREAM_ENV = "EKS_HYBRID_GPU_CHART_UPSTREAM"
REACH_TIMEOUT_SECONDS = 3.0
"""A TCP connect first, to the proxy when one applies, else to the upstream host: an offline machine fails in
seconds, not a download timeout."""
FETCH_TIMEOUT_SECONDS = 20.0
INDEX_MAX_BYTES = 64 << 20
ARCHIVE_MAX_BYTES = 64 << 20


class FetchError(Exception):
    """The archive could not be pulled; the message names the URL and why."""


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The user cache's chart folder: `$EKS_HYBRID_GPU_CACHE/charts`, else `$XDG_CACHE_HOME/eks-hybrid-gpu/charts`."""
    root = environ.get("EKS_HYBRID_GPU_CACHE") or str(
        Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "eks-hybrid-gpu"
    )
    return Path(root) / "charts"


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def upstream_of(upstream: str, environ: Mapping[str, str] = os.environ) -> str:
    """The location to pull from: the stand-in repository when set, else the chart's own upstream."""
    return environ.get(UPSTREAM_ENV) or upstream


def proxies_of(environ: Mapping[str, str]) -> dict[str, str]:
    """Scheme -> proxy URL, and `no` -> the bypass list, as urllib reads them: the lower-case name wins."""
    found: dict[str, str] = {}
    for lower_only in (False, True):
        for name, value in environ.items():
            if not name.lower().endswith("_proxy") or (lower_only and name != name.lower()):
                continue
            key = name.lower().removesuffix("_proxy")
            if value:
                found[key] = value
            elif lower_only:
                found.pop(key, None)
    return found


def bypassed(url: str, no_proxy: str) -> bool:
    """Whether `no_proxy` (comma-separated, as curl and requests read it) names the URL's host."""
    parsed = urlparse(url)
    host = (parsed.hostname or "").lower()
    try:
        port = parsed.port
    except ValueError:
        port = None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
        name, _, entry_port = entry.lstrip(".").partition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and port is not None and entry_port != str(port):
            continue
        if host == name.strip("[]") or host.endswith("." + name):
            return True
    return False


def proxy_for(url: str, environ: Mapping[str, str]) -> str | None:
    """The proxy a download of `url` goes through (None: direct), from the environment as curl reads it."""
    proxies = proxies_of(environ)
    scheme = urlparse(url).scheme
    chosen = proxies.get("http" if scheme == "http" else "https") or proxies.get("all")
    if not chosen or bypassed(url, proxies.get("no", "")):
        return None
    return chosen if "://" in chosen else f"http://{chosen}"


def shown(proxy: str) -> str:
    """A proxy URL as a message prints it: without its password."""
    parsed = urlparse(proxy)
    if parsed.password is None:
        return proxy
    return proxy.replace(f":{parsed.password}@", ":***@", 1)


def _probe(location: str, environ: Mapping[str, str]) -> None:
    """FetchError when no TCP connection opens within REACH_TIMEOUT_SECONDS.

    The connection is to the proxy that applies to the location (the proxy reaches the upstream), else to the
    location's host and port.
    """
    proxy = proxy_for(location, environ)
    target = proxy or location
    parsed = urlparse(target)
    default = 80 if parsed.scheme == "http" else 443
    try:
        port = parsed.port or default
    except ValueError:
        port = default
    if not parsed.hostname:
        msg = f"{shown(target)} names no host"
        raise FetchError(msg)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=REACH_TIMEOUT_SECONDS):
            return
    except OSError as error:
        via = f" through the proxy {shown(proxy)}: the proxy" if proxy else ""
        msg = f"{location} cannot be reached{via} ({error.strerror or error})"
        raise FetchError(msg) from None


def _opener(url: str, environ: Mapping[str, str]) -> tuple[urllib.request.OpenerDirector, str | None]:
    """An opener through the proxy for `url` (CONNECT for https, `user:password@` as Basic auth), or direct."""
    proxy = proxy_for(url, environ)
    handler = urllib.request.ProxyHandler({urlparse(url).scheme: proxy} if proxy else {})
    return urllib.request.build_opener(handler), proxy


def _get(url: str, limit: int, environ: Mapping[str, str] = os.environ) -> bytes:
    if urlparse(url).scheme not in ("http", "https"):
        msg = f"{url} is not an http(s) URL"
        raise FetchError(msg)
    opener, proxy = _opener(url, environ)
    via = f" through the proxy {shown(proxy)}" if proxy else ""
    try:
        with opener.open(url, timeout=FETCH_TIMEOUT_SECONDS) as response:
            body: bytes = response.read(limit + 1)
    except urllib.error.HTTPError as error:
        msg = f"{url} answered HTTP {error.code}{via}"
        raise FetchError(msg) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        msg = f"{url} cannot be reached{via} ({reason})"
        raise FetchError(msg) from None
    if len(body) > limit:
        msg = f"{url} is larger than {limit >> 20} MiB"
        raise FetchError(msg)
    return body


def _from_repository(repo: str, chart: str, version: str, target: Path, environ: Mapping[str, str]) -> str:
    """Download the archive that the repository's index.yaml lists for chart@version; returns its URL."""
    index_url = urljoin(repo.rstrip("/") + "/", "index.yaml")
    try:
        index: Any = yaml.safe_load(_get(index_url, INDEX_MAX_BYTES, environ))
    except yaml.YAMLError:
        msg = f"{index_url} is not valid YAML"
        raise FetchError(msg) from None
    entries = (index.get("entries") or {}).get(chart) if isinstance(index, Mapping) else None
    entry = next((e for e in entries or [] if isinstance(e, Mapping) and str(e.get("version")) == version), None)
    urls = entry.get("urls") if entry is not None else None
    if not urls or not isinstance(urls, list):
        msg = f"{index_url} lists no {chart} {version}"
        raise FetchError(msg)
    url = urljoin(index_url, str(urls[0]))
    target.write_bytes(_get(url, ARCHIVE_MAX_BYTES, environ))
    return url


def _from_oci(reference: str, chart: str, version: str, target: Path) -> str:
    """`helm pull oci://… --version V` into a temporary folder; returns the reference pulled."""
    try:
        helm = helmbin.helm()
    except helmbin.HelmMissingError as error:
        msg = f"pulling {reference} needs helm: {error}"
        raise FetchError(msg) from None
    with tempfile.TemporaryDirectory(prefix="eks-hybrid-gpu-pull-") as tmp:
        try:
            done = subprocess.run(  # noqa: S603 (fixed argv, no shell)
                [str(helm), "pull", reference, "--version", version, "--destination", tmp],
                capture_output=True,
                text=True,
                timeout=FETCH_TIMEOUT_SECONDS * 3,
                check=False,
            )
        except subprocess.TimeoutExpired:
            msg = f"helm pull {reference} --version {version} did not finish in {FETCH_TIMEOUT_SECONDS * 3:.0f} s"
            raise FetchError(msg) from None
        pulled = sorted(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or not pulled:
            last = (done.stderr.strip().splitlines() or ["no archive written"])[-1]
            msg = f"helm pull {reference} --version {version} failed: {last}"
            raise FetchError(msg)
        target.write_bytes(pulled[0].read_bytes())
    return f"{reference}:{version}"


def fetch(
    chart: str, version: str, upstream: str, cache: Path, check: Callable[[Path, str], None], environ: Mapping[str, str]
) -> Path:
    """Pull chart@version from upstream into the cache; `check(partial, source)` may refuse it before it is kept.

    Raises FetchError (unreachable, not listed, helm missing) or whatever `check` raises; nothing partial stays.
    """
    location = upstream_of(upstream, environ)
    _probe(location, environ)
    cache.mkdir(parents=True, exist_ok=True)
    final = cache / f"{chart}-{version}.tgz"
    partial = cache / f".{final.name}.partial-{os.getpid()}"
    try:
        if location.startswith("oci://"):
            source = _from_oci(location, chart, version, partial)
        else:
            source = _from_repository(location, chart, version, partial, environ)
        check(partial, source)
        partial.replace(final)
    finally:
        partial.unlink(missing_ok=True)
    write_index(cache)
    return final


def index_document(folder: Path) -> dict[str, Any]:
    """index.yaml of a folder of chart archives, as `helm repo index` writes it (name, version, urls, digest)."""
    entries: dict[str, list[dict[str, Any]]] = {}
    for archive in sorted(folder.glob("*.tgz")):
        try:
            chart = chart_metadata(archive)
        except ValueError:
            continue
        entry = {k: chart[k] for k in ("apiVersion", "name", "version", "appVersion", "description") if k in chart}
        entry.update({"urls": [archive.name], "digest": sha256_of(archive)})
        entries.setdefault(str(chart.get("name")), []).append(entry)
    return {"apiVersion": "v1", "entries": entries}


def write_index(folder: Path) -> Path:
    """Write (atomically) the folder's index.yaml, so the folder serves as a Helm repository."""
    index = folder / "index.yaml"
    partial = folder / f".index.yaml.partial-{os.getpid()}"
    partial.write_text(yaml.safe_dump(index_document(folder), sort_keys=True))
    partial.replace(index)
    return index
