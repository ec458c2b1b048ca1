"""How a day-2 command reaches its cluster: the shared options, the local default's fallback, one exit per refusal.

The client itself (requests, paging, watches, the error map) is the cluster layer's, `cluster.client`; what is here
belongs to the command line: `--kubeconfig/--context/--request-timeout/--namespace`, `$KUBECONFIG` (every file of
its list, merged as kubectl merges them), the notice when the local default's cluster is used because nothing else
was named, the line said while a request waits, and the exit code each kind of refusal gets.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from cluster.client.errors import KubeAccessError, KubeApiError, cannot_read
from cluster.client.kube_http import DEFAULT_REQUEST_SECONDS
from cluster.client.kubeclient import Kube, open_cluster
from cluster.client.kubeconfig import Source
from cluster.client.names import BAD_NAME_EXIT_CODE, NameRefused
from components.config import NamespacesConfig
from eks_hybrid_gpu.localcluster import running_kubeconfig
from eks_hybrid_gpu.localpaths import local_state_dir
from eks_hybrid_gpu.options import USAGE_EXIT_CODE, UsageError, duration

ACCESS_EXIT_CODE = 2
"""Exit code of a command that cannot read the cluster: no usable kubeconfig, no answer, refused credentials, an
answer that is no API server's, a server unavailable (5xx, 429) or a list that expired twice. Never a command's
verdict: `inspect` exits 1 for a GPU conflict, and 2 only when it could not judge."""
WORKLOADS_NAMESPACE: str = NamespacesConfig.model_fields["workloads"].default
"""The stack config's default workloads namespace: where the smoke Jobs and the claim template live."""


def request_timeout(text: str) -> float | None:
    """`--request-timeout` as kubectl reads it: a duration (`30s`, `2m`; a bare number is seconds), or 0 for none."""
    if re.fullmatch(r"0+(?:\.0+)?(?:ms|s|m|h)?", text.strip(), re.ASCII):
        return None
    return duration(text)


def add_cluster_options(
    parser: argparse.ArgumentParser,
    kubeconfig_help: str = "default: $KUBECONFIG (its files merged, as kubectl merges them) or ~/.kube/config",
) -> None:
    """--kubeconfig, --context and --request-timeout, the same for every command that reads a cluster."""
    parser.add_argument("--kubeconfig", help=kubeconfig_help)
    parser.add_argument("--context", help="default: the kubeconfig's current context")
    add_request_timeout_option(parser)


def add_request_timeout_option(parser: argparse.ArgumentParser) -> None:
    """--request-timeout, as kubectl's: how long one API request may wait for its answer."""
    parser.add_argument(
        "--request-timeout",
        type=request_timeout,
        default=DEFAULT_REQUEST_SECONDS,
        metavar="DURATION",
        help="how long one request to the API server may wait for its answer, as 30s or 2m; 0: no limit "
        f"(default {DEFAULT_REQUEST_SECONDS:g}s)",
    )


def add_namespace_option(parser: argparse.ArgumentParser, holds: str) -> None:
    """--namespace, defaulting to the stack config's workloads namespace; `holds` says what is read there."""
    parser.add_argument("--namespace", default=WORKLOADS_NAMESPACE, help=f"namespace of {holds}")


def request_timeout_flag(seconds: float | None) -> str | None:
    """The `--request-timeout` value of a rerun line: None for the default (left out), `0` for no limit."""
    if seconds == DEFAULT_REQUEST_SECONDS:
        return None
    return "0" if seconds is None else f"{seconds:g}s"


def kubeconfig_files() -> tuple[str, ...]:
    """Where kubectl looks: every file of $KUBECONFIG's list (os.pathsep between them), else ~/.kube/config."""
    listed = tuple(p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p)
    return listed or (str(Path.home() / ".kube" / "config"),)


def default_kubeconfig() -> str:
    """$KUBECONFIG's first file, else ~/.kube/config (a command that needs one file, not the merged list)."""
    return kubeconfig_files()[0]


def _is_file(path: str) -> bool:
    """Whether `path` is a file; a name the file system refuses (too long) is none."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def say_waiting(line: str) -> None:
    """The line a command prints while a request to the API server has not been answered for a while."""
    print(line, file=sys.stderr, flush=True)


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    request_timeout: float | None = DEFAULT_REQUEST_SECONDS,
    *,
    say_waits: bool = True,
) -> Kube:
    """A client for the kubeconfig's context; a missing or unusable kubeconfig is a KubeAccessError.

    `kubeconfig` is one file (`--kubeconfig`, as kubectl's); without it, $KUBECONFIG's files are merged as kubectl
    merges them, and `context` may come from any of them. With no --kubeconfig, no $KUBECONFIG and no
    ~/.kube/config, the local default's cluster is used, and the command says so. Each request waits
    `request_timeout` seconds for its answer (None: no limit), and one still waiting after a few seconds is said
    on stderr (not with `say_waits=False`: a background process such as the simulated device manager).
    """
    files = (kubeconfig,) if kubeconfig else kubeconfig_files()
    if kubeconfig is None and not os.environ.get("KUBECONFIG") and not _is_file(files[0]):
        local = running_kubeconfig(local_state_dir())
        if local is not None:
            print(
                f"using the local default's cluster ({local}, from `eks-hybrid-gpu local up`): no --kubeconfig, "
                f"$KUBECONFIG or {files[0]}",
                file=sys.stderr,
            )
            files = (str(local),)
    single = len(files) == 1
    source = Source(files[0], context=context) if single else Source(None, context=context, kubeconfig_files=files)
    return open_cluster(source, request_timeout, say_waiting if say_waits else None)


def run_reporting(
    command: str,
    body: Callable[[], int],
    refusals: tuple[type[Exception], ...] = (),
    answers: tuple[type[Exception], ...] = (KubeApiError,),
    *,
    reads_only: bool = False,
) -> int:
    """Run a day-2 command's `body`, turning what stopped it into one line on stderr and the exit code.

    A name that is none (NameRefused) or an argument that cannot be used (UsageError) exits 2, as argparse does.
    Not reading the cluster (a KubeAccessError, or an answer `errors.cannot_read` says is no reading: 5xx, 429, a
    list expired twice) exits ACCESS_EXIT_CODE; so does any API answer the command did not expect when it only
    reads (`reads_only`: nothing it reports could be judged). One of the command's own `refusals`, whose message
    says what to do, exits 1 with it; another API answer the command did not expect (`answers`) exits 1.
    """
    try:
        return body()
    except KubeAccessError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return ACCESS_EXIT_CODE
    except NameRefused as error:
        print(f"{command}: {error}", file=sys.stderr)
        return BAD_NAME_EXIT_CODE
    except UsageError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except refusals as error:
        print(f"{command}: {error}", file=sys.stderr)
        return 1
    except answers as error:
        if isinstance(error, KubeApiError) and (reads_only or cannot_read(error)):
            where = f" ({error.where})" if error.where else ""
            print(f"{command}: cannot read the cluster{where}: {error.status} {error.message}", file=sys.stderr)
            return ACCESS_EXIT_CODE
        print(f"{command}: the API server answered {error}", file=sys.stderr)
        return 1
