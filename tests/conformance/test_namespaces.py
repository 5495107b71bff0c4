"""Namespaces: two fleets on one backend never see each other (issue 29).

Every capability is driven through a namespaced backend; on Redis every key it
leaves and every channel it publishes on must carry the namespace's prefix
(found by SCAN and by a pattern subscription over the raw server), and a fleet in
another namespace, or in none, must see none of it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from fleet.backends import open_backend
from fleet.backends.base import Backend, namespace_of, with_env_namespace
from fleet.core.errors import ConfigError
from fleet.core.flow import GroupLimits, GroupSettings
from fleet.core.history import Reported
from fleet.core.records import now
from fleet.core.schedule import ScheduleRecord
from fleet.core.submission import make_push_request

TYPE = "ns-scrape"


def _url(kind: str, redis_url: str, tmp_path: Path, namespace: str | None) -> str:
    base = {
        "memory": f"memory://ns-{id(tmp_path)}",
        "sqlite": f"sqlite:///{tmp_path / 'fleet.db'}",
        "redis": redis_url,
    }[kind]
    return base if namespace is None else f"{base}?namespace={namespace}"


async def _use_everything(b: Backend) -> str:
    """One call or more of every capability; the run's id."""
    run = await b.runs.create(name="r")
    await b.queues.push(TYPE, [make_push_request({"n": 1}), make_push_request({"n": 2}, run=run)])
    await b.queues.push(TYPE, [make_push_request({"n": 3}, group="g", idempotency_key="k")])
    got = await b.queues.reserve(TYPE, k=3)
    await b.queues.mark_started(TYPE, [(r.body.id, r.token) for r in got[:1]])
    await b.streams.push(TYPE, {"row": 1}, worker_id="w1", task_id=got[0].body.id, attempt=1)
    await b.streams.progress(TYPE, got[0].body.id, attempt=1, fraction=0.5, message="half")
    await b.queues.ack(TYPE, [(r.body.id, r.token) for r in got[:2]])
    await b.queues.nack(TYPE, got[2].body.id, got[2].token, delay_seconds=0, dead=True)
    await b.groups.set(TYPE, "g", GroupSettings(concurrency=2))
    await b.groups.set_defaults(TYPE, GroupLimits(concurrency=5), gen=1)
    item = await b.pools.put("cookies", {"v": 1}, {"site": "a"})
    claim = await b.pools.claim("cookies", where={"site": "a"})
    assert claim is not None and claim.item.id == item
    await b.kv.set("ns", "k", "v")
    assert await b.locks.acquire("lk", "tok", 30)
    await b.counters.incr("c", 3)
    await b.catalog.put(TYPE, {"name": TYPE})
    await b.workers.register(TYPE, "w1", {"host": "h"})
    await b.workers.set_state(TYPE, "w1", {"state": "RUNNING"})
    await b.configs.set(TYPE, {"slots": 2})
    await b.configs.publish(TYPE, {"slots": 2})
    t = now()
    await b.schedules.put(
        ScheduleRecord(automation_type=TYPE, id="s1", definition={"every": 60}, next_run=t + 60)
    )
    await b.limits.acquire("api", "tok", interval=None, concurrency=2, hold_seconds=30)
    take = await b.proxies.take(["http://p1:8080"], "tok", automation_type=TYPE, sticky="st")
    assert take.key is not None
    await b.proxies.report(take.key, ok=False, automation_type=TYPE)
    await b.history.record(TYPE, t, Reported())
    await b.events.publish("hello", {"n": 1})
    return run


async def _sees_nothing_of(b: Backend, run: str) -> None:
    """What a fleet in another namespace (or none) finds of the one that ran."""
    depths = await b.queues.depths(TYPE)
    assert (depths.pending, depths.processing, depths.dead) == (0, 0, 0)
    assert depths.counters.submitted == 0
    assert await b.streams.length(TYPE) == 0
    assert await b.pools.names() == [] and await b.pools.size("cookies") == 0
    assert await b.kv.get("ns", "k") is None
    assert await b.locks.acquire("lk", "other", 30)  # free here
    assert await b.counters.get("c") == 0
    assert await b.catalog.all() == {}
    assert await b.workers.all() == [] and await b.workers.get(TYPE, "w1") is None
    assert await b.configs.get(TYPE) == {}
    assert await b.schedules.listing(TYPE) == []
    assert await b.runs.get(run) is None
    assert await b.proxies.listing() == []
    assert (await b.groups.info(TYPE, "g")).settings is None


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
async def test_two_namespaces_on_one_backend_see_nothing_of_each_other(
    kind: str, redis_url: str, tmp_path: Path
) -> None:
    acme = await open_backend(_url(kind, redis_url, tmp_path, "acme"))
    zeta = await open_backend(_url(kind, redis_url, tmp_path, "zeta"))
    plain = await open_backend(_url(kind, redis_url, tmp_path, None))
    try:
        heard = await zeta.events.subscribe("hello")
        heard_plain = await plain.events.subscribe("hello")
        mine = await acme.events.subscribe("hello")
        run = await _use_everything(acme)
        assert await asyncio.wait_for(mine.__anext__(), 5) == ("hello", {"n": 1})
        await _sees_nothing_of(zeta, run)
        await _sees_nothing_of(plain, run)
        for sub in (heard, heard_plain):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(sub.__anext__(), 0.3)
        # ...while acme still has all of it.
        assert (await acme.queues.depths(TYPE)).dead == 1
        assert await acme.kv.get("ns", "k") == "v"
        assert [t for t, _ in await acme.workers.all()] == [TYPE]
        assert (await acme.runs.get(run)) is not None
        for sub in (heard, heard_plain, mine):
            await sub.aclose()
    finally:
        for b in (acme, zeta, plain):
            await b.close()


