"""Lua scripts of the Redis backend: loaded once, called by EVALSHA.

Scripts live in ``fleet/backends/redis/lua/*.lua`` (package data). A first line
``-- @include <name> [<name> ...]`` prepends those files (shared helpers, in
order), so each script is still one self-contained EVAL body. A server that lost its script cache
(restart, ``SCRIPT FLUSH``, failover) answers NOSCRIPT; the script is then
loaded again and the call retried once.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

from fleet.backends.redis.resp import Lane, ReplyError
from fleet.core.results import result_max_per_type, result_ttl
from fleet.core.runs import run_ttl

_INCLUDE = "-- @include "


def _read(name: str) -> str:
    return resources.files("fleet.backends.redis").joinpath("lua", f"{name}.lua").read_text("utf-8")


def load_source(name: str) -> str:
    """The full source of one script, with its ``@include`` resolved.

    Raises:
        FileNotFoundError: No such script in the package.
    """
    text = _read(name)
    first, _, _rest = text.partition("\n")
    if first.startswith(_INCLUDE):
        parts = [_read(inc) for inc in first[len(_INCLUDE) :].split()]
        return "\n".join([*parts, text])
    return text


def with_settings(source: str) -> str:
    """``source`` with this process' task record settings in place of their
    placeholders (``FLEET_RESULT_TTL_SECONDS``, ``FLEET_RESULT_MAX_PER_TYPE``)."""
    return (
        source.replace("__RESULT_TTL__", repr(result_ttl()))
        .replace("__RESULT_MAX__", str(result_max_per_type()))
        .replace("__RUN_TTL__", repr(run_ttl()))
    )


class LuaScript:
    """One script: its source and SHA1, callable on a client.

    Args:
        name: File name under ``lua/`` without ``.lua``.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = with_settings(load_source(name))
        self.sha = hashlib.sha1(self.source.encode("utf-8")).hexdigest()

    async def __call__(self, client: Lane, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run the script by EVALSHA, loading it first if the server lost it.

        Raises:
            ReplyError: Any error reply but a first NOSCRIPT (the caller's guard
                translates it, see :func:`fleet.backends.redis.core.translate`).
        """
        try:
            return await client.evalsha(self.sha, keys, args)
        except ReplyError as exc:
            # Recovered here, before any translation: a NOSCRIPT must never reach a
            # caller as a BackendError, since one reload answers it.
            if exc.code != "NOSCRIPT":
                raise
            await client.execute("SCRIPT", "LOAD", self.source)
            return await client.evalsha(self.sha, keys, args)


SCRIPT_NAMES = (
    "push",
    "reserve",
    "ack",
    "mark_started",
    "nack",
    "release",
    "extend",
    "sweep",
    "cancel",
    "dead",
    "task_state",
    "pool_claim",
    "pool_ops",
    "pool_query",
    "lock_renew",
    "lock_release",
    "next_generation",
    "worker_config_put",
    "config_publish",
    "stream_push",
    "task_progress",
    "stream_read",
    "throttle",
    "groups",
    "limits",
    "schedules",
    "proxies",
    "run_cancel",
    "history_record",
)


class Scripts:
    """Every script of the backend, by attribute."""

    def __init__(self) -> None:
        self.all = {name: LuaScript(name) for name in SCRIPT_NAMES}
        self.push = self.all["push"]
        self.reserve = self.all["reserve"]
        self.ack = self.all["ack"]
        self.mark_started = self.all["mark_started"]
        self.nack = self.all["nack"]
        self.release = self.all["release"]
        self.extend = self.all["extend"]
        self.sweep = self.all["sweep"]
        self.cancel = self.all["cancel"]
        self.dead = self.all["dead"]
        self.task_state = self.all["task_state"]
        self.pool_claim = self.all["pool_claim"]
        self.pool_ops = self.all["pool_ops"]
        self.pool_query = self.all["pool_query"]
        self.lock_renew = self.all["lock_renew"]
        self.lock_release = self.all["lock_release"]
        self.next_generation = self.all["next_generation"]
        self.worker_config_put = self.all["worker_config_put"]
        self.config_publish = self.all["config_publish"]
        self.stream_push = self.all["stream_push"]
        self.task_progress = self.all["task_progress"]
        self.stream_read = self.all["stream_read"]
        self.throttle = self.all["throttle"]
        self.groups = self.all["groups"]
        self.limits = self.all["limits"]
        self.schedules = self.all["schedules"]
        self.proxies = self.all["proxies"]
        self.run_cancel = self.all["run_cancel"]
        self.history_record = self.all["history_record"]

    async def load_all(self, client: Lane) -> None:
        """SCRIPT LOAD every script (pipelined: one round trip)."""
        await asyncio.gather(
            *(client.execute("SCRIPT", "LOAD", script.source) for script in self.all.values())
        )


_SCRIPTS: Scripts | None = None
_SCRIPTS_SETTINGS: tuple[float, int, float] | None = None


def scripts() -> Scripts:
    """The process-wide script set (sources are read from the package once, and
    again if the task record settings they embed changed)."""
    global _SCRIPTS, _SCRIPTS_SETTINGS
    settings = (result_ttl(), result_max_per_type(), run_ttl())
    if _SCRIPTS is None or settings != _SCRIPTS_SETTINGS:
        _SCRIPTS, _SCRIPTS_SETTINGS = Scripts(), settings
    return _SCRIPTS
