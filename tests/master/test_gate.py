"""The auth gate: no body is read before the token is accepted, read tokens cannot
send bodies, failed authentications are throttled per address — against the ASGI
app and a real master process."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import httpx
import psutil
import pytest

from fleet.master.http.gate import FailedAuth, FailurePolicy
from tests.master.conftest import ADMIN, READ, SCOPED, InProcess, auth
from tests.master.plugins import SCRAPE
from tests.support.master_proc import MASTER_TOKEN, MasterProcess

BATCH = f"/api/v1/automations/{SCRAPE}/tasks/batch"


async def test_no_token_is_401_before_the_body_even_if_it_is_not_json(
    master: InProcess,
) -> None:
    r = await master.client.post(BATCH, content=b"{not json", headers={"content-type": "x"})
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    r = await master.client.post(BATCH, content=b"{", headers={"authorization": "Bearer nope"})
    assert r.status_code == 401 and r.json()["detail"] == "unknown token"
    # The admin gets the usual 422 for the same malformed body.
    r = await master.client.post(BATCH, content=b"{", headers=auth(ADMIN))
    assert r.status_code == 422


async def test_read_tokens_send_no_bodies_and_scoped_ones_only_their_submits(
    master: InProcess,
) -> None:
    r = await master.client.post(BATCH, json={"tasks": []}, headers=auth(READ))
    assert r.status_code == 403
    r = await master.client.post(BATCH, json={"tasks": [{"payload": {"url": "u"}}]},
                                 headers=auth(SCOPED))  # fmt: skip
    assert r.status_code == 202
    r = await master.client.patch(f"/api/v1/automations/{SCRAPE}/config", json={},
                                  headers=auth(SCOPED))  # fmt: skip
    assert r.status_code == 403
    # GETs are not gated: the routes answer as before.
    r = await master.client.get(f"/api/v1/automations/{SCRAPE}/queue", headers=auth(READ))
    assert r.status_code == 200


def test_failure_book_blocks_an_address_then_forgets() -> None:
    now = [0.0]
    book = FailedAuth(FailurePolicy(window_seconds=10, max_failures=3), clock=lambda: now[0])
    for _ in range(3):
        assert book.blocked_for("a") == 0
        book.failed("a")
        now[0] += 1
    assert book.blocked_for("a") == 7.0  # the oldest failure leaves the window at 10
    assert book.blocked_for("b") == 0
    now[0] += 8
    assert book.blocked_for("a") == 0


async def test_guessing_is_throttled_per_address(master: InProcess) -> None:
    path = f"/api/v1/automations/{SCRAPE}/queue"
    codes = [
        (await master.client.get(path, headers={"authorization": f"Bearer guess-{i}"})).status_code
        for i in range(25)
    ]
    assert codes[:20] == [401] * 20 and set(codes[20:]) == {429}
    r = await master.client.get(path, headers={"authorization": "Bearer one-more"})
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1  # same address
    r = await master.client.get(path)
    assert r.status_code == 429  # no token at all: throttled too
    # The failures are throttled, not the address: a valid token still goes through.
    assert (await master.client.get(path, headers=auth(ADMIN))).status_code == 200
    other = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=master.app, client=("10.9.9.9", 4242)),
        base_url="http://master",
    )
    async with other:
        assert (await other.get(path, headers=auth(ADMIN))).status_code == 200


def _rss(pid: int) -> int:
    return int(psutil.Process(pid).memory_info().rss)


def _upload(port: int, size: int, token: str | None) -> bytes:
    """Send headers announcing ``size`` bytes, then as much body as the server takes
    before it answers; returns the answer's first bytes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = f"POST {BATCH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    if token is not None:
        head += f"authorization: Bearer {token}\r\n"
    head += f"content-length: {size}\r\n\r\n"
    sock.sendall(head.encode())
    chunk = b"[" * (1 << 20)
    sent = 0
    answer = b""
    sock.settimeout(0.05)
    try:
        while sent < size:
            try:
                sent += sock.send(chunk[: min(len(chunk), size - sent)])
            except (BrokenPipeError, ConnectionResetError):
                break
            except TimeoutError:
                pass
            try:
                answer = sock.recv(200)
                if answer:
                    break
            except TimeoutError:
                continue
        sock.settimeout(5)
        if not answer:
            answer = sock.recv(200)
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        sock.close()
    return answer


@pytest.mark.slow
async def test_unauthenticated_uploads_cost_no_memory(sqlite_url: str, tmp_path: Any) -> None:
    master = MasterProcess(sqlite_url, tmp_path)
    try:
        await master.wait_ready(timeout=10)
        before = _rss(master.proc.pid)
        answers = await asyncio.gather(
            *(asyncio.to_thread(_upload, master.port, 30 << 20, None) for _ in range(10))
        )
        after = _rss(master.proc.pid)
        print(f"\nmaster RSS: {before / 2**20:.0f} MiB before, {after / 2**20:.0f} MiB after "
              "ten unauthenticated 30 MiB uploads")  # fmt: skip
        assert all(a.startswith(b"HTTP/1.1 401") for a in answers), answers
        assert after - before < 20 << 20
        t0 = time.monotonic()
        answer = await asyncio.to_thread(_upload, master.port, 5 << 20, MASTER_TOKEN)
        assert answer.startswith(b"HTTP/1.1 4")  # read, then refused as JSON: not a 401
        assert not answer.startswith(b"HTTP/1.1 401")
        assert time.monotonic() - t0 < 30
    finally:
        master.close()


