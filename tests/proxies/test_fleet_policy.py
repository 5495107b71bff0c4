"""The type's proxy policy has one source, the backend.

* End to end, on Redis and on SQLite: a real master and two ``fleet worker`` processes
  of ``proxy-policy`` (one slot each, one proxy). Each worker holds a task with its
  event loop blocked, so neither can apply a config. The master's ``PATCH`` sets
  ``proxy_bad_threshold`` 3 -> 2 and ``proxy_cooldown_seconds`` 5 -> 123, and at once
  (no sleep) both workers report the proxy bad with their old copy (3, 5): the second
  report cools the proxy for 123 s, the values the PATCH stored. With the workers'
  own values neither report would cool it.
* The writers: each worker stores the policy of the config it applies, the master's
  PATCH stores it for a batch and for a continuous type, tagged with the generation.
* The handle: a take and a report of a handle carrying an old copy follow the stored
  policy, and the ``Throttled`` raised under a stored cap names that cap.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import BaseConfig, Context, ContinuousAutomation
from fleet.core.catalog import describe
from fleet.core.errors import Throttled
from fleet.core.flow import GroupLimits
from fleet.core.proxy import ProxyHandle, ProxyPolicy, proxy_key, proxy_key_salt
from fleet.core.submission import make_push_request
from fleet.master.services.config_ops import patch_type_config
from tests.proxies.policy_plugin import ProxyPolicyJob
from tests.support.fleet_procs import wait_up, worker_processes
from tests.support.master_proc import MasterProcess
from tests.worker.procs import fleet_env
from tests.worker.support import wait_until

TYPE = "proxy-policy"
PLUGIN = "tests.proxies.policy_plugin"
PROXY = "http://user-x:pw-x@policy-proxy.test:3128"  # never dialled: only its key counts
WORKERS = ("w1", "w2")
OLD = {"proxy_bad_threshold": 3, "proxy_cooldown_seconds": 5}
NEW = {"proxy_bad_threshold": 2, "proxy_cooldown_seconds": 123}


def ready_pids(gate: Path) -> set[str]:
    return {p.name.removeprefix("ready-") for p in gate.glob("ready-*")}


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_patch_holds_for_a_worker_that_has_not_applied_it(
    shared_url: str, tmp_path: Path
) -> None:
    url = shared_url
    gate = tmp_path / "gate"
    gate.mkdir()
    env = fleet_env(FLEET_POLICY_GATE=str(gate), FLEET_ENTRY_POINTS="0")
    master = MasterProcess(url, tmp_path)
    b: Backend
    async with await open_backend(url) as b, master.client() as http:
        await b.configs.set(
            TYPE, {"slots": 1, "visibility_seconds": 120, "proxy_url": PROXY, **OLD}
        )
        try:
            with worker_processes(url, PLUGIN, TYPE, WORKERS, tmp_path, env, grace=5):
                await wait_up(b, TYPE, WORKERS, http)
                # Before any PATCH the policy is the workers' own: each stored the config
                # it applied, with its generation.
                stored, gen = await b.proxies.policy(TYPE)
                assert stored == ProxyPolicy(3, 5.0, None) and gen >= 1

                # One task per worker, each holding its worker's event loop. The first
                # worker, held, cannot take the second task.
                for n in range(2):
                    await b.queues.push(TYPE, [make_push_request({"n": n})])
                    await wait_until(
                        lambda n=n: len(ready_pids(gate)) == n + 1,
                        timeout=30,
                        what=f"task {n} held by a worker",
                    )

                answer = await http.patch(f"/api/v1/automations/{TYPE}/config", json=NEW)
                assert answer.status_code == 200, answer.text
                (gate / "go").touch()  # at once: neither worker has read the change

                async def reported() -> bool:
                    path = gate / "ledger.jsonl"
                    return path.exists() and len(path.read_text().splitlines()) == 2

                await wait_until(reported, timeout=30, what="both reports")
                salt = await proxy_key_salt(b.kv)
                key = proxy_key(PROXY, salt)

                async def cooling() -> bool:
                    found = {p.key: p for p in await b.proxies.listing()}
                    return key in found and found[key].failures == 2

                await wait_until(cooling, timeout=10, what="both reports stored")
                info = {p.key: p for p in await b.proxies.listing()}[key]
                _, patched_gen = await b.configs.desired(TYPE, "w1")
                final = await b.proxies.policy(TYPE)
        finally:
            master.close()

    lines = [json.loads(line) for line in (gate / "ledger.jsonl").read_text().splitlines()]
    # Two workers, each reporting with its own copy of the old config.
    assert {line["pid"] for line in lines} == {int(p) for p in ready_pids(gate)}
    assert len({line["pid"] for line in lines}) == 2
    assert all(line["same_handle"] for line in lines)
    assert {(line["threshold"], line["cooldown"]) for line in lines} == {(3, 5.0)}
    assert {line["proxy"] for line in lines} == {key}
    # The stored policy decided: the second bad report reached threshold 2 and cooled
    # the proxy for 123 s (with 3 it would not cool at all; with 5 s it would be over).
    assert info.score == 2
    assert info.cooling_until is not None and info.last_bad_at is not None
    assert info.cooling_until - info.last_bad_at == pytest.approx(123.0)
    assert final == (ProxyPolicy(2, 123.0, None), patched_gen)


# ------------------------------------------------------------ in one process


@pytest.fixture
async def mem() -> AsyncIterator[Backend]:
    b = await open_backend(f"memory://policy-{time.monotonic_ns()}")
    yield b
    await b.close()


class Watcher(ContinuousAutomation[BaseConfig]):
    """A continuous type (never run: only its catalog entry is used)."""

    Config = BaseConfig

    async def run_slot(self, ctx: Context[BaseConfig]) -> None:
        raise NotImplementedError


@pytest.mark.parametrize(("cls", "groups"), [(ProxyPolicyJob, True), (Watcher, False)])
async def test_the_patch_stores_the_policy_for_every_kind(
    mem: Backend, cls: Any, groups: bool
) -> None:
    entry = describe(cls)
    patch = {"proxy_max_concurrency": 4, "proxy_cooldown_seconds": 30, "group_concurrency": 2}
    write = await patch_type_config(mem, "t", entry, patch)
    # The fields the PATCH left alone take the schema's defaults (threshold 1).
    assert await mem.proxies.policy("t") == (ProxyPolicy(1, 30.0, 4), write.gen)
    limits = GroupLimits.of(2, None) if groups else GroupLimits()
    assert await mem.groups.defaults("t") == (limits, write.gen)
    # A later PATCH replaces it under its own, newer generation.
    again = await patch_type_config(mem, "t", entry, {"proxy_max_concurrency": None})
    assert again.gen > write.gen
    assert await mem.proxies.policy("t") == (ProxyPolicy(1, 30.0, None), again.gen)


async def test_a_stale_handle_follows_the_stored_policy(backend: Backend) -> None:
    stale = ProxyPolicy(bad_threshold=5, cooldown_seconds=1.0, max_concurrency=None)
    stored = ProxyPolicy(bad_threshold=1, cooldown_seconds=77.0, max_concurrency=1)
    assert await backend.groups.set_defaults("shop", GroupLimits(), gen=1, proxy=stored)
    urls = ["http://one.test:8080"]
    a = ProxyHandle(urls=urls, health=backend.proxies, policy=stale, owner="shop")
    b = ProxyHandle(urls=urls, health=backend.proxies, policy=stale, owner="shop", wait_seconds=0.3)
    try:
        assert await a.ensure() == urls[0]
        # The stored cap of 1, not the handle's none: the second slot waits, then
        # is throttled, and the message names the cap that held it.
        with pytest.raises(Throttled, match="proxy_max_concurrency=1"):
            await b.ensure()
        before = time.time()
        await a.report_bad("403")  # the stored threshold of 1 and cool-down of 77 s
        (info,) = await backend.proxies.listing()
        assert info.cooling_until is not None
        assert before + 77 <= info.cooling_until <= time.time() + 77
    finally:
        await a.close()
        await b.close()
