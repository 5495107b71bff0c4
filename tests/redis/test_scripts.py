"""Lua scripts: sources resolve their includes, every script loads as a Redis
function library, and lost functions are loaded again transparently ("function not
found" -> FUNCTION LOAD -> retry)."""

from __future__ import annotations

import pytest

from fleet.backends.redis import RedisBackend
from fleet.backends.redis.scripts import SCRIPT_NAMES, function_library, load_source, scripts
from fleet.core.records import PushRequest, TaskBody


def test_includes_are_resolved() -> None:
    src = load_source("reserve")
    assert "local function drain_due" in src  # from queue_common
    assert src.count("local K_NORMAL") == 1
    assert set(scripts().all) == set(SCRIPT_NAMES)


def test_a_library_keeps_helpers_at_load_and_binds_keys_per_call() -> None:
    lib = scripts().reserve.library
    assert lib.startswith(f"#!lua name={scripts().reserve.function}\n")
    head, _, call = lib.partition("redis.register_function(")
    assert "local function drain_due" in head  # built once, at FUNCTION LOAD
    assert "local K_NORMAL, K_HIGH, K_LOW\n" in head  # declared there ...
    assert "  K_NORMAL, K_HIGH, K_LOW = KEYS[1], KEYS[2], KEYS[3]" in head  # ... bound per call
    assert "KEYS, ARGV = keys, args" in call and "__bind0()" in call
    with pytest.raises(ValueError, match="not a local"):
        function_library("x", ["redis.call('DEL', KEYS[1])\n"], "return 1")


async def test_every_script_loads_as_a_function_library(rb: RedisBackend) -> None:
    for script in scripts().all.values():
        await rb._r.execute_command("FUNCTION", "LOAD", "REPLACE", script.library)
    listed = await rb._r.execute_command("FUNCTION", "LIST")
    names = {lib["library_name"] for lib in listed}
    assert {s.function for s in scripts().all.values()} <= names


async def test_flushed_functions_are_reloaded(rb: RedisBackend) -> None:
    await rb._r.execute_command("FUNCTION", "FLUSH")
    await rb.queues.push("t", [PushRequest(TaskBody(id="a", payload=1))])
    got = await rb.queues.reserve("t")
    assert await rb.queues.ack("t", [("a", got[0].token)]) == [True]
    assert await rb.pools.claim("nothing") is None
    listed = await rb._r.execute_command("FUNCTION", "LIST")
    names = {lib["library_name"] for lib in listed}
    assert {scripts().all[n].function for n in ("push", "reserve", "ack", "pool_claim")} <= names
