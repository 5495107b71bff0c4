"""``ctx.identity`` in a running worker (issue 43, item 3): a task leases an identity
of the type's pool, its HTTP client carries the identity's headers and cookies, the
cookies the site sets are saved back for the next lease, ``blocked()`` cools the
identity down and sends the task back uncharged to another identity, and a task that
finds no usable identity goes back (throttled) instead of failing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleet.backends.base import Backend
from fleet.core.identities import parse_identity
from fleet.core.submission import make_push_request
from tests.support.sites import VisitsSite, serving
from tests.support.sqlite_file import backend
from tests.support.waits import until
from tests.worker.identity_plugin import IdentityVisitor
from tests.worker.support import push_config, running_worker

__all__ = ["backend"]  # the fixture this module reuses

TYPE = "wt-ident"
POOL = "wt-pool"


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serving(VisitsSite) as url:
        yield url


def ident(i: int) -> Any:
    return parse_identity({"id": f"id-{i}", "fingerprint": {"user_agent": f"Agent/{i}"}})


async def outputs(b: Backend, n: int) -> list[dict[str, Any]]:
    async def got() -> list[dict[str, Any]] | None:
        entries = await b.streams.read(TYPE, n=100)
        return [e.payload for e in entries] if len(entries) >= n else None

    found: list[dict[str, Any]] = await until(got, timeout=20, what=f"{n} outputs")
    return found


async def test_identities_carry_headers_and_cookies(backend: Backend, site: str) -> None:
    await backend.identities.put(POOL, [ident(0), ident(1)])
    await push_config(backend, TYPE, {"identity_pool": POOL, "slots": 1}, ["w1"])
    async with running_worker(backend, [IdentityVisitor]):
        for _ in range(4):
            await backend.queues.push(TYPE, [make_push_request({"url": site})])
        seen = await outputs(backend, 4)
    by_identity: dict[str, list[dict[str, Any]]] = {}
    for s in seen:
        by_identity.setdefault(s["identity"], []).append(s)
        assert s["user_agent"] == f"Agent/{s['identity'][-1]}"  # its own fingerprint
    assert sorted(by_identity) == ["id-0", "id-1"]  # round robin over the pool
    for visits in by_identity.values():
        # the first visit sends no cookie; the next lease brings back what the site set
        assert [v["cookie"] for v in visits] == ["", "visits=1"]
    stored = await backend.identities.get(POOL, "id-0")
    assert stored is not None and stored.stats.uses == 2 and stored.stats.ok == 2
    assert {c["name"]: c["value"] for c in stored.cookies} == {"visits": "2"}
    assert stored.state == "ready"


async def test_a_blocked_identity_cools_down_and_the_task_moves_on(
    backend: Backend, site: str
) -> None:
    await backend.identities.put(POOL, [ident(0), ident(1)])
    await push_config(backend, TYPE, {"identity_pool": POOL, "slots": 1}, ["w1"])
    async with running_worker(backend, [IdentityVisitor]):
        (pushed,) = await backend.queues.push(
            TYPE, [make_push_request({"url": site, "block_ids": ["id-0"]}, max_attempts=1)]
        )
        (seen,) = await outputs(backend, 1)
    assert seen["identity"] == "id-1"
    assert seen["attempt"] == 1  # the blocked try was given back uncharged
    blocked = await backend.identities.get(POOL, "id-0")
    assert blocked is not None and blocked.state == "cooling"
    assert (
        blocked.stats.blocked == 1 and blocked.stats.last_reason == "the site asked for a captcha"
    )
    info = await backend.queues.state(TYPE, pushed.task_id)
    assert info.state == "done"


async def test_no_usable_identity_sends_the_task_back(backend: Backend, site: str) -> None:
    await backend.identities.put(POOL, [ident(0)])
    await backend.identities.retire(POOL, "id-0", "banned")
    await push_config(
        backend, TYPE, {"identity_pool": POOL, "slots": 1, "identity_wait_seconds": 0.2}, ["w1"]
    )
    async with running_worker(backend, [IdentityVisitor]):
        (pushed,) = await backend.queues.push(TYPE, [make_push_request({"url": site})])

        async def throttled() -> bool:
            return (await backend.queues.depths(TYPE)).counters.throttled >= 1

        await until(throttled, timeout=10, what="the task throttled")
        info = await backend.queues.state(TYPE, pushed.task_id)
        assert info.state in ("scheduled", "queued") and info.attempt == 0  # uncharged
        await backend.identities.revive(POOL, "id-0")
        (seen,) = await outputs(backend, 1)
    assert seen["identity"] == "id-0"


async def test_a_continuous_slot_holds_an_identity_a_round(backend: Backend, site: str) -> None:
    from tests.worker.identity_plugin import IdentityRounds

    await backend.identities.put(POOL, [ident(0), ident(1)])
    await push_config(
        backend, "wt-ident-rounds", {"identity_pool": POOL, "slots": 1, "url": site}, ["w1"]
    )
    async with running_worker(backend, [IdentityRounds]):

        async def rounds() -> list[dict[str, Any]] | None:
            found = [e.payload for e in await backend.streams.read("wt-ident-rounds", n=100)]
            return found if len(found) >= 4 else None

        seen = await until(rounds, timeout=20, what="4 rounds")
    assert {s["identity"] for s in seen} == {"id-0", "id-1"}  # round after round, in turn
    assert all(s["user_agent"] == f"Agent/{s['identity'][-1]}" for s in seen)
    for n in (0, 1):
        got = await backend.identities.get(POOL, f"id-{n}")
        assert got is not None and got.stats.ok >= 2 and got.leases == 0
