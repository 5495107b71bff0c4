"""Identity events (issue 43, item 6): a block or a retirement reported by a worker's
``ctx.identity``, and a retire or revive through the REST API, are published on the
identities topic, and the master's event stream relays each as the event ``identity``
(over real HTTP), the reason's credentials masked."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.identities import parse_identity
from fleet.core.identity import (
    IDENTITIES_TOPIC,
    IdentityBlocked,
    IdentityHandle,
    IdentityPolicy,
    identity_event,
    lease_waiting,
)
from fleet.core.submission import make_push_request
from fleet.master.services.event_hub import identity_frame
from tests.master.conftest import ADMIN, READ, auth
from tests.master.test_metrics_events import EventReader
from tests.support.sqlite_file import backend
from tests.worker.identity_plugin import IdentityVisitor
from tests.worker.support import push_config, running_worker
from tests.worker.test_identities_worker import site

__all__ = ["backend", "site"]  # the fixture this module reuses

TYPE = "wt-ident"  # IdentityVisitor's type
POOL = "ev-pool"
CAPTCHA = "the site asked for a captcha"


def ident(i: int) -> Any:
    return parse_identity({"id": f"id-{i}", "fingerprint": {"user_agent": f"Agent/{i}"}})


async def held(backend: Backend, policy: IdentityPolicy, told: list[dict[str, Any]]) -> Any:
    """A handle on a fresh lease of ``policy``'s pool whose events land in ``told``."""

    async def tell(event: dict[str, Any]) -> None:
        told.append(event)

    lease = await lease_waiting(backend.identities, policy)
    return IdentityHandle(backend.identities, policy, lease, on_event=tell)


async def test_the_handle_tells_a_block_then_a_retirement_by_blocks_in_a_row(
    backend: Backend,
) -> None:
    await backend.identities.put(POOL, [ident(0)])
    policy = IdentityPolicy(POOL, cooldown_seconds=0.3, retire_after=2, wait_seconds=5)
    told: list[dict[str, Any]] = []

    # The first block cools the identity down: a blocked event with the cool-down's end.
    handle = await held(backend, policy, told)
    with pytest.raises(IdentityBlocked):
        await handle.blocked(CAPTCHA)
    assert told == []  # nothing happened yet: the release does it
    before = time.time()
    await handle.finish(False)
    (first,) = told
    assert first["event"] == "blocked" and first["pool"] == POOL and first["id"] == "id-0"
    assert first["reason"] == CAPTCHA
    assert before + 0.2 <= first["cooling_until"] <= time.time() + 0.4

    # Cooled down, leased again and blocked again: the second block in a row retires it.
    handle = await held(backend, policy, told)
    with pytest.raises(IdentityBlocked):
        await handle.blocked("banned for good")
    await handle.finish(False)
    assert told[1:] == [identity_event(POOL, "id-0", "retired", "banned for good", None)]
    stored = await backend.identities.get(POOL, "id-0")
    assert stored is not None and stored.state == "retired"


async def test_retire_tells_at_once_and_an_ok_release_tells_nothing(backend: Backend) -> None:
    await backend.identities.put(POOL, [ident(0), ident(1)])
    policy = IdentityPolicy(POOL, wait_seconds=0.5)
    told: list[dict[str, Any]] = []
    handle = await held(backend, policy, told)
    await handle.ok()
    await handle.finish(True)
    assert told == []
    handle = await held(backend, policy, told)
    await handle.retire("account banned")
    assert told == [identity_event(POOL, handle.id, "retired", "account banned", None)]
    await handle.finish(True)
    assert len(told) == 1


async def test_an_event_that_cannot_be_sent_does_not_fail_the_release(backend: Backend) -> None:
    await backend.identities.put(POOL, [ident(0)])
    policy = IdentityPolicy(POOL, cooldown_seconds=60, wait_seconds=0.5)

    async def broken(event: dict[str, Any]) -> None:
        raise ConnectionError("the backend's pub/sub is down")

    lease = await lease_waiting(backend.identities, policy)
    handle = IdentityHandle(backend.identities, policy, lease, on_event=broken)
    with pytest.raises(IdentityBlocked):
        await handle.blocked(CAPTCHA)
    await handle.finish(False)
    stored = await backend.identities.get(POOL, "id-0")
    assert stored is not None and stored.state == "cooling" and stored.leases == 0


def test_the_frame_keeps_known_fields_and_masks_the_reason() -> None:
    frame = identity_frame(
        {
            "pool": "p",
            "id": "i",
            "event": "blocked",
            "reason": "403 via http://bob:hunter2@proxy.example:8080",
            "cooling_until": 12.5,
            "secret": "x",
        }
    )
    assert frame is not None
    text = frame.decode()
    assert text.startswith("event: identity\ndata: ")
    assert "hunter2" not in text and "bob" not in text and '"secret"' not in text
    assert '"cooling_until":12.5' in text and '"event":"blocked"' in text
    assert identity_frame("not an event") is None
    assert identity_frame({"id": "no pool", "event": "blocked"}) is None
    assert identity_frame({"pool": "p", "id": 7, "event": "blocked"}) is None


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_a_block_in_a_worker_and_the_rest_actions_reach_the_event_stream(
    live_factory: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str, site: str
) -> None:
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'fleet.db'}"
    else:
        url = request.getfixturevalue("redis_url")
    live = live_factory(url, sweeper=False)
    backend = await open_backend(url)
    try:
        await backend.identities.put(POOL, [ident(0), ident(1)])
        await push_config(backend, TYPE, {"identity_pool": POOL, "slots": 1}, ["w1"])
        async with (
            httpx.AsyncClient(base_url=live.url, headers=auth(READ), timeout=30) as client,
            client.stream("GET", "/api/v1/events?interval=5") as response,
        ):
            assert response.status_code == 200
            events = EventReader(response)
            await events.next("hello")
            async with running_worker(backend, [IdentityVisitor]):
                await backend.queues.push(
                    TYPE, [make_push_request({"url": site, "block_ids": ["id-0"]})]
                )
                blocked = await events.next("identity", timeout=20)
            assert blocked["pool"] == POOL and blocked["id"] == "id-0"
            assert blocked["event"] == "blocked" and blocked["reason"] == CAPTCHA
            assert blocked["cooling_until"] > time.time() + 500  # the default 600 s

            # An operator retires and revives: the same stream hears both.
            admin = auth(ADMIN)
            path = f"/api/v1/identities/{POOL}/id-1"
            r = await client.post(f"{path}/retire", json={"reason": "by hand"}, headers=admin)
            assert r.status_code == 200, r.text
            retired = await events.next("identity")
            assert retired == identity_event(POOL, "id-1", "retired", "by hand", None)
            r = await client.post(f"{path}/revive", headers=admin)
            assert r.status_code == 200, r.text
            revived = await events.next("identity")
            assert revived == identity_event(POOL, "id-1", "revived", None, None)
            # A message of the topic that is not an identity event is not relayed.
            await backend.events.publish(IDENTITIES_TOPIC, ["garbage"])
            await backend.identities.retire(POOL, "id-0")  # no event: not published
            r = await client.post(f"{path}/retire", headers=admin)
            last = await events.next("identity")
            assert last["id"] == "id-1" and last["event"] == "retired"
    finally:
        await backend.close()
