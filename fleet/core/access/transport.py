"""The transport under every ``ctx.http()`` client: it sends each request through its
domain's proxy tier and classifies each response (docs/blocks.md).

A verdict other than ``ok`` raises :class:`~fleet.core.blocks.Blocked` from the request
call, after the verdict was counted for the type, the domain and the tier. One request
opts out with ``extensions={"fleet_classify": False}`` (its response is still counted
as ``ok``); a client with ``classify=False``.

To classify, the transport reads the whole body before it hands the response back (a
``client.stream(...)`` response included): a response already read costs nothing more.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from fleet.core.access.router import NO_TIERS, Access, Route
from fleet.core.blocks.verdicts import OK, Blocked, Challenge, Verdict
from fleet.core.error_book import note_response
from fleet.core.errors import ConfigError

if TYPE_CHECKING:
    from fleet.core.blocks import Classifier
    from fleet.core.metering import TaskMeter


class TierIdentity(Protocol):
    """What a tier of identities sends as (``fleet.core.identity.TierIdentity``)."""

    pool: str

    @property
    def id(self) -> str: ...

    @property
    def proxy_url(self) -> str | None: ...

    def headers(self) -> list[tuple[str, str]]: ...

    def jar(self) -> httpx.Cookies: ...


#: Request extension that turns classification off for one request.
CLASSIFY_EXTENSION = "fleet_classify"
#: A request extension: read at most this many body bytes to classify the response;
#: a longer body is not kept (the response comes back empty, its extension
#: ``fleet_truncated`` True), so a huge page cannot fill a worker's memory.
MAX_BYTES_EXTENSION = "fleet_max_bytes"
TRUNCATED_EXTENSION = "fleet_truncated"
#: Characters of a challenge page handed to a solver.
CHALLENGE_BODY = 64 * 1024

#: Makes the transport of one exit (None: direct).
TransportFactory = Callable[[str | None], httpx.AsyncBaseTransport]


class AccessTransport(httpx.AsyncBaseTransport):
    """Routes by tier and classifies; the exits' own transports do the sending.

    Args:
        make: Builds the transport of an exit (one per exit, kept for the client's life).
        proxy: The exit without tiers (the identity's or the slot's proxy).
        access: The type's router (None: no tiers, no counts).
        classifier: None: responses are not classified.
        identities: The task's identity of a pool (leased once per task): what a tier
            with an ``identity_pool`` sends as.
        metering: Where each request's bytes are metered (by domain and tier).
    """

    def __init__(
        self,
        make: TransportFactory,
        *,
        proxy: str | None = None,
        access: Access | None = None,
        classifier: Classifier | None = None,
        identities: Callable[[str], Awaitable[TierIdentity]] | None = None,
        metering: TaskMeter | None = None,
    ) -> None:
        self._make = make
        self._proxy = proxy
        self._access = access
        self._classifier = classifier
        self._identities = identities
        self._metering = metering
        self._exits: dict[int | str | None, httpx.AsyncBaseTransport] = {}
        #: The client this transport serves (a challenge names it for its solver).
        self.client: httpx.AsyncClient | None = None
        self._tier_proxies: dict[int, str | None] = {}

    async def _exit(self, route: Route) -> httpx.AsyncBaseTransport:
        index = None if route.name is None else route.tier
        got = self._exits.get(index)
        if got is None:
            if index is None:
                proxy = self._proxy
            else:
                assert self._access is not None
                proxy = await self._access.proxy_of(route)
            got = self._exits.get(index)  # another request of the client was quicker
            if got is None:
                if index is not None:
                    self._tier_proxies[index] = proxy
                got = self._exits[index] = self._make(proxy)
        return got

    def proxy_for(self, tier: int) -> str | None:
        """The exit this client took for ``tier`` (after its first request there)."""
        return self._tier_proxies.get(tier)

    async def _send(
        self, route: Route, request: httpx.Request
    ) -> tuple[httpx.Response, str | None, TierIdentity | None]:
        """Send through the route's exit: the response, the exit, and the identity it
        went out as when the tier is a pool of identities."""
        tier = self._access.tier_of(route) if self._access is not None else None
        if tier is None or tier.identity_pool is None:
            response = await (await self._exit(route)).handle_async_request(request)
            exit_url = self._proxy if route.name is None else self._tier_proxies.get(route.tier)
            return response, exit_url, None
        if self._identities is None:
            raise ConfigError(
                f"tier {tier.name!r} sends as identities of {tier.identity_pool!r}: use "
                "ctx.http() (this client cannot lease them)",
                field="proxy_tiers",
            )
        handle = await self._identities(tier.identity_pool)
        key = f"identity:{handle.pool}:{handle.id}"
        exit_ = self._exits.get(key)
        if exit_ is None:
            exit_ = self._exits[key] = self._make(handle.proxy_url)
        # Dressed as the identity: its headers, and its cookies instead of the client's.
        for name, value in handle.headers():
            request.headers[name] = value
        if "cookie" in request.headers:
            del request.headers["cookie"]
        jar = handle.jar()
        jar.set_cookie_header(request)
        response = await exit_.handle_async_request(request)
        response.request = request
        jar.extract_cookies(response)
        return response, handle.proxy_url, handle

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        domain = request.url.host
        access = self._access
        route = await access.route(domain) if access is not None else NO_TIERS
        response, exit_url, identity = await self._send(route, request)
        sent = _request_bytes(request)
        if self._classifier is None and access is None:
            note_response(response)
            return self._metered(response, domain, route, sent)
        verdict: Verdict = OK
        if self._classifier is not None and request.extensions.get(CLASSIFY_EXTENSION, True):
            response, received = await _read(response, request)
            if self._metering is not None:
                self._metering.traffic(domain, route.name, requests=1, sent=sent, received=received)
            verdict = self._classifier(
                response.status_code, response.headers, response.content, str(request.url)
            )
        else:
            response = self._metered(response, domain, route, sent)
        if access is not None:
            await access.note(domain, route, verdict)
        if verdict.ok:
            note_response(response)  # the task's last response, for a snapshot at failure
            return response
        challenge = None
        if verdict.kind in ("challenge", "captcha"):
            challenge = Challenge(
                kind=verdict.kind,
                vendor=verdict.vendor,
                url=str(request.url),
                sitekey=verdict.sitekey,
                body=response.text[:CHALLENGE_BODY],
                headers=dict(response.headers),
                client=self.client,
            )
        blocked = Blocked(
            verdict,
            str(request.url),
            domain=domain,
            tier=route.name,
            challenge=challenge,
            proxy=exit_url,
            identity=identity,
        )
        await response.aclose()
        raise blocked

    def _metered(
        self, response: httpx.Response, domain: str, route: Route, sent: int
    ) -> httpx.Response:
        """The response, its body metered as the caller reads it (at its close)."""
        metering = self._metering
        if metering is None:
            return response
        head = _head_bytes(response.headers)

        def done(body: int) -> None:
            metering.traffic(domain, route.name, requests=1, sent=sent, received=head + body)

        response.stream = _Counted(response.stream, done)
        return response

    async def aclose(self) -> None:
        for transport in self._exits.values():
            await transport.aclose()
        self._exits.clear()


def _head_bytes(headers: httpx.Headers) -> int:
    """About what a header block weighs on the wire (names, values, separators)."""
    return sum(len(k) + len(v) + 4 for k, v in headers.raw) + 16


def _request_bytes(request: httpx.Request) -> int:
    """What a request sent: its line, its headers and its body."""
    body = request.headers.get("content-length")
    size = int(body) if body is not None and body.isdigit() else 0
    return (
        len(request.method) + len(request.url.raw_path) + 12 + _head_bytes(request.headers) + size
    )


class _Counted(httpx.AsyncByteStream):
    """A response body that tells ``done`` how many bytes it carried, once, at its close."""

    def __init__(self, inner: Any, done: Callable[[int], None]) -> None:
        self._inner = inner
        self._done: Callable[[int], None] | None = done
        self._n = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._n += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            done, self._done = self._done, None
            if done is not None:
                done(self._n)


async def _read(response: httpx.Response, request: httpx.Request) -> tuple[httpx.Response, int]:
    """The response with its raw body read, handed on as a fresh response over those
    bytes (the client decodes it as it would have), and the bytes it carried (head and
    body as received); one read already is handed on."""
    head = _head_bytes(response.headers)
    try:
        return response, head + len(response.content)
    except httpx.ResponseNotRead:
        pass
    cap = request.extensions.get(MAX_BYTES_EXTENSION)
    chunks: list[bytes] = []
    size = 0
    truncated = False
    try:
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if cap is not None and size > cap:
                truncated = True
                break
            chunks.append(chunk)
    finally:
        await response.aclose()
    headers = response.headers
    if truncated:
        # Nothing of the body is kept, so nothing is left to decode.
        headers = httpx.Headers(
            [(k, v) for k, v in headers.multi_items() if k != "content-encoding"]
        )
        chunks = []
    out = httpx.Response(
        response.status_code,
        headers=headers,
        stream=httpx.ByteStream(b"".join(chunks)),
        request=request,
        extensions={**response.extensions, TRUNCATED_EXTENSION: truncated},
    )
    await out.aread()
    return out, head + size
