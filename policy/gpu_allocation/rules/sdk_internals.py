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

- The engine hands an analyzer the stack's config in its ``ConfigureStack`` call
  (``AnalyzerStackConfigureRequest.config``, pulumi ``sdk/go/common/resource/plugin/analyzer_plugin.go``), and,
  only where it starts the pack through the old ``pulumi-analyzer-policy-<runtime>`` shim, in ``PULUMI_CONFIG``
  too. pulumi-policy 1.21.0 reads ``PULUMI_CONFIG`` into ``pulumi.runtime`` config before every Analyze call and
  drops the request's config, so a pack started as an executable (``policy/analyzer``) or by a language host would
  never see the stack's ``kubernetesVersion``: :func:`take_stack_config_from_configure_stack` puts the request's
  config where the SDK reads it.

- The servicer turns a request's properties into policy args once *per policy*: ``Analyze`` and ``AnalyzeStack``
  (``_PolicyAnalyzerServicer`` in 1.21.0) call ``json_format.MessageToDict``, ``deserialize_properties`` and
  ``unknown_checking_proxy`` on every resource for each of the pack's policies, which was most of the pack's cost per
  preview (bench/README.md, section 3), and builds each resource's options and provider resource
  (``_get_resource_options``, ``_get_provider_resource``) for each policy as well.
  :func:`share_deserialization_per_request` makes those calls give every policy of one request the same (read-only)
  result: each policy still gets its own args, validates alone and reports alone; only the SDK's conversion of the
  same bytes is done once.

The benchmarks and the pack's tests also drive the SDK's gRPC servicer in-process (no analyzer subprocess), for
which the SDK has no public name either: :data:`AnalyzerServicer`.

When the pin moves, check both against the new SDK's ``proxy.py`` and ``policy.py``;
``tests/unit/test_bench.py`` proves the fast copy equals the item-by-item read, and ``tests/policy`` covers
"not applicable" through the SDK's own validation args.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

import pulumi_policy.policy as sdk_policy
from google.protobuf import json_format
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


STACK_CONFIG_ENV: Final = "PULUMI_CONFIG"
"""Where pulumi-policy reads the stack's config from (``pulumi.runtime.get_config_env``)."""


def take_stack_config_from_configure_stack() -> None:
    """Make the servicer keep the stack config the engine sends in ``ConfigureStack`` (before the pack serves).

    A config already in the environment (the shim's) is left alone; an empty request changes nothing. Without this,
    the policies that need the version say they cannot know it (fail closed), never guess.
    """
    original = AnalyzerServicer.ConfigureStack
    if getattr(original, "keeps_stack_config", False):
        return

    def configure_stack(self: Any, request: Any, context: Any) -> Any:
        config = dict(request.config)
        if config and not os.environ.get(STACK_CONFIG_ENV):
            os.environ[STACK_CONFIG_ENV] = json.dumps(config)
        return original(self, request, context)

    configure_stack.keeps_stack_config = True  # type: ignore[attr-defined]
    setattr(AnalyzerServicer, "ConfigureStack", configure_stack)  # noqa: B010 (a method of the SDK, replaced)


_REQUEST: Final = threading.local()
"""The conversions of the request this thread is serving (gRPC serves requests on a thread pool)."""


def once_per_request(function: Callable[[Any], Any]) -> Callable[..., Any]:
    """``function`` of the same object, within one request, is computed once (the argument is kept alive with it).

    Outside a request served by a servicer that :func:`share_deserialization_per_request` set up, every call computes.
    The result is shared by every policy of the request: nobody may write into it.
    """

    @functools.wraps(function)
    def call(value: Any, *rest: Any, **options: Any) -> Any:
        done: dict[int, tuple[Any, Any]] | None = getattr(_REQUEST, "done", None)
        if done is None or rest or options:
            return function(value, *rest, **options)
        key = id(value)
        found = done.get(key)
        if found is None or found[0] is not value:
            found = (value, function(value))
            done[key] = found
        return found[1]

    call.shared_per_request = True  # type: ignore[attr-defined]
    return call


def once_per_request_method(method: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A servicer method of one request item (``method(self, item)``), computed once per item within one request.

    The SDK builds a resource's options and its provider resource (``_get_resource_options``,
    ``_get_provider_resource``) again for each policy; they are read-only records of the same item.
    """

    @functools.wraps(method)
    def call(self: Any, item: Any) -> Any:
        done: dict[Any, tuple[Any, Any]] | None = getattr(_REQUEST, "done", None)
        if done is None:
            return method(self, item)
        key = (method.__name__, id(item))
        found = done.get(key)
        if found is None or found[0] is not item:
            found = (item, method(self, item))
            done[key] = found
        return found[1]

    call.shared_per_request = True  # type: ignore[attr-defined]
    return call


class _JsonFormat(ModuleType):
    """``google.protobuf.json_format`` as the servicer sees it: ``MessageToDict`` of one request's message once."""

    MessageToDict = staticmethod(once_per_request(json_format.MessageToDict))

    def __getattr__(self, name: str) -> Any:
        return getattr(json_format, name)


def _serving_one_request(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def serve(self: Any, request: Any, context: Any) -> Any:
        outer = getattr(_REQUEST, "done", None)
        _REQUEST.done = {} if outer is None else outer
        try:
            return method(self, request, context)
        finally:
            _REQUEST.done = outer

    return serve


def share_deserialization_per_request() -> None:
    """Convert each resource of an ``Analyze``/``AnalyzeStack`` request once, for all the pack's policies.

    Safe because no policy writes into its props (every rule copies them first: ``rules.props.plain``), and the
    conversions are pure; outside a request (a test calling the SDK's helpers) nothing is shared.
    """
    if getattr(getattr(sdk_policy, "deserialize_properties"), "shared_per_request", False):  # noqa: B009
        return
    setattr(sdk_policy, "json_format", _JsonFormat("json_format"))  # noqa: B010 (the names the servicer calls)
    for name in ("deserialize_properties", "unknown_checking_proxy"):
        setattr(sdk_policy, name, once_per_request(getattr(sdk_policy, name)))
    for name in ("_get_resource_options", "_get_provider_resource"):
        method = getattr(AnalyzerServicer, name)
        if not getattr(method, "shared_per_request", False):
            setattr(AnalyzerServicer, name, once_per_request_method(method))
    for name in ("Analyze", "AnalyzeStack"):
        setattr(AnalyzerServicer, name, _serving_one_request(getattr(AnalyzerServicer, name)))