async def test_every_redis_key_and_channel_of_a_namespace_carries_its_prefix(
    redis_url: str,
) -> None:
    raw = aioredis.Redis.from_url(redis_url, decode_responses=True)
    spy = raw.pubsub()
    await spy.psubscribe("*")
    await spy.get_message(timeout=1)  # the psubscribe confirmation
    b = await open_backend(f"{redis_url}?namespace=acme")
    try:
        await _use_everything(b)
        # A run that ends publishes on its channel from inside a script.
        run = await b.runs.create(name="ends", on_complete={"type": f"{TYPE}-cb"})
        await b.queues.push(TYPE, [make_push_request({"n": 9}, run=run)])
        got = await b.queues.reserve(TYPE, k=10)
        await b.queues.ack(TYPE, [(r.body.id, r.token) for r in got])
        record = await b.runs.get(run)
        assert record is not None and record.state == "done"
        await b.queues.sweep(TYPE)
        names = [k async for k in raw.scan_iter(match="*", count=1000)]
        assert len(names) > 20, names  # the calls above really wrote
        assert [k for k in names if not k.startswith("acme:")] == []
        channels: list[str] = []
        while (msg := await spy.get_message(timeout=0.5)) is not None:
            if msg["type"] == "pmessage":
                channels.append(msg["channel"])
        assert channels and [c for c in channels if not c.startswith("acme:")] == [], channels
        assert "acme:event:hello" in channels
    finally:
        await b.close()
        await spy.aclose()
        await raw.aclose()


async def test_fleet_namespace_is_the_urls_namespace_unless_the_url_names_one(
    monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    monkeypatch.setenv("FLEET_NAMESPACE", "envfleet")
    assert namespace_of(with_env_namespace("redis://h:1/0")) == ("redis://h:1/0", "envfleet")
    assert namespace_of(with_env_namespace("redis://h/0?namespace=mine"))[1] == "mine"
    assert with_env_namespace("sqlite:///f.db?poll_ms=5").endswith("?poll_ms=5&namespace=envfleet")
    b = await open_backend(redis_url)
    try:
        await b.kv.set("ns", "k", "v")
    finally:
        await b.close()
    raw = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        assert [k async for k in raw.scan_iter(match="*")] == ["envfleet:fleet:kv:ns:k"]
    finally:
        await raw.aclose()
    monkeypatch.delenv("FLEET_NAMESPACE")
    assert with_env_namespace("redis://h:1/0") == "redis://h:1/0"


@pytest.mark.parametrize("bad", ["a b", "x" * 65, "a:b", "ns/1", "é"])
@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
def test_a_bad_namespace_is_refused_when_the_backend_is_made(
    kind: str, bad: str, tmp_path: Path
) -> None:
    from urllib.parse import quote

    from fleet.backends import backend_class

    base = {
        "memory": "memory://x",
        "sqlite": f"sqlite:///{tmp_path / 'f.db'}",
        "redis": "redis://127.0.0.1:1/0",
    }[kind]
    url = f"{base}?namespace={quote(bad)}"
    with pytest.raises(ConfigError, match="namespace"):
        backend_class(url)(url)  # type: ignore[call-arg]


def test_a_sqlite_namespace_is_a_database_file_of_its_own(tmp_path: Path) -> None:
    from fleet.backends.sqlite.conn import parse_url

    assert parse_url(f"sqlite:///{tmp_path}/fleet.db?namespace=acme").path == (
        tmp_path / "fleet.acme.db"
    )
    assert parse_url(f"sqlite:///{tmp_path}/fleet.db").path == tmp_path / "fleet.db"
