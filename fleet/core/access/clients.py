"""The HTTP clients of a task: ``ctx.http()`` and ``ctx.identity.http()`` build theirs
here, over :class:`~fleet.core.access.transport.AccessTransport`."""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from fleet.core.access.transport import AccessTransport, TierIdentity, TransportFactory

if TYPE_CHECKING:
    from fleet.core.access.router import Access
    from fleet.core.metering import TaskMeter

#: ``httpx.AsyncClient`` options that belong to its transport: handed to each exit's.
TRANSPORT_OPTIONS = ("verify", "cert", "http1", "http2", "limits", "trust_env")


_CONTEXTS: dict[bool, ssl.SSLContext] = {}


def default_ssl_context(trust_env: bool = True) -> ssl.SSLContext:
    """httpx's default verifying context, made once per process: making one reads the
    CA bundle (about 20 ms of CPU), which a client per task would pay per task
    (bench/crawl.py: 8.7x pages/s). One context is safe to share between transports."""
    context = _CONTEXTS.get(trust_env)
    if context is None:
        context = _CONTEXTS[trust_env] = httpx.create_ssl_context(trust_env=trust_env)
    return context


def exits(
    options: dict[str, Any], impersonate: str | None
) -> tuple[TransportFactory, httpx.AsyncBaseTransport | None]:
    """How an exit's transport is made from the client's options (taken out of
    ``options``): httpx's own, curl_cffi's when ``impersonate`` names a browser, or the
    caller's ``transport`` (then tiers cannot change its exit)."""
    own = {k: options.pop(k) for k in TRANSPORT_OPTIONS if k in options}
    given = options.pop("transport", None)
    if given is not None:
        return (lambda _proxy: given), given
    if impersonate is not None:
        from fleet.core.access.impersonate import CurlTransport

        verify = own.get("verify", True)
        return (lambda proxy: CurlTransport(impersonate, proxy=proxy, verify=verify)), None
    if "verify" not in own and "cert" not in own:
        own["verify"] = default_ssl_context(bool(own.get("trust_env", True)))
    return (lambda proxy: httpx.AsyncHTTPTransport(proxy=proxy, **own)), None


def build_client(
    access: Access | None,
    *,
    proxy: str | None,
    headers: Sequence[tuple[str, str]] = (),
    impersonate: str | None = None,
    classify: bool = True,
    identities: Callable[[str], Awaitable[TierIdentity]] | None = None,
    metering: TaskMeter | None = None,
    options: dict[str, Any],
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` that leaves through ``proxy`` (or the domain's tier when
    the type has ``proxy_tiers``) and classifies its responses (unless ``classify`` is
    False or the type's ``block_detection`` is off). ``options`` go to the client
    (``proxy`` among them replaces the given one; ``headers`` are added after
    ``headers``)."""
    options = dict(options)
    proxy = options.pop("proxy", proxy)
    merged = httpx.Headers(list(headers))
    merged.update(options.pop("headers", None) or {})
    make, _given = exits(options, impersonate)
    classifier = None
    if access is not None and classify and access.config.block_detection:
        from fleet.core.blocks import classifier_for

        classifier = classifier_for(access.config.block_rules or None)
    transport = AccessTransport(
        make,
        proxy=proxy,
        access=access,
        classifier=classifier,
        identities=identities,
        metering=metering,
    )
    # Not the environment's proxies: the exits are Fleet's (they would bypass the transport).
    client = httpx.AsyncClient(transport=transport, headers=merged, trust_env=False, **options)
    transport.client = client
    return client
