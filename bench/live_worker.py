"""One measured read of the live cluster in a fresh interpreter: `python -m bench.live_worker MODE KUBECONFIG`.

MODE is `preflight-scoped`, `preflight-whole`, `inspect-scoped` or `inspect-whole`: the preview's preflight read
(`cluster.judge.live.read_live` / `read_live_whole`) with the local stack's selectors, or `inspect`'s read and report
(`gather` / `gather_whole`). Prints one JSON line: wall seconds of the read (imports excluded) and this process's
CPU seconds over it (what the reading machine pays; the rest of the wall is the API server's work), peak RSS of the
process (VmHWM: the interpreter and its imports included, as a person's `/usr/bin/time` shows it), RSS after the
imports, requests and response bytes (counted where both readers send, `kube_http.send`), and a digest of the
answers (the preflight's problems, inspect's findings) so the driver can hold both reads to the same answers.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from cluster.client import kube_http, kubeclient
from cluster.judge import live
from cluster.judge.preflight import check
from cluster.records.ledger import ledger_namespace
from components.cluster import ClusterTarget, source_of
from components.config import ClusterConfig
from components.validation import ClusterFacts
from eks_hybrid_gpu import cluster_access, inspection
from eks_hybrid_gpu.stackfile import stack_config

TRAFFIC = {"requests": 0, "bytes": 0}


def _counting(*args: Any, **kwargs: Any) -> kube_http.Response:
    response = kube_http.send(*args, **kwargs)
    TRAFFIC["requests"] += 1
    TRAFFIC["bytes"] += len(response.text.encode())
    return response


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def _digest(answers: list[str]) -> str:
    return hashlib.sha256("\n".join(answers).encode()).hexdigest()[:16]


def measure(mode: str, kubeconfig: str) -> dict[str, Any]:
    """Read once as `mode` says; the figures and the answers' digest."""
    # Both readers call the name they imported; counting there sees every request either sends.
    live.send = _counting  # type: ignore[attr-defined]
    kubeclient.send = _counting  # type: ignore[attr-defined]
    config = stack_config("local")
    rss_imports = _status_kib("VmRSS")
    started, cpu_started = time.perf_counter(), time.process_time()
    if mode.startswith("preflight"):
        cluster = ClusterConfig.model_validate({"source": "kubeconfig", "kubeconfig": kubeconfig})
        source = source_of(cluster, ClusterTarget(ClusterFacts(), kubeconfig, None, None))
        namespace = ledger_namespace(config.namespaces)
        if mode == "preflight-scoped":
            selectors = [c.selector(config.cohort_label_key) for c in config.cohorts]
            found = live.read_live(source, namespace, selectors)
        else:
            found = live.read_live_whole(source, namespace)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        answers = [str(p) for p in check(config, found)]
        objects = {"nodes": len(found.nodes), "pods": len(found.pods)}
    else:
        kube = cluster_access.connect(kubeconfig, None)
        gather = inspection.gather if mode == "inspect-scoped" else inspection.gather_whole
        snapshot = gather(kube, "default", inspection.DEFAULT_LEDGER)
        document = inspection.report(snapshot, kube)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        answers = [json.dumps(f, sort_keys=True) for f in document["findings"]]
        answers += [json.dumps(n, sort_keys=True) for n in document["nodes"]]
        objects = {"nodes": len(snapshot.nodes), "pods": len(snapshot.pods)}
    return {
        "mode": mode,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_bytes": _status_kib("VmHWM") * 1024,
        "rss_after_imports_bytes": rss_imports * 1024,
        "requests": TRAFFIC["requests"],
        "bytes_read": TRAFFIC["bytes"],
        "answers": len(answers),
        "digest": _digest(answers),
        "kept": objects,
    }


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], sys.argv[2])))
