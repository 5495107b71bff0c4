"""KV, locks, counters, catalog and worker records of the Redis backend (configs are
in ``configs.py``)."""

from __future__ import annotations

from typing import Any

from redis.exceptions import ResponseError

from fleet.backends.redis import keys
from fleet.backends.redis.core import RAW, RedisCore
from fleet.core.records import WorkerRecord, dumps
from fleet.core.stored import catalog_entry_of, worker_record


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


class StateOps(RedisCore):
    """The simple keyed primitives; each method is one command or one script."""

    # The primitives plugins call from their jobs (ctx.kv, ctx.lock, ctx.counter)
    # go over the script lane: one command each, at a fraction of redis-py's cost.

    # ------------------------------------------------------------ kv
    async def kv_set(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> None:
        args: list[Any] = ["SET", keys.kv(ns, key), value]
        if ttl_seconds is not None:
            args += ["PX", _ms(ttl_seconds)]
        with self._guard():
            await self._lane.execute(*args)

    async def kv_setnx(
        self, ns: str, key: str, value: str, *, ttl_seconds: float | None = None
    ) -> bool:
        args: list[Any] = ["SET", keys.kv(ns, key), value, "NX"]
        if ttl_seconds is not None:
            args += ["PX", _ms(ttl_seconds)]
        with self._guard():
            done = await self._lane.execute(*args)
        return done is not None

    async def kv_get(self, ns: str, key: str) -> str | None:
        with self._guard():
            value: str | None = await self._lane.execute("GET", keys.kv(ns, key))
        return value

    async def kv_get_many(self, ns: str, names: list[str]) -> list[str | None]:
        out: list[str | None] = []
        for at in range(0, len(names), 500):  # bounded replies
            chunk = [keys.kv(ns, k) for k in names[at : at + 500]]
            with self._guard():
                out += await self._lane.execute("MGET", *chunk)
        return out

    async def kv_delete(self, ns: str, key: str) -> bool:
        with self._guard():
            return bool(await self._lane.execute("DEL", keys.kv(ns, key)))

    # ------------------------------------------------------------ locks
    async def lock_acquire(self, name: str, token: str, hold_seconds: float) -> bool:
        with self._guard():
            done = await self._lane.execute(
                "SET", keys.lock(name), token, "NX", "PX", _ms(hold_seconds)
            )
        return done is not None

    async def lock_renew(self, name: str, token: str, hold_seconds: float) -> bool:
        with self._guard():
            raw = await self._scripts.lock_renew(
                self._lane, [keys.lock(name)], [token, _ms(hold_seconds)]
            )
        return bool(int(raw))

    async def lock_release(self, name: str, token: str) -> bool:
        with self._guard():
            raw = await self._scripts.lock_release(self._lane, [keys.lock(name)], [token])
        return bool(int(raw))

    # ------------------------------------------------------------ counters
    async def counter_incr(self, name: str, n: int = 1) -> int:
        with self._guard():
            return int(await self._lane.execute("INCRBY", keys.counter(name), int(n)))

    async def counter_get(self, name: str) -> int:
        with self._guard():
            raw = await self._lane.execute("GET", keys.counter(name))
        return 0 if raw is None else int(raw)

    async def counter_set(self, name: str, value: int) -> None:
        with self._guard():
            await self._lane.execute("SET", keys.counter(name), int(value))

    async def counter_delete(self, name: str) -> None:
        with self._guard():
            await self._lane.execute("DEL", keys.counter(name))

    # ------------------------------------------------------------ catalog
    async def catalog_put(self, automation_type: str, entry: dict[str, Any]) -> None:
        with self._guard():
            await self._r.hset(keys.CATALOG, automation_type, dumps(entry))

    # Records that may hold anything are read as bytes (RAW) and decoded by
    # fleet.core.stored: one value that is not UTF-8 or not JSON fails only itself.
    async def catalog_get(self, automation_type: str) -> dict[str, Any] | None:
        with self._guard():
            raw = await self._r.execute_command("HGET", keys.CATALOG, automation_type, **RAW)
        return None if raw is None else catalog_entry_of(automation_type, raw)

    async def catalog_all(self) -> dict[str, dict[str, Any]]:
        with self._guard():
            raw = await self._r.execute_command("HGETALL", keys.CATALOG, **RAW)
        out: dict[str, dict[str, Any]] = {}
        for field, value in raw.items():
            t = field.decode("utf-8", "replace")
            out[t] = catalog_entry_of(t, value)
        return out

    async def catalog_delete(self, automation_type: str) -> None:
        with self._guard():
            await self._r.hdel(keys.CATALOG, automation_type)

    # ------------------------------------------------------------ workers
    async def worker_register(
        self, automation_type: str, worker_id: str, hardware: dict[str, Any]
    ) -> None:
        with self._guard():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.set(keys.worker_key(automation_type, worker_id, "hardware"), dumps(hardware))
                pipe.sadd(keys.workers_index(automation_type), worker_id)
                pipe.sadd(keys.WORKERS_ALL, keys.workers_all_member(automation_type, worker_id))
                await pipe.execute()

    async def worker_set_state(
        self, automation_type: str, worker_id: str, fields: dict[str, str]
    ) -> None:
        if not fields:
            return
        key = keys.worker_key(automation_type, worker_id, "state")
        mapping = {k: str(v) for k, v in fields.items()}
        with self._guard():
            try:
                await self._r.hset(key, mapping=mapping)
            except ResponseError as exc:
                if not str(exc).startswith("WRONGTYPE"):
                    raise
                # Not a hash (written by something else): replaced, since the
                # heartbeat writes every field.
                async with self._r.pipeline(transaction=True) as pipe:
                    pipe.delete(key).hset(key, mapping=mapping)
                    await pipe.execute()

    async def worker_put_stats(
        self, automation_type: str, worker_id: str, stats: dict[str, Any]
    ) -> None:
        with self._guard():
            await self._r.set(keys.worker_key(automation_type, worker_id, "stats"), dumps(stats))

    async def worker_get(self, automation_type: str, worker_id: str) -> WorkerRecord | None:
        return (await self.workers_get([(automation_type, worker_id)]))[0]

    async def workers_get(self, pairs: list[tuple[str, str]]) -> list[WorkerRecord | None]:
        out: list[WorkerRecord | None] = []
        for at in range(0, len(pairs), 200):  # one pipeline per 200 workers
            out += await self._workers_chunk(pairs[at : at + 200])
        return out

    async def _workers_chunk(self, pairs: list[tuple[str, str]]) -> list[WorkerRecord | None]:
        wk = keys.worker_key
        # As bytes, and a key of the wrong type fails only its own part: a
        # pipeline without MULTI (EXEC would decode every reply at once).
        with self._guard():
            async with self._r.pipeline(transaction=False) as pipe:
                for automation_type, worker_id in pairs:
                    for part in ("hardware", "config", "gen"):
                        pipe.execute_command("GET", wk(automation_type, worker_id, part), **RAW)
                    pipe.execute_command("HGETALL", wk(automation_type, worker_id, "state"), **RAW)
                    pipe.execute_command("GET", wk(automation_type, worker_id, "stats"), **RAW)
                    pipe.sismember(keys.workers_index(automation_type), worker_id)
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

    async def worker_ids(self, automation_type: str) -> list[str]:
        with self._guard():
            return sorted(await self._r.smembers(keys.workers_index(automation_type)))

    async def workers_all(self) -> list[tuple[str, str]]:
        with self._guard():
            members = await self._r.smembers(keys.WORKERS_ALL)
        out: list[tuple[str, str]] = []
        for m in members:
            t, sep, wid = m.partition("|")
            if sep:
                out.append((t, wid))
        return sorted(out)

    async def worker_forget(self, automation_type: str, worker_id: str) -> None:
        with self._guard():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.delete(
                    *[keys.worker_key(automation_type, worker_id, p) for p in keys.WORKER_PARTS]
                )
                pipe.srem(keys.workers_index(automation_type), worker_id)
                pipe.srem(keys.WORKERS_ALL, keys.workers_all_member(automation_type, worker_id))
                await pipe.execute()
