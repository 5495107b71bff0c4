"""Blocks in a running worker (issue 44, item 2): a classified block left uncaught cools
the task's identity fleet-wide and sends the task back uncharged (``max_attempts: 1``
and it still gets done, by another identity); a 429's ``Retry-After`` holds the task
that long; a challenge goes to the type's solver first (then nothing cools, and the
next try passes with the solver's cookie); a client or a request may opt out;
``impersonate`` sends through curl_cffi with a browser's headers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from fleet.backends.base import Backend
from fleet.core.identities import parse_identity
from fleet.core.submission import make_push_request
from tests.blocks.block_plugin import BlockFetch
from tests.support.sites import QuietHandler, serving
from tests.support.sqlite_file import backend
from tests.support.waits import until
from tests.worker.support import push_config, running_worker

__all__ = ["backend"]  # the fixture this module reuses

TYPE = "blk-fetch"
POOL = "blk-pool"


class Site(QuietHandler):
    """``/refuse-ua/<ua>``: a 403 for that User-Agent; ``/slow``: a 429 with Retry-After
    the first time; ``/gate``: a Cloudflare-like challenge without the ``pass`` cookie
    (``/pass`` sets it); anything else 200. Every answer echoes the User-Agent."""

    first_slow: dict[str, float] = {}

    def do_GET(self) -> None:
        ua = self.headers.get("User-Agent", "")
        cookie = self.headers.get("Cookie", "")
        status, headers, body = 200, {}, b"<html><h1>fine</h1></html>"
        if self.path.startswith("/refuse-ua/") and ua.startswith(self.path.rsplit("/", 1)[1]):
            status, body = 403, b"<h1>Forbidden</h1>"
        elif self.path.startswith("/slow"):
            if self.path not in Site.first_slow:
                Site.first_slow[self.path] = time.monotonic()
                status, headers = 429, {"retry-after": "1"}
        elif self.path == "/pass":
            headers = {"set-cookie": "pass=ok; Path=/"}
        elif self.path == "/gate" and "pass=ok" not in cookie:
            status, headers = 403, {"cf-mitigated": "challenge", "server": "cloudflare"}
            body = b"<html><title>Just a moment...</title></html>"
        self.answer(status, body, {"content-type": "text/html", "x-seen-ua": ua, **headers})


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serving(Site) as url:
        yield url.rstrip("/")


def ident(name: str) -> Any:
    return parse_identity({"id": name, "fingerprint": {"user_agent": name}})


async def run(b: Backend, payloads: list[dict[str, Any]], n: int | None = None) -> list[Any]:
    """Push the payloads (max_attempts 1), run a worker until ``n`` outputs; them."""
    want = len(payloads) if n is None else n
    async with running_worker(b, [BlockFetch]):
        await b.queues.push(TYPE, [make_push_request(p, max_attempts=1) for p in payloads])

        async def outputs() -> list[Any] | None:
            got = await b.streams.read(TYPE, n=100)
            return [e.payload for e in got] if len(got) >= want else None

        found: list[Any] = await until(outputs, timeout=20, what=f"{want} outputs")
    return found


async def test_a_block_cools_the_identity_and_costs_no_attempt(site: str, backend: Backend) -> None:
    await backend.identities.put(POOL, [ident("agent-a"), ident("agent-b")])
    await push_config(backend, TYPE, {"identity_pool": POOL, "slots": 1}, [])
    (out,) = await run(backend, [{"url": f"{site}/refuse-ua/agent-a"}])
    assert out["status"] == 200 and out["identity"] == "agent-b"
    refused = await backend.identities.get(POOL, "agent-a")
    assert refused is not None and refused.state == "cooling"
    assert refused.stats.last_reason == "blocked by generic"
    assert (await backend.queues.depths(TYPE)).dead == 0  # max_attempts 1: uncharged
    host = site.split("//")[1].split(":")[0]
    state = await backend.domains.get(TYPE, host)
    assert state is not None and state.count("blocked") == 1


async def test_retry_after_holds_the_task(site: str, backend: Backend) -> None:
    await push_config(backend, TYPE, {"slots": 1}, [])
    url = f"{site}/slow/{time.monotonic()}"
    started = time.monotonic()
    (out,) = await run(backend, [{"url": url}])
    assert out["status"] == 200
    path = url.split(site, 1)[1]
    assert time.monotonic() - Site.first_slow[path] >= 1.0  # the 429's Retry-After: 1
    assert time.monotonic() - started >= 1.0
    depths = await backend.queues.depths(TYPE)
    assert depths.counters.throttled == 1 and depths.dead == 0


async def test_a_challenge_goes_to_the_solver_first(site: str, backend: Backend) -> None:
    await backend.identities.put(POOL, [ident("agent-a")])
    config = {
        "identity_pool": POOL,
        "slots": 1,
        "solver": "tests.blocks.block_plugin:PassSolver",
        "solver_config": {"path": "/pass"},
    }
    await push_config(backend, TYPE, config, [])
    (out,) = await run(backend, [{"url": f"{site}/gate"}])
    assert out["status"] == 200 and out["identity"] == "agent-a"
    kept = await backend.identities.get(POOL, "agent-a")
    assert kept is not None and kept.state == "ready"  # solved: not cooled
    assert {c["name"]: c["value"] for c in kept.cookies}.get("pass") == "ok"
    solved = "solver:tests.blocks.block_plugin:PassSolver:solved"
    assert await backend.counters.get(solved) == 1
    assert (await backend.queues.depths(TYPE)).dead == 0


async def test_a_client_or_a_request_may_opt_out(site: str, backend: Backend) -> None:
    await push_config(backend, TYPE, {"slots": 1}, [])
    outs = await run(
        backend,
        [
            {"url": f"{site}/refuse-ua/python-httpx", "classify": False},
            {"url": f"{site}/gate", "skip_one": True},
        ],
    )
    assert sorted(o["status"] for o in outs) == [403, 403]


async def test_impersonate_sends_a_browsers_request(site: str, backend: Backend) -> None:
    await push_config(backend, TYPE, {"slots": 1}, [])
    outs = await run(
        backend,
        [
            {"url": f"{site}/ok", "impersonate": "chrome"},
            {"url": f"{site}/gate", "impersonate": "chrome"},
        ],
        n=1,
    )
    (out,) = outs
    assert out["status"] == 200 and "Chrome/" in out["user_agent"]  # curl_cffi's, not httpx's
    host = site.split("//")[1].split(":")[0]

    async def challenged() -> bool:
        state = await backend.domains.get(TYPE, host)
        return state is not None and state.count("challenge") >= 1

    await until(challenged, timeout=10, what="the impersonated client's challenge counted")
