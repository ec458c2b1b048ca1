"""The one home of every pulumi-policy private internal the pack relies on (pulumi-policy 1.21.0, pinned).

Two behaviours of the SDK have no public API, and the pack needs both:

- Props arrive wrapped in ``pulumi_policy.proxy._DictProxy``/``_ListProxy``, which raise ``UnknownValueError``
  on an unknown value. Each proxy hands back the container it wraps for the key ``"__target"``
  (``_ListProxy.__getitem__``/``_DictProxy.__getitem__`` in 1.21.0). Copying that container is what reading item
  by item gives (an unknown is its sentinel string there) at a fraction of the cost, and this copy dominated the
  pack's own time (bench/README.md): :func:`proxy_target`.
- ``args.not_applicable(reason)`` raises ``pulumi_policy.policy._NotApplicableError``, which the SDK turns into a
  "not applicable" result. A wrapper that must see "not applicable" before the SDK does (``fail_closed``: report
  the fields it could not read instead) catches it: :data:`NotApplicable`.

The benchmarks and the pack's tests also drive the SDK's gRPC servicer in-process (no analyzer subprocess), for
which the SDK has no public name either: :data:`AnalyzerServicer`.

When the pin moves, check both against the new SDK's ``proxy.py`` and ``policy.py``;
``tests/unit/test_bench.py`` proves the fast copy equals the item-by-item read, and ``tests/policy`` covers
"not applicable" through the SDK's own validation args.
"""

from __future__ import annotations

from typing import Any, Final

from pulumi_policy.policy import _NotApplicableError, _PolicyAnalyzerServicer
from pulumi_policy.proxy import _DictProxy, _ListProxy

NotApplicable: Final = _NotApplicableError
"""What ``args.not_applicable(reason)`` raises."""

AnalyzerServicer: Final = _PolicyAnalyzerServicer
"""The SDK's Analyzer gRPC servicer: what `pulumi-analyzer-policy-python` serves, callable in-process."""

PROXY_TYPES: Final = (_DictProxy, _ListProxy)
"""The SDK's unknown-checking proxy types, for an exact ``type(value) in PROXY_TYPES`` test."""

_TARGET_KEY: Final = "__target"


def proxy_target(proxy: Any) -> Any:
    """The plain container an SDK proxy wraps (its items may be proxies again)."""
    return proxy[_TARGET_KEY]
