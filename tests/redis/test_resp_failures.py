"""How the script lane fails, against real redis-servers: error replies that mean
"not now" (READONLY, MASTERDOWN, BUSY, LOADING) become BackendUnavailable and the
rest BackendError, a reply that cannot be decoded fails only its own call, writes
wait while the transport is paused, and URLs for Sentinel or Cluster are refused
when the backend is made."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from redis.exceptions import (
    BusyLoadingError,
    DataError,
    MasterDownError,
    ReadOnlyError,
    ResponseError,
)

from fleet.backends import open_backend
from fleet.backends.redis import RedisBackend
from fleet.backends.redis.core import translate
from fleet.backends.redis.resp import (
    ReplyError,
    RespClient,
    endpoint_from_url,
    refuse_unservable,
)
from fleet.backends.redis.scripts import scripts
from fleet.core.errors import BackendError, BackendUnavailable, ConfigError, UnsupportedBackend
from fleet.core.records import PushRequest, TaskBody, new_id
from tests.support.redis_server import REDIS_BIN, RedisServer, free_port, pong, server_pid
from tests.support.waits import until, until_sync

pytestmark = pytest.mark.skipif(REDIS_BIN is None, reason="redis-server not installed")


class Server:
    """A redis-server with extra arguments (a replica, a loading or busy server)."""

    def __init__(self, directory: Path, *extra: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        # A server that exits at once lost a race for its port (or, in cluster mode,
        # for its bus port, the port + 10000): try another one.
        for _ in range(5):
            if self._start(directory, extra):
                return
        raise RuntimeError(f"redis-server {' '.join(extra)} did not start")

    def _start(self, directory: Path, extra: tuple[str, ...]) -> bool:
        self.port = free_port()
        args = [REDIS_BIN or "redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(directory), "--appendonly", "no", "--save", ""]
        args += ["--logfile", str(directory / "redis.log"), *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc = self.proc

        def settled() -> str:
            # INFO answers while loading or cut off from a primary (PING may not)
            if server_pid(self.port) == proc.pid:
                return "serving"
            return "exited" if proc.poll() is not None else ""

        try:
            if until_sync(settled, timeout=10, what="redis-server to answer") == "serving":
                return True
        except AssertionError:
            pass
        self.stop()
        return False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@contextmanager
def server(directory: Path, *extra: str) -> Iterator[Server]:
    srv = Server(directory, *extra)
    try:
        yield srv
    finally:
        srv.stop()


def lane_for(url: str, *, timeout: float | None = 10.0) -> RespClient:
    return RespClient(endpoint_from_url(url, connect_timeout=3.0, command_timeout=timeout))


@pytest.fixture
async def lane(redis_url: str) -> AsyncIterator[RespClient]:
    client = lane_for(redis_url)
    yield client
    await client.close()


def wait_synced(replica: Server) -> None:
    client = redis.Redis.from_url(replica.url)
    try:
        until_sync(
            lambda: client.info("replication").get("master_link_status") == "up",
            interval=0.05,
            what="the replica to sync",
        )
    finally:
        client.close()


# ------------------------------------------------------------------ one place for the mapping


def test_translate_maps_both_clients_errors() -> None:
    url = "redis://h:6379/0"
    not_now = [
        ReplyError("READONLY You can't write against a read only replica."),
        ReplyError("BUSY Redis is busy running a script."),
        ReplyError("LOADING Redis is loading the dataset in memory"),
        ReplyError("MASTERDOWN Link with MASTER is down"),
        ReplyError("TRYAGAIN Multiple keys request during rehashing of slot"),
        ReplyError("CLUSTERDOWN The cluster is down"),
        # redis-py cuts the code off the errors it has a class for
        ReadOnlyError("You can't write against a read only replica."),
        MasterDownError("Link with MASTER is down"),
        BusyLoadingError("Redis is loading the dataset in memory"),
        ResponseError("BUSY Redis is busy running a script."),
        ConnectionError("connection to redis lost"),
        TimeoutError("redis did not answer within 10 s"),
        redis.exceptions.ConnectionError("Error 111 connecting"),
        redis.exceptions.TimeoutError("Timeout reading from socket"),
    ]
    for exc in not_now:
        assert type(translate(url, exc)) is BackendUnavailable, exc
    refused = [
        ReplyError("ERR value is not an integer or out of range"),
        ReplyError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ReplyError("NOSCRIPT No matching script."),
        ResponseError("ERR unknown command"),
        DataError("Invalid input of type: 'NoneType'"),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    ]
    for exc in refused:
        assert type(translate(url, exc)) is BackendError, exc
    # not a driver's: left alone
    others: list[BaseException] = [
        TypeError("bad argument"),
        BackendUnavailable("x"),
        asyncio.CancelledError(),
    ]
    for other in others:
        assert translate(url, other) is None


def test_reply_error_code() -> None:
    assert ReplyError("NOSCRIPT No matching script.").code == "NOSCRIPT"
    assert ReplyError("ERR").code == "ERR"


# ------------------------------------------------------------------ READONLY, MASTERDOWN


async def test_readonly_replica_is_unavailable_and_the_lane_reconnects(tmp_path: Path) -> None:
    with server(tmp_path / "p", "--repl-diskless-sync-delay", "0") as primary:
        with server(tmp_path / "r", "--replicaof", "127.0.0.1", str(primary.port)) as replica:
            wait_synced(replica)
            client = lane_for(replica.url)
            try:
                first = await client.execute("CLIENT", "ID")
                old = client._conn
                # commands written behind the READONLY one are answered on the old connection
                results = await asyncio.gather(
                    client.execute("GET", "a"),
                    client.execute("SET", "a", "1"),
                    client.execute("CLIENT", "ID"),
                    return_exceptions=True,
                )
                assert results[0] is None and results[2] == first
                assert isinstance(results[1], ReplyError) and results[1].code == "READONLY"
                # ...then that connection is retired: the next call opens a new one
                assert await client.execute("CLIENT", "ID") != first
                assert old is not None and old.transport is not None
                assert old.transport.is_closing()
            finally:
                await client.close()

            b = RedisBackend(replica.url)
            await b.connect()  # PING, INFO and SCRIPT LOAD work on a replica
            try:
                with pytest.raises(BackendUnavailable, match="READONLY"):
                    await b.kv.set("ns", "k", "v")  # the lane, a plain command
                with pytest.raises(BackendUnavailable, match="READONLY"):
                    await b.queues.push(
                        "t", [PushRequest(TaskBody(id=new_id(), payload=1))]
                    )  # a script
                with pytest.raises(BackendUnavailable, match="READONLY"):
                    await b.catalog.put("t", {"x": 1})  # redis-py's ReadOnlyError
                assert await b.kv.get("ns", "k") is None  # reads are served
            finally:
                await b.close()


async def test_masterdown_is_unavailable(tmp_path: Path) -> None:
    gone = str(free_port())
    args = ("--replicaof", "127.0.0.1", gone, "--replica-serve-stale-data", "no")
    with server(tmp_path, *args) as replica:
        client = lane_for(replica.url)
        try:
            with pytest.raises(ReplyError) as info:
                await client.execute("GET", "k")
            assert info.value.code == "MASTERDOWN"
        finally:
            await client.close()
        b = RedisBackend(replica.url)
        try:
            with pytest.raises(BackendUnavailable, match="MASTERDOWN"):
                await b.kv.get("ns", "k")
            with pytest.raises(BackendUnavailable, match="MASTERDOWN"):
                await b.connect()  # redis-py's MasterDownError on PING
        finally:
            await b.close()


# ------------------------------------------------------------------ BUSY


async def test_busy_server_is_unavailable_until_the_script_is_killed(tmp_path: Path) -> None:
    with server(tmp_path, "--busy-reply-threshold", "100") as srv:
        b = RedisBackend(srv.url)
        await b.connect()
        hog = lane_for(srv.url)
        try:
            busy = asyncio.ensure_future(hog.execute("EVAL", "while true do end", 0))
            await asyncio.sleep(0.4)  # past the threshold: others get BUSY
            t0 = time.monotonic()
            with pytest.raises(BackendUnavailable, match="BUSY"):
                await b.kv.get("ns", "k")
            with pytest.raises(BackendUnavailable, match="BUSY"):
                await b.queues.push("t", [PushRequest(TaskBody(id=new_id(), payload=1))])
            with pytest.raises(BackendUnavailable, match="BUSY"):
                await b.catalog.get("t")  # redis-py: a plain ResponseError "BUSY ..."
            assert time.monotonic() - t0 < 3.0
            admin = redis.Redis.from_url(srv.url)
            admin.script_kill()
            admin.close()
            with pytest.raises(ReplyError) as info:
                await asyncio.wait_for(busy, 5)
            assert "SCRIPT KILL" in str(info.value)
            # the same backend serves again, on the same connection
            await b.kv.set("ns", "k", "v")
            assert await b.kv.get("ns", "k") == "v"
        finally:
            await hog.close()
            await b.close()


# ------------------------------------------------------------------ LOADING


async def test_loading_server_is_unavailable_then_serves(tmp_path: Path) -> None:
    with server(tmp_path) as first:
        admin = redis.Redis.from_url(first.url)
        admin.eval("for i = 1, 3000 do redis.call('SET', 'k' .. i, i) end", 0)
        admin.save()
        admin.close()
    # 3000 keys at 1 ms each: the restarted server answers LOADING for about 3 s
    slow = ("--key-load-delay", "1000", "--loading-process-events-interval-bytes", "1024")
    with server(tmp_path, *slow) as srv:
        client = lane_for(srv.url)
        b = RedisBackend(srv.url)
        try:
            with pytest.raises(ReplyError) as info:
                await client.execute("GET", "k1")
            assert info.value.code == "LOADING"
            with pytest.raises(BackendUnavailable, match="LOADING"):
                await b.kv.get("ns", "k")
            with pytest.raises(BackendUnavailable):
                await b.connect()  # redis-py's BusyLoadingError on PING
            await until(lambda: pong(srv.port), interval=0.05, what="the server to finish loading")
            await b.connect()
            assert await client.execute("GET", "k1") == "1"
            assert await b.counters.get("missing") == 0
        finally:
            await client.close()
            await b.close()


# ------------------------------------------------------------------ NOSCRIPT


async def test_a_lost_function_is_loaded_again_for_every_pipelined_caller(
    rb: RedisBackend,
) -> None:
    """Scripts run as Redis functions (FCALL): a server that lost them (FUNCTION
    FLUSH, a restart without persistence) gets the library again, transparently,
    whichever of 50 pipelined callers meets the loss."""
    await rb._r.execute_command("FUNCTION", "FLUSH")
    pushes = [
        rb.queues.push("t", [PushRequest(TaskBody(id=f"n{i}", payload=i))]) for i in range(50)
    ]
    results = await asyncio.gather(*pushes)
    assert all(r[0].queued for r in results)
    listed = await rb._r.execute_command("FUNCTION", "LIST", "LIBRARYNAME", scripts().push.function)
    assert [lib["library_name"] for lib in listed] == [scripts().push.function]
    got = await rb.queues.reserve("t", k=50)
    assert sorted(r.body.id for r in got) == sorted(f"n{i}" for i in range(50))


async def test_without_functions_scripts_run_by_evalsha_and_noscript_reloads(
    rb: RedisBackend, redis_url: str
) -> None:
    """A user that may not load or call functions (an ACL, or Redis < 7, which has
    none) runs the same scripts by EVALSHA; a lost script cache is loaded again for
    every pipelined caller."""
    await rb._r.execute_command(
        "ACL",
        "SETUSER",
        "nofunctions",
        "on",
        ">pw",
        "~*",
        "&*",
        "+@all",
        "-function",
        "-fcall",
        "-fcall_ro",
    )
    user_url = redis_url.replace("redis://", "redis://nofunctions:pw@")
    b = RedisBackend(user_url)
    await b.connect()
    try:
        await rb._r.script_flush()
        await rb._r.execute_command("FUNCTION", "FLUSH")
        pushes = [
            b.queues.push("t", [PushRequest(TaskBody(id=f"n{i}", payload=i))]) for i in range(50)
        ]
        results = await asyncio.gather(*pushes)
        assert all(r[0].queued for r in results)
        assert all(await rb._r.script_exists(scripts().push.sha))
        assert await rb._r.execute_command("FUNCTION", "LIST") == []  # nothing loaded
        got = await b.queues.reserve("t", k=50)
        assert sorted(r.body.id for r in got) == sorted(f"n{i}" for i in range(50))
    finally:
        await b.close()
        await rb._r.execute_command("ACL", "DELUSER", "nofunctions")


# ------------------------------------------------------------------ undecodable replies


async def test_an_undecodable_reply_fails_only_its_own_call(
    lane: RespClient, redis_url: str
) -> None:
    admin = redis.Redis.from_url(redis_url)
    admin.set("bad", b"\xff\xfe")
    admin.rpush("list", b"ok", b"\xc3", b"fine")
    admin.close()
    first = await lane.execute("CLIENT", "ID")
    results = await asyncio.gather(
        lane.execute("ECHO", "before"),
        lane.execute("GET", "bad"),
        lane.execute("LRANGE", "list", 0, -1),  # one bad element inside an array
        lane.execute("ECHO", "after"),
        return_exceptions=True,
    )
    assert results[0] == "before" and results[3] == "after"
    assert isinstance(results[1], UnicodeDecodeError)
    assert isinstance(results[2], UnicodeDecodeError)
    # the same connection carries on
    assert await lane.execute("CLIENT", "ID") == first


async def test_an_undecodable_value_is_a_backend_error(rb: RedisBackend) -> None:
    await rb._r.set("fleet:kv:ns:bad", b"\xff")
    with pytest.raises(BackendError) as info:
        await rb.kv.get("ns", "bad")
    assert not isinstance(info.value, BackendUnavailable)
    assert "UTF-8" in str(info.value)
    await rb.kv.set("ns", "good", "v")
    assert await rb.kv.get("ns", "good") == "v"


async def test_an_unparsable_stream_drops_the_connection() -> None:
    """A reply hiredis cannot frame: every waiting call fails, the next reconnects.
    (A real redis-server never sends one; this listener answers its second command
    with bytes that are no RESP.)"""
    commands = 0
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal commands
        writers.append(writer)
        while await reader.read(65536):
            commands += 1
            writer.write(b"+PONG\r\n" if commands != 2 else b"!nonsense\r\n")

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = lane_for(f"redis://127.0.0.1:{port}/0")
    try:
        assert await client.execute("PING") == "PONG"
        results = await asyncio.gather(
            client.execute("PING"), client.execute("PING"), return_exceptions=True
        )
        assert all(isinstance(r, ConnectionError) for r in results), results
        assert "unreadable" in str(results[0])
        assert await client.execute("PING") == "PONG"  # a new connection
    finally:
        await client.close()
        listener.close()
        for writer in writers:
            writer.close()
            await writer.wait_closed()
        await listener.wait_closed()


# ------------------------------------------------------------------ flow control


BIG = "x" * (512 * 1024)
N_BIG = 64  # 32 MiB: more than the kernel's socket buffers hold


async def test_writes_wait_while_the_transport_is_paused(own_server: RedisServer) -> None:
    client = lane_for(own_server.url, timeout=20.0)
    assert own_server.proc is not None
    pid = own_server.proc.pid
    try:
        await client.execute("PING")
        conn = client._conn
        assert conn is not None and conn.transport is not None
        high = conn.transport.get_write_buffer_limits()[1]
        os.kill(pid, signal.SIGSTOP)
        try:
            calls = [
                asyncio.ensure_future(client.execute("SET", f"big{i}", BIG)) for i in range(N_BIG)
            ]
            await asyncio.sleep(0.5)
            buffered = conn.transport.get_write_buffer_size()
            written = len(conn._waiting)
        finally:
            os.kill(pid, signal.SIGCONT)
        # at most one command past the high-water mark is buffered; the rest wait unwritten
        assert buffered <= high + len(BIG) + 64, buffered
        assert written < N_BIG
        assert await asyncio.wait_for(asyncio.gather(*calls), 10) == ["OK"] * N_BIG
        assert await client.execute("DBSIZE") == N_BIG
    finally:
        await client.close()


async def test_calls_waiting_to_write_fail_when_the_server_stalls(own_server: RedisServer) -> None:
    client = lane_for(own_server.url, timeout=0.5)
    assert own_server.proc is not None
    pid = own_server.proc.pid
    try:
        await client.execute("PING")
        os.kill(pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            calls = [client.execute("SET", f"big{i}", BIG) for i in range(N_BIG // 2)]
            results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 9)
            waited = time.monotonic() - t0
        finally:
            os.kill(pid, signal.SIGCONT)
        # nobody hangs: the written calls time out, and those that waited to write
        # fail with them, as the connection is dropped
        assert all(isinstance(r, OSError) for r in results), {type(r) for r in results}
        assert any(isinstance(r, TimeoutError) for r in results)
        unsent = [r for r in results if "before the call was sent" in str(r)]
        assert unsent and all(isinstance(r, ConnectionError) for r in unsent)
        assert waited < 3.0
        assert await client.execute("PING") == "PONG"
    finally:
        await client.close()


# ------------------------------------------------------------------ URLs it cannot serve

# redis+sentinel:// is served (tests/redis/test_sentinel.py); these forms are not.
SENTINEL_URLS = [
    "rediss+sentinel://:pw-secret@sentinel-a:26379/mymaster",
    "sentinel://sentinel-a:26379",
    "redis://h:6379/0?service_name=mymaster",
]
# redis+cluster:// is served (tests/redis/test_cluster.py); these forms are not.
CLUSTER_URLS = [
    "rediss-cluster://:pw-secret@node-a:7000",
    "redis://node-a:7000/0?cluster=true",
    "redis://node-a:7000/0?read_from_replicas=1",
]


@pytest.mark.parametrize("url", SENTINEL_URLS)
async def test_sentinel_urls_are_refused_when_the_backend_is_made(url: str) -> None:
    with pytest.raises(UnsupportedBackend, match="asks for Redis Sentinel") as info:
        RedisBackend(url)
    assert "pw-secret" not in str(info.value)
    with pytest.raises(UnsupportedBackend, match="Sentinel"):
        await open_backend(url)
    with pytest.raises(UnsupportedBackend, match="script lane"):
        refuse_unservable(url)


@pytest.mark.parametrize("url", CLUSTER_URLS)
async def test_cluster_urls_are_refused_when_the_backend_is_made(url: str) -> None:
    with pytest.raises(UnsupportedBackend, match="Cluster") as info:
        RedisBackend(url)
    assert "pw-secret" not in str(info.value)
    with pytest.raises(UnsupportedBackend, match="Cluster"):
        await open_backend(url)


@pytest.mark.parametrize(
    "url",
    [
        "redis+cluster://:pw-secret@node-a:7000/1",  # a cluster has one database
        "redis+cluster://:pw-secret@/0",  # no node
        "redis+cluster://:pw-secret@node-a:x",
        "redis+cluster://:pw-secret@node-a:7000?read_from_replicas=1",
    ],
)
def test_a_cluster_url_it_cannot_read_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        RedisBackend(url)
    assert "pw-secret" not in str(info.value)


def test_plain_urls_are_not_refused() -> None:
    for url in ("redis://h:6379/0?socket_timeout=5", "rediss://h/0", "unix:///r.sock?db=1"):
        refuse_unservable(url)


async def test_a_cluster_mode_server_is_refused_at_connect(tmp_path: Path) -> None:
    args = ("--cluster-enabled", "yes", "--cluster-config-file", str(tmp_path / "nodes.conf"))
    with server(tmp_path, *args) as srv:
        b = RedisBackend(srv.url)
        with pytest.raises(UnsupportedBackend, match="redis\\+cluster://"):
            await b.connect()
        await b.close()