def test_short_tokens_are_refused_at_startup(tmp_path: Any) -> None:
    from fleet.core.errors import ConfigError
    from fleet.master.app import create_app
    from tests.master.conftest import memory_url, settings_for

    for bad in (
        {"admin_token": "short-token"},
        {"read_tokens": ["read-token-long-enough", "tiny"]},
        {"token_scopes": {"x": ["t"]}},
    ):
        with pytest.raises(ConfigError) as exc:
            create_app(settings_for(memory_url(), **bad))
        assert "at least 16 characters" in str(exc.value)
        assert "tiny" not in str(exc.value) and "short-token" not in str(exc.value)


def test_fleet_master_refuses_a_short_token(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from fleet.cli import main

    monkeypatch.setenv("FLEET_ADMIN_TOKEN", "hunter2")
    r = CliRunner().invoke(main, ["master", "--port", "1"])
    assert r.exit_code == 2 and "FLEET_ADMIN_TOKEN has 7 characters" in r.output
    assert "hunter2" not in r.output


def test_the_token_file_is_used_only_when_safe(tmp_path: Any) -> None:
    import os

    from fleet.client.tokenfile import UnsafeTokenFile, ensure_token, read_token

    path = tmp_path / "state" / "admin-token"
    token, where = ensure_token(path)
    assert where == path and len(token) >= 32 and oct(path.stat().st_mode & 0o777) == "0o600"
    assert ensure_token(path)[0] == token  # reused
    # Readable by others: refused, never reused.
    os.chmod(path, 0o644)
    with pytest.raises(UnsafeTokenFile, match="read or written by others"):
        read_token(path)
    with pytest.raises(UnsafeTokenFile):
        ensure_token(path)
    # A planted symbolic link is never followed.
    os.chmod(path, 0o600)
    link = tmp_path / "link-token"
    link.symlink_to(path)
    with pytest.raises(UnsafeTokenFile, match="symbolic link"):
        read_token(link)
    with pytest.raises(UnsafeTokenFile, match="symbolic link"):
        ensure_token(link)
    assert read_token(tmp_path / "absent") is None


async def test_deleting_an_unknown_type_or_pool_is_404(master: InProcess) -> None:
    H = auth(ADMIN)
    r = await master.client.delete("/api/v1/automations/never-heard-of", headers=H)
    assert r.status_code == 404 and "unknown automation type" in r.text
    r = await master.client.delete("/api/v1/pools/never-heard-of", headers=H)
    assert r.status_code == 404 and "unknown pool" in r.text
    # A type with only leftover state (no catalog entry) is still deletable.
    await master.backend.queues.push("leftover", [])
    from fleet.core.submission import make_push_request

    await master.backend.queues.push("leftover", [make_push_request({"x": 1})])
    r = await master.client.delete("/api/v1/automations/leftover", headers=H)
    assert r.status_code == 200
    await master.backend.pools.put("adhoc", {"v": 1}, {})
    assert (await master.client.delete("/api/v1/pools/adhoc", headers=H)).json() == {"dropped": 1}


async def _guess(client: httpx.AsyncClient, n: int, forwarded: str | None) -> list[int]:
    path = f"/api/v1/automations/{SCRAPE}/queue"
    codes = []
    for i in range(n):
        headers = {"authorization": f"Bearer wrong-guess-{i}"}
        if forwarded is not None:
            headers["x-forwarded-for"] = forwarded.format(i=i)
        codes.append((await client.get(path, headers=headers)).status_code)
    return codes


@pytest.mark.slow
async def test_a_forged_forwarded_for_escapes_nothing(sqlite_url: str, tmp_path: Any) -> None:
    """A real master: X-Forwarded-For is ignored unless FLEET_TRUSTED_PROXIES names
    the peer; then the client it names is throttled, and only that one."""
    plain = tmp_path / "plain"
    plain.mkdir()
    master = MasterProcess(sqlite_url, plain)
    try:
        async with master.client() as http:
            await master.wait_ready()
            codes = await _guess(http, 25, "203.0.113.{i}")
            assert codes[:20] == [401] * 20 and set(codes[20:]) == {429}, codes
            path = f"/api/v1/automations/{SCRAPE}/queue"
            ok = await http.get(path)  # the client's admin token
            assert ok.status_code in (200, 404), ok.text  # never 429
        assert "203.0.113." not in master.log()
    finally:
        master.close()
    behind = tmp_path / "behind"
    behind.mkdir()
    master = MasterProcess(sqlite_url, behind, env={"FLEET_TRUSTED_PROXIES": "127.0.0.1"})
    try:
        async with master.client() as http:
            await master.wait_ready()
            # Each forwarded client is its own: 25 distinct ones are never throttled...
            assert set(await _guess(http, 25, "203.0.113.{i}")) == {401}
            # ...and one that keeps failing is, alone.
            codes = await _guess(http, 22, "198.51.100.7")
            assert codes[:20] == [401] * 20 and set(codes[20:]) == {429}, codes
            assert set(await _guess(http, 3, "198.51.100.8")) == {401}
    finally:
        master.close()
