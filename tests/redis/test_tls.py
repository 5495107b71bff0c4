"""rediss:// (TLS) against a real redis-server with a self-signed certificate."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.records import PushRequest, TaskBody
from tests.support.redis_server import REDIS_BIN, free_port

OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(
    REDIS_BIN is None or OPENSSL is None, reason="redis-server or openssl not installed"
)


@pytest.fixture
def tls_port(tmp_path: Path) -> Iterator[int]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            OPENSSL or "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            REDIS_BIN or "redis-server",
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--tls-ca-cert-file",
            str(cert),
            "--tls-auth-clients",
            "no",
            "--requirepass",
            "tls-secret",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.3)
        if proc.poll() is not None:
            pytest.skip("this redis-server was built without TLS")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


async def test_rediss_url(tls_port: int) -> None:
    url = f"rediss://:tls-secret@127.0.0.1:{tls_port}/0?ssl_cert_reqs=none"
    for _ in range(150):
        try:
            b = await open_backend(url)
            break
        except ConnectionError:
            await asyncio.sleep(0.1)
    else:
        pytest.fail("TLS server did not come up")
    try:
        assert "tls-secret" not in repr(b)
        await b.push("t", [PushRequest(TaskBody(id="a", payload={"tls": True}))])
        got = await b.reserve("t")
        assert got[0].body.payload == {"tls": True}
        assert await b.ack("t", [("a", got[0].token)]) == [True]
    finally:
        await b.close()
