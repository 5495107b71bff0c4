"""Configs of the Redis backend: partial configs with the generation they were
stored at, the generation counter and each worker's desired config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import ResponseError

from fleet.backends.redis.core import RAW, RedisPart
from fleet.core.capabilities.configs import Configs
from fleet.core.config_book import ConfigBook
from fleet.core.records import dumps
from fleet.core.stored import config_of, desired_config, generation_of

#: The field of ``fleet:config:<type>:gens`` that holds the type-wide config's.
TYPE_WIDE_FIELD = ""


class RedisConfigs(RedisPart, Configs):
    """The configs of a Redis database: each method is one round trip."""

    def _config_key(self, automation_type: str, worker_id: str | None) -> str:
        if worker_id is None:
            return self._keys.config(automation_type)
        return self._keys.config_override(automation_type, worker_id)

    async def get(self, automation_type: str, worker_id: str | None = None) -> dict[str, Any]:
        key = self._config_key(automation_type, worker_id)
        with self._guard():
            try:
                raw = await self._r.execute_command("GET", key, **RAW)
            except ResponseError as exc:
                if not str(exc).startswith("WRONGTYPE"):
                    raise
                return {}  # not a string: unreadable, like text that is not JSON
        return config_of(raw)

    async def set(
        self, automation_type: str, config: dict[str, Any], worker_id: str | None = None
    ) -> None:
        with self._guard():
            await self._r.set(self._config_key(automation_type, worker_id), dumps(config))

    async def publish(
        self,
        automation_type: str,
        config: dict[str, Any],
        worker_id: str | None = None,
        *,
        floor: int = 0,
    ) -> int:
        k = [
            self._keys.config_generation(automation_type),
            self._config_key(automation_type, worker_id),
            self._keys.config_generations(automation_type),
        ]
        field = TYPE_WIDE_FIELD if worker_id is None else worker_id
        with self._guard():
            raw = await self._scripts.config_publish(
                self._lane, k, [dumps(config), field, max(int(floor), 0)]
            )
        return int(raw)

    async def book(self, automation_type: str, worker_ids: Sequence[str]) -> ConfigBook:
        ids = list(worker_ids)
        names = [self._config_key(automation_type, None)]
        names += [self._config_key(automation_type, wid) for wid in ids]
        with self._guard():
            async with self._pipeline(transaction=False) as pipe:
                # MGET answers nil for a key of another type; HMGET raises WRONGTYPE
                # (kept in the results): both read as "none".
                pipe.execute_command("MGET", *names, **RAW)
                pipe.execute_command(
                    "HMGET", self._keys.config_generations(automation_type), TYPE_WIDE_FIELD, *ids
                )
                configs, gens = await pipe.execute(raise_on_error=False)
        if isinstance(gens, Exception):
            gens = [None] * (len(ids) + 1)
        overrides = {
            wid: (config_of(raw), generation_of(gen))
            for wid, raw, gen in zip(ids, configs[1:], gens[1:], strict=True)
            if raw is not None
        }
        return ConfigBook(config_of(configs[0]), generation_of(gens[0]), overrides)

    async def next_generation(self, automation_type: str, *, floor: int = 0) -> int:
        key = self._keys.config_generation(automation_type)
        with self._guard():
            if floor <= 0:
                return int(await self._r.incr(key))
            raw = await self._scripts.next_generation(self._lane, [key], [str(floor)])
            return int(raw)

    async def put_desired(
        self, automation_type: str, worker_id: str, config: dict[str, Any], gen: int
    ) -> bool:
        k = [
            self._keys.worker_key(automation_type, worker_id, "config"),
            self._keys.worker_key(automation_type, worker_id, "gen"),
        ]
        with self._guard():
            raw = await self._scripts.worker_config_put(self._lane, k, [dumps(config), int(gen)])
        return bool(int(raw))

    async def desired(
        self, automation_type: str, worker_id: str
    ) -> tuple[dict[str, Any] | None, int]:
        with self._guard():
            cfg, gen = await self._r.execute_command(
                "MGET",
                self._keys.worker_key(automation_type, worker_id, "config"),
                self._keys.worker_key(automation_type, worker_id, "gen"),
                **RAW,
            )
        return desired_config(cfg, gen)
