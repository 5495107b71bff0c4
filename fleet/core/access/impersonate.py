"""``ctx.http(impersonate="chrome")``: requests sent by curl_cffi, whose TLS and HTTP/2
handshakes are a real browser's, under the same ``httpx.AsyncClient`` interface
(``pip install 'fleet-automation[impersonate]'``)."""

from __future__ import annotations

from typing import Any

import httpx

from fleet.core.errors import FleetError

#: httpx's own default headers: dropped, so the impersonated browser's stand.
_HTTPX_DEFAULTS = {
    "user-agent": "python-httpx/",
    "accept": "*/*",
    "accept-encoding": "gzip, deflate",
    "connection": "keep-alive",
}


class ImpersonationUnavailable(FleetError):
    """``impersonate`` was asked for without curl_cffi installed."""


def _defaulted(name: str, value: str) -> bool:
    default = _HTTPX_DEFAULTS.get(name.lower())
    return default is not None and value.startswith(default)


def _timeout(request: httpx.Request) -> float | None:
    got: Any = request.extensions.get("timeout") or {}
    values = [v for v in (got.get("connect"), got.get("read")) if v is not None]
    return max(values) if values else None


class CurlTransport(httpx.AsyncBaseTransport):
    """An httpx transport over a curl_cffi session impersonating ``impersonate``
    (``chrome``, ``safari``, ``firefox``… as curl_cffi names them)."""

    def __init__(self, impersonate: str, *, proxy: str | None = None, verify: Any = True) -> None:
        try:
            from curl_cffi.requests import AsyncSession
        except ImportError as exc:
            raise ImpersonationUnavailable(
                "impersonate needs curl_cffi: pip install 'fleet-automation[impersonate]'"
            ) from exc
        self.impersonate = impersonate
        self.proxy = proxy
        self._session: Any = AsyncSession(
            impersonate=impersonate, proxy=proxy, verify=verify is not False
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        from curl_cffi.requests.exceptions import RequestException

        body = await request.aread()
        headers = [(k, v) for k, v in request.headers.multi_items() if not _defaulted(k, v)]
        try:
            got = await self._session.request(
                request.method,
                str(request.url),
                headers=dict(headers),
                data=body or None,
                allow_redirects=False,
                timeout=_timeout(request),
            )
        except RequestException as exc:  # the driver's error, as httpx's callers expect
            raise httpx.TransportError(f"{type(exc).__name__}: {exc}", request=request) from exc
        # curl has decoded the body already: what said how it was encoded goes.
        out = [
            (k, v)
            for k, v in got.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx.Response(got.status_code, headers=out, content=got.content, request=request)

    async def aclose(self) -> None:
        await self._session.close()
