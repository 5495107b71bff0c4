"""The catalog and the worker records of the Redis backend (``backend.catalog``,
``backend.workers``; configs are in ``configs.py``)."""

from __future__ import annotations

from typing import Any

from redis.exceptions import ResponseError

from fleet.backends.redis import keys
from fleet.backends.redis.core import RAW, RedisPart
from fleet.core.capabilities import Catalog, Workers
from fleet.core.records import WorkerRecord, dumps
from fleet.core.stored import catalog_entry_of, worker_record


class RedisCatalog(RedisPart, Catalog):
    """The hash ``fleet:catalog`` (type -> JSON entry)."""

    async def put(self, automation_type: str, entry: dict[str, Any]) -> None:
        with self._guard():
            await self._r.hset(self._keys.CATALOG, automation_type, dumps(entry))

    # Records that may hold anything are read as bytes (RAW) and decoded by
    # fleet.core.stored: one value that is not UTF-8 or not JSON fails only itself.
    async def get(self, automation_type: str) -> dict[str, Any] | None:
        with self._guard():
            raw = await self._r.execute_command("HGET", self._keys.CATALOG, automation_type, **RAW)
        return None if raw is None else catalog_entry_of(automation_type, raw)

    async def all(self) -> dict[str, dict[str, Any]]:
        with self._guard():
            raw = await self._r.execute_command("HGETALL", self._keys.CATALOG, **RAW)
        out: dict[str, dict[str, Any]] = {}
        for field, value in raw.items():
            t = field.decode("utf-8", "replace")
            out[t] = catalog_entry_of(t, value)
        return out

    async def delete(self, automation_type: str) -> None:
        with self._guard():
            await self._r.hdel(self._keys.CATALOG, automation_type)


class RedisWorkers(RedisPart, Workers):
    """``wkr:<type>:<id>:<part>`` keys and the indexes ``wkrs:<type>``, ``wkrs:all``."""

    async def register(
        self, automation_type: str, worker_id: str, hardware: dict[str, Any]
    ) -> None:
        with self._guard():
            async with self._pipeline(transaction=True) as pipe:
                pipe.set(
                    self._keys.worker_key(automation_type, worker_id, "hardware"), dumps(hardware)
                )
                pipe.sadd(self._keys.workers_index(automation_type), worker_id)
                pipe.sadd(
                    self._keys.WORKERS_ALL,
                    self._keys.workers_all_member(automation_type, worker_id),
                )
                await pipe.execute()

    async def set_state(self, automation_type: str, worker_id: str, fields: dict[str, str]) -> None:
        if not fields:
            return
        key = self._keys.worker_key(automation_type, worker_id, "state")
        mapping = {k: str(v) for k, v in fields.items()}
        with self._guard():
            try:
                await self._r.hset(key, mapping=mapping)
            except ResponseError as exc:
                if not str(exc).startswith("WRONGTYPE"):
                    raise
                # Not a hash (written by something else): replaced, since the
                # heartbeat writes every field.
                async with self._pipeline(transaction=True) as pipe:
                    pipe.delete(key).hset(key, mapping=mapping)
                    await pipe.execute()

    async def put_stats(self, automation_type: str, worker_id: str, stats: dict[str, Any]) -> None:
        with self._guard():
            await self._r.set(
                self._keys.worker_key(automation_type, worker_id, "stats"), dumps(stats)
            )

    async def get(self, automation_type: str, worker_id: str) -> WorkerRecord | None:
        return (await self.get_many([(automation_type, worker_id)]))[0]

    async def get_many(self, pairs: list[tuple[str, str]]) -> list[WorkerRecord | None]:
        out: list[WorkerRecord | None] = []
        for at in range(0, len(pairs), 200):  # one pipeline per 200 workers
            out += await self._workers_chunk(pairs[at : at + 200])
        return out

    async def _workers_chunk(self, pairs: list[tuple[str, str]]) -> list[WorkerRecord | None]:
        wk = self._keys.worker_key
        # As bytes, and a key of the wrong type fails only its own part: a
        # pipeline without MULTI (EXEC would decode every reply at once).
        with self._guard():
            async with self._pipeline(transaction=False) as pipe:
                for automation_type, worker_id in pairs:
                    for part in ("hardware", "config", "gen"):
                        pipe.execute_command("GET", wk(automation_type, worker_id, part), **RAW)
                    pipe.execute_command("HGETALL", wk(automation_type, worker_id, "state"), **RAW)
                    pipe.execute_command("GET", wk(automation_type, worker_id, "stats"), **RAW)
                    pipe.sismember(self._keys.workers_index(automation_type), worker_id)
                replies = await pipe.execute(raise_on_error=False)
        out: list[WorkerRecord | None] = []
        for i, (automation_type, worker_id) in enumerate(pairs):
            hw, cfg, gen, state, stats, member = replies[6 * i : 6 * i + 6]
            if isinstance(member, Exception):
                raise member
            if hw is None and not member:
                out.append(None)
                continue
            out.append(
                worker_record(
                    automation_type,
                    worker_id,
                    hardware=hw,
                    config=cfg,
                    gen=gen,
                    state=state,
                    stats=stats,
                )
            )
        return out

    async def ids(self, automation_type: str) -> list[str]:
        with self._guard():
            return sorted(await self._r.smembers(self._keys.workers_index(automation_type)))

    async def all(self) -> list[tuple[str, str]]:
        with self._guard():
            members = await self._r.smembers(self._keys.WORKERS_ALL)
        out: list[tuple[str, str]] = []
        for m in members:
            t, sep, wid = m.partition("|")
            if sep:
                out.append((t, wid))
        return sorted(out)

    async def forget(self, automation_type: str, worker_id: str) -> None:
        with self._guard():
            async with self._pipeline(transaction=True) as pipe:
                parts = [
                    self._keys.worker_key(automation_type, worker_id, p) for p in keys.WORKER_PARTS
                ]
                pipe.execute_command("DEL", *parts)  # raw: queued as one, in its slot
                pipe.srem(self._keys.workers_index(automation_type), worker_id)
                pipe.srem(
                    self._keys.WORKERS_ALL,
                    self._keys.workers_all_member(automation_type, worker_id),
                )
                await pipe.execute()
