"""rediss:// (TLS) against a real redis-server with a self-signed certificate."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.errors import BackendUnavailable
from fleet.core.records import PushRequest, TaskBody
from tests.support.redis_server import REDIS_BIN, free_port
from tests.support.waits import until, until_sync

OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(
    REDIS_BIN is None or OPENSSL is None, reason="redis-server or openssl not installed"
)


def make_cert(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (also usable as its own CA and as a
    client certificate)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
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
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@contextmanager
def tls_server(directory: Path, *, auth_clients: bool) -> Iterator[int]:
    cert, key = make_cert(directory)
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
            "yes" if auth_clients else "no",
            "--requirepass",
            "tls-secret",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def started() -> str | None:
            # It exits at once when built without TLS; else its port opens.
            if proc.poll() is not None:
                return "exited"
            with socket.socket() as s:
                return "listening" if s.connect_ex(("127.0.0.1", port)) == 0 else None

        if until_sync(started, timeout=10, interval=0.05, what="redis-server on TLS") == "exited":
            pytest.skip("this redis-server was built without TLS")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def tls_port(tmp_path: Path) -> Iterator[int]:
    with tls_server(tmp_path, auth_clients=False) as port:
        yield port


@pytest.fixture
def mtls_port(tmp_path: Path) -> Iterator[int]:
    with tls_server(tmp_path, auth_clients=True) as port:
        yield port


async def open_when_up(url: str) -> Backend:
    async def opened() -> Backend | None:
        try:
            return await open_backend(url)
        except BackendUnavailable as exc:
            if "certificate" in str(exc).lower() or "refused" not in str(exc).lower():
                raise
            return None

    backend = await until(opened, timeout=15, interval=0.1, what="the TLS server to come up")
    assert backend is not None
    return backend


async def test_rediss_url(tls_port: int) -> None:
    url = f"rediss://:tls-secret@127.0.0.1:{tls_port}/0?ssl_cert_reqs=none"
    b = await open_when_up(url)
    try:
        assert "tls-secret" not in repr(b)
        await b.queues.push("t", [PushRequest(TaskBody(id="a", payload={"tls": True}))])
        got = await b.queues.reserve("t")
        assert got[0].body.payload == {"tls": True}
        assert await b.queues.ack("t", [("a", got[0].token)]) == [True]
    finally:
        await b.close()


async def test_verified_mutual_tls(mtls_port: int, tmp_path: Path) -> None:
    """Certificate and hostname checked, client certificate presented: every
    connection of the backend (scripts included) speaks TLS with these options."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    base = f"rediss://:tls-secret@127.0.0.1:{mtls_port}/0"
    url = f"{base}?ssl_ca_certs={cert}&ssl_certfile={cert}&ssl_keyfile={key}"
    b = await open_when_up(url)
    try:
        await b.queues.push("t", [PushRequest(TaskBody(id="m", payload={"mtls": True}))])
        got = await b.queues.reserve("t")
        assert got[0].body.payload == {"mtls": True}
        assert await b.queues.ack("t", [("m", got[0].token)]) == [True]
        assert await b.kv.get("ns", "missing") is None
    finally:
        await b.close()
    # without a client certificate the server refuses us
    with pytest.raises(BackendUnavailable):
        bad = await open_backend(f"{base}?ssl_ca_certs={cert}")
        await bad.close()
    # without the private CA the server's certificate is not trusted
    with pytest.raises(BackendUnavailable):
        bad = await open_backend(f"{base}?ssl_certfile={cert}&ssl_keyfile={key}")
        await bad.close()
