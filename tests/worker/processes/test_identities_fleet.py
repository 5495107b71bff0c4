"""Identities across a fleet (issue 43, done means): two worker processes of 4 slots,
one pool of 3 identities behind three local forward proxies, 60 tasks through
``ctx.identity.http()`` against a local site that records (identity, exit, User-Agent,
cookie) per request. No identity is held by two slots at once; every request of an
identity goes through its own exit with its own User-Agent; the cookies the site sets
come back with the identity's next lease; one worker killed -9 mid-run, and the
identities it held are leased again within their lease (3 s here) by the other."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.core.identities import parse_identity
from fleet.core.submission import make_push_request
from tests.proxies.http_proxy import ForwardProxy
from tests.support.sites import VisitsSite, serving, visits_of
from tests.support.waits import until
from tests.worker.procs import WorkerProcess
from tests.worker.support import push_config

TYPE = "wt-ident-hold"
POOL = "fleet-ids"
TASKS = 60
LEASE = 3.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def site() -> Iterator[str]:
    with serving(VisitsSite) as url:
        yield url


async def test_a_pool_of_three_across_two_workers(
    site: str, tmp_path: Path, redis_url: str
) -> None:
    proxies = [ForwardProxy(f"exit-{i}") for i in range(3)]
    for i, p in enumerate(proxies):
        p.mark = ("X-Exit", f"exit-{i}")
        await p.start()
    b = await open_backend(redis_url)
    workers: list[WorkerProcess] = []
    try:
        await b.identities.put(
            POOL,
            [
                parse_identity(
                    {"id": f"id-{i}", "proxy": p.url(), "fingerprint": {"user_agent": f"Agent/{i}"}}
                )
                for i, p in enumerate(proxies)
            ],
        )
        config = {
            "identity_pool": POOL,
            "identity_lease_seconds": LEASE,
            "identity_wait_seconds": 30,
            "slots": 4,
            "visibility_seconds": 10,
        }
        await push_config(b, TYPE, config, [])
        for wid in ("ident-a", "ident-b"):
            workers.append(
                WorkerProcess(redis_url, "tests.worker.identity_plugin", TYPE, wid, tmp_path)
            )
        await b.queues.push(
            TYPE, [make_push_request({"url": site, "hold": 0.1}) for _ in range(TASKS)]
        )

        async def seen(n: int) -> list[dict[str, Any]] | None:
            await b.queues.sweep(TYPE)  # what a master does: the killed worker's tasks back
            entries = await b.streams.read(TYPE, n=1000)
            return [e.payload for e in entries] if len(entries) >= n else None

        await until(lambda: seen(15), timeout=60, what="15 tasks done")
        workers[0].kill9()
        killed_at = time.time()
        try:
            everything: list[dict[str, Any]] = await until(
                lambda: seen(TASKS), timeout=90, what=f"{TASKS} tasks done", interval=0.2
            )
        except AssertionError as exc:
            page = await b.identities.page(POOL)
            depths = await b.queues.depths(TYPE)
            raise AssertionError(
                (exc, [i.to_dict() for i in page.items], depths, time.time() - killed_at)
            ) from None
    finally:
        for w in workers:
            w.close()
        await b.close()
        for p in proxies:
            await p.close()
    logs = "\n".join(w.log()[-2000:] for w in workers)
    by_identity: dict[str, list[dict[str, Any]]] = {}
    for s in everything:
        by_identity.setdefault(s["identity"], []).append(s)
    assert sorted(by_identity) == ["id-0", "id-1", "id-2"], logs
    for ident, runs in by_identity.items():
        i = ident[-1]
        # its own exit and its own User-Agent, every time
        assert {r["exit"] for r in runs} == {f"exit-{i}"}, (ident, runs)
        assert {r["user_agent"] for r in runs} == {f"Agent/{i}"}
        runs.sort(key=lambda r: r["started"])
        # never in two slots at once, on either worker
        for a, b2 in itertools.pairwise(runs):
            assert a["ended"] <= b2["started"] + 0.001, (ident, a, b2)
        # the site's cookie comes back with the next lease: before the kill each visit
        # counts the ones before it; after, it never goes back
        before = [r for r in runs if r["ended"] < killed_at - 1]
        assert [visits_of(r["cookie"]) for r in before] == list(range(len(before))), before
        counts = [visits_of(r["cookie"]) for r in runs]
        assert counts == sorted(counts), counts
    # the killed worker's identities were leased again by the other within the lease
    after = [s for s in everything if s["started"] > killed_at]
    assert {s["worker"] for s in after} == {"ident-b"}
    assert {s["identity"] for s in after} == {"id-0", "id-1", "id-2"}
    first_again = {
        ident: min(s["started"] for s in after if s["identity"] == ident) for ident in by_identity
    }
    assert max(first_again.values()) - killed_at < 30, first_again
    assert all(p.max_in_flight <= 1 for p in proxies), [p.max_in_flight for p in proxies]
