"""Can runc start a container on this kernel, and if not, which part of the container's spec stops it?

The first hardware run got as far as a scheduled pod, then every sandbox failed in runc with "can't get final
child's PID from pipe: EOF" — runc's nsexec children died before reporting, which says nothing of why. This module
answers that on the machine itself, standard library only:

- `kernel_namespaces()`: which namespace kinds the kernel lets a child unshare (errno per kind);
- `self_test()`: `runc create` of a minimal bundle (the static pause binary under `runc spec`'s defaults), then
  one variant per namespace without it, so a namespace the kernel refuses is named;
- `oom_score_floor()`: the lowest `oom_score_adj` this process may set. The kubelet asks -998 for every sandbox,
  and lowering it needs CAP_SYS_RESOURCE; where the run is denied that, runc's nsexec dies with "failed to update
  /proc/self/oom_score_adj: Permission denied" (the second hardware run found exactly this);
- `logging_wrapper()`: the `BinaryName` containerd's shim runs instead of runc; it logs each call, keeps every
  bundle's config.json and runc's log, and applies what the checks above proved necessary — namespace kinds the
  kernel refuses dropped, `oomScoreAdj` raised to the floor — each said in the report;
- `replay()`: after a failed sandbox, `runc create` of the spec containerd really wrote, with the self-test's
  rootfs, as it was and then without each part in turn (seccomp, each namespace, rlimits, mounts, …).
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

BASE = Path("/var/lib/hw-runc-check")
ROOT = Path("/run/hw-runc-check")
CAPTURED = Path("/var/log/hw/runc")
ADJUST_FILE = Path("/etc/hw-runc-adjust.json")
CLONE_FLAGS = {
    "mount": 0x00020000,
    "uts": 0x04000000,
    "ipc": 0x08000000,
    "pid": 0x20000000,
    "network": 0x40000000,
    "cgroup": 0x02000000,
    "user": 0x10000000,
    "time": 0x00000080,
}


def kernel_namespaces() -> dict[str, str]:
    """Each namespace kind: "ok" when a forked child may unshare it, else the errno's name."""
    libc = ctypes.CDLL(None, use_errno=True)
    answers: dict[str, str] = {}
    for kind, flag in CLONE_FLAGS.items():
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the child unshares and reports; the parent is never changed
            os.close(read)
            code = 0 if libc.unshare(flag) == 0 else ctypes.get_errno()
            os.write(write, str(code).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            code = int(pipe.read() or "-1")
        os.waitpid(child, 0)
        answers[kind] = "ok" if code == 0 else os.strerror(code) if code > 0 else "no answer"
    return answers


def oom_score_floor() -> int | None:
    """None when a child may lower its oom_score_adj to the kubelet's -998; else the lowest value it keeps."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            Path("/proc/self/oom_score_adj").write_text("-998")
            answer = "ok"
        except OSError:
            answer = Path("/proc/self/oom_score_adj").read_text().strip()
        os.write(write, answer.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = pipe.read().strip()
    os.waitpid(child, 0)
    return None if answer == "ok" else int(answer)


def _bundle(hw: Path) -> Path:
    shutil.rmtree(BASE, ignore_errors=True)
    rootfs = BASE / "rootfs"
    rootfs.mkdir(parents=True)
    shutil.copy(hw / "pause", rootfs / "pause")
    subprocess.run([str(hw / "runc"), "spec", "--bundle", str(BASE)], check=True, capture_output=True)
    return BASE


def create(hw: Path, spec: dict[str, Any], name: str) -> str:
    """`runc create` then `runc delete -f`: "ok", or the tail of runc's own words and its log."""
    (BASE / "config.json").write_text(json.dumps(spec))
    log, out = BASE / f"{name}.log", BASE / f"{name}.out"
    runc = [str(hw / "runc"), "--root", str(ROOT), "--log", str(log)]
    with out.open("wb") as stdio:
        done = subprocess.run(
            [*runc, "create", "--bundle", str(BASE), name],
            stdin=subprocess.DEVNULL,
            stdout=stdio,
            stderr=stdio,
            timeout=30,
            check=False,
        )
    subprocess.run([*runc, "delete", "-f", name], capture_output=True, check=False, timeout=30)
    if done.returncode == 0:
        return "ok"
    words = out.read_text(errors="replace") + (log.read_text(errors="replace") if log.exists() else "")
    return f"exit {done.returncode}: {words[-700:]}"


def _without_namespace(kind: str) -> Callable[[dict[str, Any]], None]:
    def drop(spec: dict[str, Any]) -> None:
        spec["linux"]["namespaces"] = [n for n in spec["linux"].get("namespaces", []) if n["type"] != kind]

    return drop


def _without(section: str | None, key: str) -> Callable[[dict[str, Any]], None]:
    """A change of the spec that drops `key` (of `section`, or of the top level)."""

    def drop(spec: dict[str, Any]) -> None:
        (spec[section] if section else spec).pop(key, None)

    return drop


def _variants(spec: dict[str, Any]) -> list[tuple[str, Callable[[dict[str, Any]], None]]]:
    linux = spec.get("linux", {})
    variants = [
        (f"without the {n['type']} namespace", _without_namespace(n["type"])) for n in linux.get("namespaces", [])
    ]
    for key in ("seccomp", "maskedPaths", "readonlyPaths", "resources", "sysctl", "cgroupsPath", "devices"):
        if key in linux:
            variants.append((f"without linux.{key}", _without("linux", key)))
    for key in ("rlimits", "apparmorProfile", "oomScoreAdj", "capabilities", "noNewPrivileges"):
        if key in spec.get("process", {}):
            variants.append((f"without process.{key}", _without("process", key)))
    if spec.get("hooks"):
        variants.append(("without hooks", _without(None, "hooks")))
    variants.append(("only the proc, dev and sys mounts", _core_mounts))
    return variants


def _core_mounts(spec: dict[str, Any]) -> None:
    spec["mounts"] = [m for m in spec.get("mounts", []) if m.get("destination") in ("/proc", "/dev", "/sys")]


def _try_all(hw: Path, spec: dict[str, Any], prefix: str) -> dict[str, str]:
    results = {"as written": create(hw, spec, f"{prefix}-0")}
    if results["as written"] == "ok":
        return results
    for index, (label, change) in enumerate(_variants(spec), start=1):
        variant = copy.deepcopy(spec)
        change(variant)
        results[label] = create(hw, variant, f"{prefix}-{index}")
    return results


def self_test(hw: Path) -> dict[str, Any]:
    """runc's own default spec on the pause binary; with the namespace kinds whose removal alone makes it start."""
    base = _bundle(hw)
    spec = json.loads((base / "config.json").read_text())
    spec["process"].update({"args": ["/pause"], "terminal": False})
    spec["root"] = {"path": "rootfs", "readonly": True}
    results = _try_all(hw, spec, "selftest")
    fatal = [
        label.split()[2] for label, answer in results.items() if label.startswith("without the ") and answer == "ok"
    ]
    return {"results": results, "fatalNamespaces": fatal}


ADJUST = """import json, sys
path, adjust = sys.argv[1], json.load(open(sys.argv[2]))
spec = json.load(open(path))
drop = adjust.get("dropNamespaces") or []
spec["linux"]["namespaces"] = [n for n in spec["linux"].get("namespaces", []) if n["type"] not in drop]
floor = adjust.get("oomScoreAdjFloor")
if floor is not None and "oomScoreAdj" in spec["process"]:
    spec["process"]["oomScoreAdj"] = max(spec["process"]["oomScoreAdj"], floor)
json.dump(spec, open(path, "w"))
"""
"""What the wrapper does to a bundle's spec before runc reads it, when ADJUST_FILE exists."""


def logging_wrapper(hw: Path, adjust: dict[str, Any]) -> Path:
    """The script containerd's shim runs as runc: logs, keeps each bundle's spec and log, applies `adjust`."""
    CAPTURED.mkdir(parents=True, exist_ok=True)
    (hw.parent / "runc-hw-adjust.py").write_text(ADJUST)
    if adjust:
        ADJUST_FILE.write_text(json.dumps(adjust))
    else:
        with contextlib.suppress(FileNotFoundError):
            ADJUST_FILE.unlink()
    wrapper = hw.parent / "runc-hw-wrapper"
    wrapper.write_text(
        f"""#!/bin/sh
# Written by scripts/hardware/runc_check.py: runs {hw / "runc"} for containerd's shim, keeping what it saw.
echo "$(date +%s.%N) $*" >> {CAPTURED}/calls.log
prev=""; bundle=""; log=""
for a in "$@"; do
  [ "$prev" = "--bundle" ] && bundle="$a"
  [ "$prev" = "--log" ] && log="$a"
  prev="$a"
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
  if [ -f {ADJUST_FILE} ]; then
    python3 {hw.parent / "runc-hw-adjust.py"} "$bundle/config.json" {ADJUST_FILE}
  fi
  cp "$bundle/config.json" "{CAPTURED}/$(basename "$bundle").config.json"
fi
{hw / "runc"} "$@"; rc=$?
[ -n "$log" ] && [ -f "$log" ] && cp "$log" "{CAPTURED}/$(basename "$(dirname "$log")").runc-log.json"
exit $rc
"""
    )
    wrapper.chmod(0o755)
    return wrapper


def replay(hw: Path) -> dict[str, Any]:
    """The newest spec containerd wrote, started by runc on the self-test's rootfs, whole and part by part."""
    specs = sorted(CAPTURED.glob("*.config.json"), key=lambda p: p.stat().st_mtime)
    if not specs:
        return {"error": "containerd's shim never called runc create"}
    spec = json.loads(specs[-1].read_text())
    spec["root"] = {"path": "rootfs", "readonly": True}
    spec["process"].update({"args": ["/pause"], "terminal": False})
    for namespace in spec.get("linux", {}).get("namespaces", []):
        namespace.pop("path", None)  # the pod's network namespace is gone with the failed sandbox
    spec["mounts"] = [m for m in spec.get("mounts", []) if m.get("type") != "bind" or Path(m["source"]).exists()]
    if not BASE.exists():
        _bundle(hw)
    return {"spec": specs[-1].name, "results": _try_all(hw, spec, "replay")}
