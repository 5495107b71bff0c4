"""The local demo site the example automations work against (loopback only).

Routes:
    ``GET /health``: ``{"status": "ok"}``.
    ``GET /challenge``: a proof-of-work challenge (JSON).
    ``POST /challenge``: ``{"challenge_id", "answer"}``; on success sets the
        expiring ``cf_clearance`` cookie, bound to the request's client address (its
        exit) and User-Agent.
    ``GET /products/{n}``: protected; 403 (the challenge again, with a ``reason``)
        without a valid clearance, or with one from another exit or another
        User-Agent; 500 for broken pages and ~10 % of the time, else an HTML page.
    ``GET /ip``: the client address and User-Agent the site sees (not linked).
    ``POST /api/token``: client credentials -> short-lived bearer token.
    ``GET /api/stock/{sku}``: needs the bearer token.
    ``GET /stats``: what the site has seen so far.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from fleet.dev.demo_state import CLEARANCE_COOKIE, DemoSettings, DemoState

_INDEX = """<!doctype html><title>Fleet demo site</title>
<h1>Fleet demo site</h1>
<p>A stand-in for a site behind a bot challenge. Solve <a href="/challenge">/challenge</a>
to get a clearance cookie, then read <code>/products/1</code> ..
<code>/products/{pages}</code>.</p>
<p>The open part, for crawls (<code>docs/runs.md</code>): the <a href="/catalog/1">catalog</a>,
{sections} sections that link to each other, and back <a href="/">home</a>.</p>
<ul>{links}</ul>
"""
#: Sections of the open catalog a crawl walks (each links to its neighbours and home).
CATALOG_SECTIONS = 12


def _catalog_page(n: int) -> str:
    near = [
        f'<a href="/catalog/{m}">section {m}</a>'
        for m in (n - 1, n + 1)
        if 1 <= m <= CATALOG_SECTIONS
    ]
    return (
        f"<!doctype html><title>Catalog section {n}</title><h1>Catalog section {n}</h1>"
        f'<p>{" · ".join(near)} · <a href="/">home</a></p>'
    )


def _client(request: Request) -> str:
    """The address the request came from: the exit a site sees (a proxy's, through one)."""
    return request.client.host if request.client is not None else ""


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def create_demo_app(settings: DemoSettings | None = None) -> Starlette:
    """Build the demo site.

    Args:
        settings: Behaviour knobs (defaults: 300 s cookies, 25 uses, 10 % failures).

    Returns:
        A Starlette app; its :class:`DemoState` is at ``app.state.demo``.
    """
    state = DemoState(settings or DemoSettings())

    async def index(request: Request) -> Response:
        links = "".join(
            f'<li><a href="/catalog/{n}">section {n}</a></li>' for n in (1, CATALOG_SECTIONS)
        )
        text = _INDEX.format(pages=state.settings.pages, sections=CATALOG_SECTIONS, links=links)
        return HTMLResponse(text)

    async def catalog(request: Request) -> Response:
        n = int(request.path_params["n"])
        if not 1 <= n <= CATALOG_SECTIONS:
            return HTMLResponse("<h1>No such section</h1>", 404)
        return HTMLResponse(_catalog_page(n))

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def get_challenge(request: Request) -> Response:
        return JSONResponse(state.new_challenge())

    async def post_challenge(request: Request) -> Response:
        body = await _json_body(request)
        answer = body.get("answer")
        challenge_id = body.get("challenge_id")
        if not isinstance(answer, int) or not isinstance(challenge_id, str):
            return JSONResponse({"error": "send challenge_id and an integer answer"}, 400)
        user_agent = request.headers.get("user-agent", "")
        value = state.solve(challenge_id, answer, user_agent, _client(request))
        if value is None:
            return JSONResponse({"error": "wrong or expired challenge"}, 403)
        ttl = state.settings.cookie_ttl_seconds
        response = JSONResponse({"clearance": value, "expires_in": ttl})
        response.set_cookie(CLEARANCE_COOKIE, value, max_age=int(ttl), httponly=True)
        return response

    async def product(request: Request) -> Response:
        page = int(request.path_params["page"])
        reason = state.admit(
            request.cookies.get(CLEARANCE_COOKIE),
            request.headers.get("user-agent", ""),
            _client(request),
        )
        if reason is not None:
            return JSONResponse({"error": "challenge required", "reason": reason}, 403)
        if not 1 <= page <= state.settings.pages:
            return JSONResponse({"error": "no such product"}, 404)
        if state.page_fails(page):
            return JSONResponse({"error": "upstream failure"}, 500)
        body = f"<h1>Product {page}</h1>" + "<p>lorem ipsum</p>" * (page % 17 + 1)
        return HTMLResponse(body)

    async def token(request: Request) -> Response:
        body = await _json_body(request)
        issued = state.issue_token(
            str(body.get("client_id", "")), str(body.get("client_secret", ""))
        )
        if issued is None:
            return JSONResponse({"error": "invalid client credentials"}, 401)
        return JSONResponse(
            {"access_token": issued, "expires_in": state.settings.token_ttl_seconds}
        )

    async def stock(request: Request) -> Response:
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not state.token_ok(auth[len("Bearer ") :]):
            return JSONResponse({"error": "invalid or expired token"}, 401)
        sku = request.path_params["sku"]
        return JSONResponse({"sku": sku, "quantity": state.stock(sku)})

    async def whoami(request: Request) -> Response:
        return JSONResponse(
            {"client": _client(request), "user_agent": request.headers.get("user-agent", "")}
        )

    async def stats(request: Request) -> Response:
        return JSONResponse(dataclasses.asdict(state.stats))

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/health", health),
            Route("/challenge", get_challenge, methods=["GET"]),
            Route("/challenge", post_challenge, methods=["POST"]),
            Route("/products/{page:int}", product),
            Route("/catalog/{n:int}", catalog),
            Route("/api/token", token, methods=["POST"]),
            Route("/api/stock/{sku}", stock),
            Route("/ip", whoami),
            Route("/stats", stats),
        ]
    )
    app.state.demo = state
    return app
