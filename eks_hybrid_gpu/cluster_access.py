"""How a day-2 command reaches its cluster: the shared options, the local default's fallback, one exit per refusal.

The client itself (requests, paging, watches, the error map) is the cluster layer's, `cluster.client`; what is here
belongs to the command line: `--kubeconfig/--context/--namespace`, the notice when the local default's cluster is
used because nothing else was named, and the exit code each kind of refusal gets.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from cluster.client.errors import KubeAccessError, KubeApiError, cannot_read
from cluster.client.kubeclient import Kube, open_cluster
from cluster.client.kubeconfig import Source
from cluster.client.names import BAD_NAME_EXIT_CODE, NameRefused
from components.config import NamespacesConfig
from eks_hybrid_gpu.localcluster import running_kubeconfig
from eks_hybrid_gpu.localpaths import local_state_dir
from eks_hybrid_gpu.options import USAGE_EXIT_CODE, UsageError

ACCESS_EXIT_CODE = 2
"""Exit code of a command that cannot read the cluster: no usable kubeconfig, no answer, refused credentials, an
answer that is no API server's, a server unavailable (5xx, 429) or a list that expired twice. Never a command's
verdict: `inspect` exits 1 for a GPU conflict, and 2 only when it could not judge."""
WORKLOADS_NAMESPACE: str = NamespacesConfig.model_fields["workloads"].default
"""The stack config's default workloads namespace: where the smoke Jobs and the claim template live."""


def add_cluster_options(
    parser: argparse.ArgumentParser, kubeconfig_help: str = "default: $KUBECONFIG or ~/.kube/config"
) -> None:
    """--kubeconfig and --context, the same for every command that reads a cluster."""
    parser.add_argument("--kubeconfig", help=kubeconfig_help)
    parser.add_argument("--context", help="default: the kubeconfig's current context")


def add_namespace_option(parser: argparse.ArgumentParser, holds: str) -> None:
    """--namespace, defaulting to the stack config's workloads namespace; `holds` says what is read there."""
    parser.add_argument("--namespace", default=WORKLOADS_NAMESPACE, help=f"namespace of {holds}")


def default_kubeconfig() -> str:
    """$KUBECONFIG's first file, else ~/.kube/config: where kubectl looks."""
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return first or str(Path.home() / ".kube" / "config")


def _is_file(path: str) -> bool:
    """Whether `path` is a file; a name the file system refuses (too long) is none."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def connect(kubeconfig: str | None = None, context: str | None = None) -> Kube:
    """A client for the kubeconfig's context; a missing or unusable kubeconfig is a KubeAccessError.

    With no --kubeconfig, no $KUBECONFIG and no ~/.kube/config, the local default's cluster is used, and the
    command says so.
    """
    path = kubeconfig or default_kubeconfig()
    if kubeconfig is None and not os.environ.get("KUBECONFIG") and not _is_file(path):
        local = running_kubeconfig(local_state_dir())
        if local is not None:
            print(
                f"using the local default's cluster ({local}, from `eks-hybrid-gpu local up`): no --kubeconfig, "
                f"$KUBECONFIG or {path}",
                file=sys.stderr,
            )
            path = str(local)
    return open_cluster(Source(path, context=context))


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
