"""Proxy tiers learned by a fleet (issue 44's real test): a local site with three exits
— direct, and two local forward proxies leaving from 127.0.0.2 ("datacenter") and
127.0.0.3 ("residential") — blocks the direct exit and challenges the datacenter one
for one domain (127.0.0.10), and answers everything for another (127.0.0.11). Two
worker processes run 200 tasks over both domains: the blocking domain moves to
``residential`` within a few tasks, the other stays ``direct``, every refused page is
done at its first charged attempt (a block charges none), and a kill -9 of one worker
in the middle changes none of it (its running tasks come back, charged once). Once the
site stops blocking, probes step the domain back down to ``direct``."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.submission import make_push_request
from fleet.dev.demo_proxies import DemoProxy, source_available
from tests.support.master_proc import MasterProcess
from tests.support.sites import QuietHandler
from tests.support.waits import until
from tests.worker.procs import WorkerProcess
from tests.worker.support import push_config

pytestmark = [pytest.mark.timeout(240)]

TYPE = "tier-fetch"
BLOCKY, CALM = "127.0.0.10", "127.0.0.11"
DC, RESI = "127.0.0.2", "127.0.0.3"

_BLOCK_PAGE = b"""<!doctype html><html><head><title>Access denied</title></head>
<body><h1>Access denied</h1><p>You don't have permission to access this resource.</p>
</body></html>"""
_CHALLENGE_PAGE = b"""<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>
<meta name="robots" content="noindex,nofollow"></head><body><div class="main-wrapper">
<h1>127.0.0.10</h1><h2>Checking if the site connection is secure</h2>
<noscript>Enable JavaScript and cookies to continue</noscript>
<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1?ray=8a1b2c3d"></script>
</div></body></html>"""


class Site:
    """The site: who asked what, through which exit; ``blocking`` switches the blocks."""

    def __init__(self) -> None:
        self.blocking = True
        self.seen: Counter[tuple[str, str, int]] = Counter()
        self.refused: set[str] = set()  # the paths answered with a block or a challenge
        self.lock = threading.Lock()
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                host = (self.headers.get("Host") or "").split(":")[0]
                exit_ = self.client_address[0]
                status, headers, body = 200, {"content-type": "application/json"}, b""
                if host == BLOCKY and site.blocking and exit_ != RESI:
                    if exit_ == DC:
                        status, body = 403, _CHALLENGE_PAGE
                        headers = {"content-type": "text/html", "cf-mitigated": "challenge",
                                   "server": "cloudflare"}  # fmt: skip
                    else:
                        status, body = 403, _BLOCK_PAGE
                        headers = {"content-type": "text/html"}
                else:
                    body = json.dumps({"exit": exit_, "host": host}).encode()
                with site.lock:
                    site.seen[(host, exit_, status)] += 1
                    if status == 403:
                        site.refused.add(self.path)
                self.answer(status, body, headers)

        self.server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def hits(self, host: str, exit_: str) -> int:
        with self.lock:
            return sum(n for (h, e, _), n in self.seen.items() if h == host and e == exit_)

    def url(self, host: str, n: int) -> str:
        return f"http://{host}:{self.port}/page/{n}"


@pytest.fixture
def site() -> Iterator[Site]:
    if not all(source_available(a) for a in (DC, RESI, BLOCKY, CALM)):
        pytest.fail("this machine cannot use 127.0.0.2-11 (Linux routes all of 127/8 to lo)")
    s = Site()
    s.thread.start()
    yield s
    s.server.shutdown()
    s.server.server_close()


@pytest.fixture
async def exits() -> AsyncIterator[dict[str, str]]:
    proxies = [DemoProxy(DC), DemoProxy(RESI)]
    for p in proxies:
        await p.start()
    yield {"datacenter": proxies[0].url, "residential": proxies[1].url}
    for p in proxies:
        await p.stop()


async def outputs(b: Backend) -> dict[str, dict[str, Any]]:
    """The outputs by task id (a task run again after the kill emits twice)."""
    entries = await b.streams.read(TYPE, n=10_000)
    return {str(e.task_id): e.payload for e in entries}


async def tier_of(b: Backend, host: str) -> int | None:
    state = await b.domains.get(TYPE, host)
    return None if state is None else state.tier


async def test_a_blocking_domain_climbs_the_tiers_and_comes_back_down(
    site: Site, exits: dict[str, str], tmp_path: Path, shared_url: str
) -> None:
    config = {
        "slots": 4,
        "max_attempts": 2,
        "visibility_seconds": 10,
        "proxy_tiers": [
            {"name": "direct", "direct": True},
            {"name": "datacenter", "proxy_url": exits["datacenter"]},
            {"name": "residential", "proxy_url": exits["residential"]},
        ],
        "tier_escalate_after": 3,
        "tier_probe_after_seconds": 1.5,
        "tier_probe_successes": 3,
    }
    workers: list[WorkerProcess] = []
    master = MasterProcess(shared_url, tmp_path)  # its sweeper brings a dead worker's tasks back
    async with await open_backend(shared_url) as b:
        await push_config(b, TYPE, config, [])
        try:
            await master.wait_ready()
            workers = [
                WorkerProcess(shared_url, "tests.blocks.tier_plugin", TYPE, w, tmp_path)
                for w in ("w1", "w2")
            ]
            requests = [
                make_push_request({"url": site.url(BLOCKY if i % 2 else CALM, i)})
                for i in range(200)
            ]
            await b.queues.push(TYPE, requests[:100])

            async def some_done() -> bool:
                return len(await outputs(b)) >= 60

            await until(some_done, timeout=90, what="60 tasks done")
            workers[0].kill9()  # in the middle: its leased tasks come back after their lease
            await b.queues.push(TYPE, requests[100:])

            async def all_done() -> bool:
                return len(await outputs(b)) >= 200

            await until(all_done, timeout=120, interval=0.2, what="200 tasks done")
            done = await outputs(b)
            assert await tier_of(b, BLOCKY) == 2  # residential
            assert await tier_of(b, CALM) == 0  # direct
            # Every blocking-domain page came through residential, every other directly.
            for payload in done.values():
                want = RESI if f"//{BLOCKY}:" in payload["url"] else "127.0.0.1"
                assert payload["exit"] == want, payload
            # Within a few tasks: 3 blocks escalate, plus those in flight on 8 slots.
            assert site.hits(BLOCKY, "127.0.0.1") <= 3 + 8
            assert (await b.queues.depths(TYPE)).dead == 0
            # No attempt was charged for a block: a refused page's task was charged for
            # its last run and for a run lost to the kill, nothing else.
            by_path = {p["url"].split(str(site.port), 1)[1]: t for t, p in done.items()}
            # Three blocks at direct and three at datacenter escalate: six 403s at least,
            # on three pages or more (a page refused at direct may be refused again at
            # datacenter when its task comes back).
            with site.lock:
                blocks = sum(n for (h, _, st), n in site.seen.items() if h == BLOCKY and st == 403)
            assert blocks >= 6 and len(site.refused) >= 3, (blocks, site.refused)
            for path in site.refused:
                info = await b.queues.state(TYPE, by_path[path])
                lost = [a for a in info.attempts if a.outcome == "lost"]
                assert info.state == "done" and info.attempt == 1 + len(lost), info
            state = await b.domains.get(TYPE, BLOCKY)
            assert state is not None and state.count("blocked", 0) >= 3
            assert state.count("challenge", 1) >= 3 and state.changes == 2
            # What an operator reads: the REST page (and its tier names). ok verdicts are
            # sent once a second: the killed worker's last second is lost, but every one
            # of the surviving worker's calm pages is counted once it has sent them.
            entries = await b.streams.read(TYPE, n=10_000)
            survivor = {
                e.task_id for e in entries if e.worker_id == "w2" and CALM in e.payload["url"]
            }
            async with master.client() as http:

                async def page_read() -> dict[str, Any] | None:
                    page = (await http.get(f"/api/v1/automations/{TYPE}/domains")).json()
                    calm = {d["domain"]: d for d in page["items"]}.get(CALM)
                    return page if calm is not None and calm["ok"] >= len(survivor) else None

                page = await until(page_read, timeout=10, what="the survivor's verdicts")
            assert page["tiers"] == ["direct", "datacenter", "residential"]
            shown = {d["domain"]: d for d in page["items"]}
            assert shown[BLOCKY]["tier"] == "residential" and shown[CALM]["tier"] == "direct"
            assert shown[BLOCKY]["blocked"]["blocked"] >= 3
            assert len(survivor) >= 30  # the survivor did a good share of the calm pages
            assert len(survivor) <= shown[CALM]["ok"] <= 100

            # The site stops blocking: probes one tier down step the domain back down.
            site.blocking = False
            more = iter(range(1000, 2000))

            async def back_direct() -> bool:
                await b.queues.push(
                    TYPE, [make_push_request({"url": site.url(BLOCKY, next(more))})] * 1
                )
                return await tier_of(b, BLOCKY) == 0

            await until(back_direct, timeout=60, interval=0.05, what="the domain back at direct")
            state = await b.domains.get(TYPE, BLOCKY)
            assert state is not None and state.changes == 4
            assert (await b.queues.depths(TYPE)).dead == 0
        finally:
            for w in workers:
                w.close()
            master.close()
