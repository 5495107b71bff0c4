"""Connection URLs: password in the URL (never printed), and unix sockets."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from fleet.backends import open_backend
from fleet.backends.redis import RedisBackend
from fleet.core.errors import BackendUnavailable
from fleet.core.records import PushRequest, TaskBody
from tests.support.redis_server import REDIS_BIN, RedisServer
from tests.support.waits import until_sync

pytestmark = pytest.mark.skipif(REDIS_BIN is None, reason="redis-server not installed")


@pytest.fixture
def unix_socket() -> Iterator[str]:
    # A short path: unix socket paths are limited to ~100 bytes.
    workdir = tempfile.mkdtemp(prefix="fr-")
    path = str(Path(workdir) / "r.sock")
    proc = subprocess.Popen(
        [
            REDIS_BIN or "redis-server",
            "--port",
            "0",
            "--unixsocket",
            path,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        until_sync(Path(path).exists, timeout=5, what=f"the socket {path}")
        yield path
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


async def roundtrip(url: str) -> None:
    b = await open_backend(url)
    try:
        assert isinstance(b, RedisBackend)
        await b.queues.push("t", [PushRequest(TaskBody(id="a", payload=1))])
        got = await b.queues.reserve("t")
        assert [r.body.id for r in got] == ["a"]
        assert await b.queues.ack("t", [("a", got[0].token)]) == [True]
    finally:
        await b.close()


async def test_unix_socket_url(unix_socket: str) -> None:
    await roundtrip(f"unix://{unix_socket}?db=0")


async def test_password_in_url() -> None:
    server = RedisServer()
    server.start()
    try:
        client = redis.Redis.from_url(server.url)
        client.config_set("requirepass", "hunter2-secret")
        client.close()
        url = server.url.replace("redis://", "redis://:hunter2-secret@")
        await roundtrip(url)
        wrong = RedisBackend(server.url.replace("redis://", "redis://:nope-secret@"))
        with pytest.raises(BackendUnavailable) as info:
            await wrong.connect()
        assert "nope-secret" not in str(info.value)
        assert "nope-secret" not in repr(wrong)
        await wrong.close()
    finally:
        server.cleanup()
