"""The script lane's RESP client against a real redis-server: pipelining,
error replies, cancellation, timeouts, lost connections, auth and URL reading."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
from collections.abc import AsyncIterator

import pytest
import redis

from fleet.backends.redis.resp import (
    ReplyError,
    RespClient,
    endpoint_from_url,
    pack,
    pack_evalsha,
)
from tests.support.redis_server import REDIS_BIN, RedisServer

pytestmark = pytest.mark.skipif(REDIS_BIN is None, reason="redis-server not installed")


def client_for(url: str, *, timeout: float | None = 10.0) -> RespClient:
    return RespClient(endpoint_from_url(url, connect_timeout=3.0, command_timeout=timeout))


@pytest.fixture
async def lane(redis_url: str) -> AsyncIterator[RespClient]:
    client = client_for(redis_url)
    yield client
    await client.close()


# ------------------------------------------------------------------ encoding


def test_pack_is_resp_array_of_bulk_strings() -> None:
    assert pack(("SET", "k", "vé")) == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\xc3\xa9\r\n"
    assert (
        pack(("X", 12, 0.5, b"\x00")) == b"*4\r\n$1\r\nX\r\n$2\r\n12\r\n$3\r\n0.5\r\n$1\r\n\x00\r\n"
    )


@pytest.mark.parametrize("bad", [None, True, object()])
def test_pack_refuses_values_without_one_wire_form(bad: object) -> None:
    with pytest.raises(TypeError):
        pack(("SET", "k", bad))


def test_pack_evalsha_equals_the_plain_packing() -> None:
    keys = ["a", "bb", "a"]
    assert pack_evalsha("f" * 40, keys, ["x", 3]) == pack(("EVALSHA", "f" * 40, 3, *keys, "x", 3))
    # the name cache must not change the bytes on a second call
    assert pack_evalsha("f" * 40, keys, ["x", 3]) == pack(("EVALSHA", "f" * 40, 3, *keys, "x", 3))


# ------------------------------------------------------------------ URLs


def test_endpoint_from_tcp_url_with_options() -> None:
    ep = endpoint_from_url(
        "redis://user:pw@example.test:6390/4?socket_timeout=2.5&socket_connect_timeout=1",
        connect_timeout=3.0,
        command_timeout=10.0,
    )
    assert (ep.host, ep.port, ep.db, ep.username, ep.password) == (
        "example.test",
        6390,
        4,
        "user",
        "pw",
    )
    assert ep.command_timeout == 2.5 and ep.connect_timeout == 1.0
    assert ep.tls is None and ep.path is None


def test_endpoint_from_unix_url() -> None:
    ep = endpoint_from_url("unix:///run/r.sock?db=2", connect_timeout=3.0, command_timeout=None)
    assert ep.path == "/run/r.sock" and ep.db == 2 and ep.command_timeout is None


def test_endpoint_tls_options() -> None:
    ep = endpoint_from_url(
        "rediss://h:6380/0?ssl_cert_reqs=none", connect_timeout=3.0, command_timeout=10.0
    )
    assert ep.tls is not None and ep.tls.verify_mode == ssl.CERT_NONE
    assert ep.tls.check_hostname is False and ep.server_hostname == "h"
    strict = endpoint_from_url("rediss://h:6380/0", connect_timeout=3.0, command_timeout=10.0)
    assert strict.tls is not None and strict.tls.verify_mode == ssl.CERT_REQUIRED
    assert strict.tls.check_hostname is True
    with pytest.raises(ValueError, match="ssl_cert_reqs"):
        endpoint_from_url("rediss://h/0?ssl_cert_reqs=maybe", connect_timeout=3, command_timeout=1)
    with pytest.raises(ValueError, match="ssl_min_version"):
        endpoint_from_url("rediss://h/0?ssl_min_version=2", connect_timeout=3, command_timeout=1)


# ------------------------------------------------------------------ calls


async def test_concurrent_calls_get_their_own_replies(lane: RespClient) -> None:
    await lane.execute("SET", "n", 0)
    replies = await asyncio.gather(*(lane.execute("INCRBY", "n", 1) for _ in range(500)))
    assert sorted(replies) == list(range(1, 501))
    # replies come back in the order the commands were written
    assert replies == list(range(1, 501))
    echoed = await asyncio.gather(*(lane.execute("ECHO", f"m{i}") for i in range(200)))
    assert echoed == [f"m{i}" for i in range(200)]


async def test_replies_are_decoded_like_redis_py(lane: RespClient) -> None:
    await lane.execute("RPUSH", "l", "é", "b")
    assert await lane.execute("LRANGE", "l", 0, -1) == ["é", "b"]
    assert await lane.execute("GET", "missing") is None
    assert await lane.execute("EXISTS", "l") == 1
    assert await lane.execute("EVAL", "return {1, 'x', {2}}", 0) == [1, "x", [2]]


async def test_error_reply_fails_only_its_own_call(lane: RespClient) -> None:
    await lane.execute("SET", "s", "text")
    results = await asyncio.gather(
        lane.execute("ECHO", "before"),
        lane.execute("INCR", "s"),
        lane.execute("ECHO", "after"),
        return_exceptions=True,
    )
    assert results[0] == "before" and results[2] == "after"
    assert isinstance(results[1], ReplyError) and "not an integer" in str(results[1])
    assert isinstance(results[1], redis.exceptions.ResponseError)
    with pytest.raises(ReplyError, match="NOSCRIPT"):
        await lane.evalsha("0" * 40, [], [])


async def test_a_cancelled_call_does_not_shift_later_replies(lane: RespClient) -> None:
    slow = asyncio.ensure_future(
        lane.execute("EVAL", "local i = 0 while i < 3e6 do i = i + 1 end return 'slow'", 0)
    )
    await asyncio.sleep(0)  # written, not yet answered
    follower = asyncio.ensure_future(lane.execute("ECHO", "mine"))
    await asyncio.sleep(0)
    slow.cancel()
    assert await follower == "mine"
    assert await lane.execute("ECHO", "next") == "next"


async def test_stalled_server_times_out_then_recovers(own_server: RedisServer) -> None:
    client = client_for(own_server.url, timeout=0.5)
    try:
        assert await client.execute("PING") == "PONG"
        assert own_server.proc is not None
        os.kill(own_server.proc.pid, signal.SIGSTOP)
        try:
            t0 = asyncio.get_running_loop().time()
            results = await asyncio.gather(
                client.execute("PING"), client.execute("PING"), return_exceptions=True
            )
            waited = asyncio.get_running_loop().time() - t0
        finally:
            os.kill(own_server.proc.pid, signal.SIGCONT)
        assert all(isinstance(r, TimeoutError) for r in results), results
        assert 0.4 < waited < 3.0
        # a fresh connection is opened on the next call
        assert await client.execute("PING") == "PONG"
    finally:
        await client.close()


async def test_lost_connection_fails_waiters_and_reconnects(own_server: RedisServer) -> None:
    client = client_for(own_server.url)
    try:
        await client.execute("SET", "k", "v")
        blocked = asyncio.ensure_future(client.execute("EVAL", "while true do end", 0))
        await asyncio.sleep(0.1)
        own_server.stop(kill=True)
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(blocked, 5)
        with pytest.raises(OSError):
            await client.execute("PING")
        own_server.start()
        assert await client.execute("PING") == "PONG"
    finally:
        await client.close()


async def test_close_fails_waiting_calls(own_server: RedisServer) -> None:
    client = client_for(own_server.url)
    assert await client.execute("PING") == "PONG"  # connected: the call below is written
    busy = asyncio.ensure_future(
        client.execute("EVAL", "local i = 0 while i < 2e7 do i = i + 1 end return 1", 0)
    )
    await asyncio.sleep(0.05)
    await client.close()
    with pytest.raises(ConnectionError):
        await busy
    # a closed client may be used again: it reconnects
    assert await client.execute("PING") == "PONG"
    await client.close()


async def test_auth_db_and_client_name(own_server: RedisServer) -> None:
    admin = redis.Redis.from_url(own_server.url)
    admin.config_set("requirepass", "s3cret")
    admin.close()
    base = own_server.url.replace("redis://", "redis://:s3cret@").rsplit("/", 1)[0]
    good = RespClient(
        endpoint_from_url(
            base + "/3", connect_timeout=3.0, command_timeout=5.0, client_name="fleet-scripts"
        )
    )
    try:
        await good.execute("SET", "where", "db3")
        assert await good.execute("CLIENT", "GETNAME") == "fleet-scripts"
        check = redis.Redis.from_url(base + "/3")
        assert check.get("where") == b"db3"
        check.close()
    finally:
        await good.close()
    wrong = client_for(own_server.url.replace("redis://", "redis://:nope@"))
    with pytest.raises(ConnectionError, match="AUTH") as info:
        await wrong.execute("PING")
    assert "nope" not in str(info.value)
    await wrong.close()


async def test_unreachable_server_is_a_connection_error() -> None:
    from tests.support.redis_server import free_port

    client = client_for(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(OSError):
        await client.execute("PING")
    await client.close()
