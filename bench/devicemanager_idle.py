"""Requests per second of an idle simulated device manager: `python -m bench.devicemanager_idle FILE KUBECONFIG S`.

FILE is a devicemanager.py to run: the working tree's (watches) or the one before it (`git show`, lists four times
a second), loaded as a module so both run the same way, in a daemon thread of this process. Every request either
sends passes through the kubernetes client's `RESTClientObject.request`, which is counted here. After a warm-up
(the first lists, the informers' start) it counts for S seconds of an idle cluster and prints one JSON line.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from typing import Any

from kubernetes.client import rest

WARM_UP_SECONDS = 5.0
COUNT = {"requests": 0}


def _counted(original: Any) -> Any:
    def request(*args: Any, **kwargs: Any) -> Any:
        COUNT["requests"] += 1
        return original(*args, **kwargs)

    return request


def measure(path: str, kubeconfig: str, seconds: float) -> dict[str, Any]:
    """Start the device manager of `path`, wait out the warm-up, count requests over `seconds`."""
    rest.RESTClientObject.request = _counted(rest.RESTClientObject.request)  # type: ignore[method-assign]
    spec = importlib.util.spec_from_file_location("measured_devicemanager", path)
    if spec is None or spec.loader is None:
        msg = f"{path} cannot be loaded as a module"
        raise RuntimeError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    threading.Thread(target=module.run, args=(kubeconfig,), daemon=True).start()
    time.sleep(WARM_UP_SECONDS)
    before = COUNT["requests"]
    time.sleep(seconds)
    counted = COUNT["requests"] - before
    return {"file": path, "seconds": seconds, "requests": counted, "requests_per_s": counted / seconds}


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], sys.argv[2], float(sys.argv[3]))))
