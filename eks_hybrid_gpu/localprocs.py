"""The processes of a local cluster's state directory: found by version, started detached, logged, checked by pid.

Each process writes `<name>.log` and `<name>.pid` in the state directory, so a later command (`local down`,
`local status`) finds it without holding a handle to it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from eks_hybrid_gpu.localpaths import kube_dirs


class LocalClusterError(RuntimeError):
    """The local control plane could not be started or reached."""


def progress(message: str) -> None:
    """One progress line on stderr, so that a long start is never silent."""
    print(f"[local-cluster] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    """A loopback port free now (the process started next binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def kube_bin_dir(version: str) -> Path:
    """The bin directory of the built Kubernetes whose minor is `version`'s (`1.37`, `1.37.2`, `v1.34.4`)."""
    wanted = ".".join(version.removeprefix("v").split(".")[:2])
    built = kube_dirs()
    matches = sorted(v for v in built if ".".join(v.removeprefix("v").split(".")[:2]) == wanted)
    if not matches:
        have = ", ".join(sorted(built)) or "none"
        msg = (
            f"Kubernetes {version} is not built (built: {have}); add its version to KUBE_VERSIONS in "
            "scripts/toolchain-versions.env and run scripts/toolchain.sh, or declare a built one in "
            "cluster.kubernetesVersion"
        )
        raise LocalClusterError(msg)
    return built[matches[-1]]


def binary(name: str, bin_dir: Path | None = None) -> str:
    """`name` from the asked version's bin directory, never another version's from PATH; else from PATH."""
    if bin_dir is not None:
        if not (bin_dir / name).is_file():
            msg = (
                f"{name} is not in {bin_dir}, the asked Kubernetes version's bin directory; run `scripts/toolchain.sh`"
            )
            raise LocalClusterError(msg)
        return str(bin_dir / name)
    found = shutil.which(name)
    if found is None:
        msg = f"{name} is not on PATH; run `scripts/toolchain.sh` and put its bin directories on PATH"
        raise LocalClusterError(msg)
    return found


def start_process(state: Path, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> None:
    """Start `argv` detached, its output in `<name>.log` and its pid in `<name>.pid`."""
    log = (state / f"{name}.log").open("wb")
    # A new session, so the process outlives the command that started it (`local up`) until `local down`.
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)  # noqa: S603
    (state / f"{name}.pid").write_text(str(process.pid))


def log_tail(path: Path, lines: int = 20) -> str:
    """The last lines of a process's log, for the error that says why it stopped."""
    if not path.exists():
        return "<no log>"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def recorded_pid(state: Path, name: str) -> int | None:
    """The pid a process of the state directory was started with, alive or not."""
    pid_file = state / f"{name}.pid"
    return int(pid_file.read_text()) if pid_file.exists() else None


def pid_of(state: Path, name: str) -> int | None:
    """The pid of one of the cluster's processes (`PROCESSES`) while it runs; None when it does not."""
    return recorded_pid(state, name) if alive(state, name) else None


def alive(state: Path, name: str) -> bool:
    """Whether the recorded process still runs."""
    pid = recorded_pid(state, name)
    if pid is None:
        return False
    try:  # reap it if it is our own exited child, which would otherwise linger as a zombie
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
