"""Request headers are bounded before anything else (issue 40, finding 3), against a
real ``fleet master`` process over raw sockets: a head past ``FLEET_MAX_HEADER_BYTES``
or ``FLEET_MAX_HEADERS`` is answered 431 while it still arrives, and however big the
headers sent, the master's memory does not grow; trace context past the W3C sizes is
ignored."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.master.http.headers import bounded_trace_context
from tests.support.master_proc import MasterProcess, bare_entry
from tests.support.waits import until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

TYPE = "header-limits"
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
async def master(tmp_path: Path) -> Any:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    async with await open_backend(url) as b:
        await b.catalog.put(TYPE, bare_entry(TYPE))
    proc = MasterProcess(url, tmp_path, env={"FLEET_LOG_LEVEL": "WARNING"})
    try:
        await proc.wait_ready()
        yield proc
    finally:
        proc.close()


def _exchange(port: int, head: bytes, *, chunk: int = 1 << 16) -> bytes:
    """Send ``head`` (in pieces, until the master stops taking them), then read the
    answer's first bytes (b"" if the connection was reset first)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            for start in range(0, len(head), chunk):
                s.sendall(head[start : start + chunk])
        except OSError:
            pass  # the master closed it: the answer may still be readable
        try:
            return s.recv(200)
        except OSError:
            return b""


def _request(*fields: bytes, path: bytes = b"/healthz") -> bytes:
    return b"GET " + path + b" HTTP/1.1\r\nhost: x\r\n" + b"".join(fields) + b"\r\n"


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_heads_past_the_bounds_are_431(master: MasterProcess) -> None:
    port = master.port
    ok = await asyncio.to_thread(_exchange, port, _request(b"x-a: " + b"a" * 8000 + b"\r\n"))
    assert ok.startswith(b"HTTP/1.1 200"), ok
    big = _request(b"x-a: " + b"a" * 20_000 + b"\r\n")  # one field, in one read
    assert (await asyncio.to_thread(_exchange, port, big)).startswith(b"HTTP/1.1 431")
    many = _request(*[b"x-%d: 1\r\n" % i for i in range(120)])
    assert (await asyncio.to_thread(_exchange, port, many)).startswith(b"HTTP/1.1 431")
    enough = _request(*[b"x-%d: 1\r\n" % i for i in range(90)])
    assert (await asyncio.to_thread(_exchange, port, enough)).startswith(b"HTTP/1.1 200")
    long_url = _request(path=b"/healthz?" + b"q" * 40_000)
    assert (await asyncio.to_thread(_exchange, port, long_url)).startswith(b"HTTP/1.1 431")
    # a head sent a piece at a time is refused as it grows, not once complete
    trickle = _request(b"x-a: " + b"a" * 200_000 + b"\r\n")
    answer = await asyncio.to_thread(_exchange, port, trickle, chunk=4096)
    assert answer.startswith(b"HTTP/1.1 431"), answer


async def test_huge_heads_hold_no_memory(master: MasterProcess) -> None:
    pid = master.proc.pid
    # warm up the request path before the baseline
    await asyncio.to_thread(_exchange, master.port, _request())
    before = _rss_kb(pid)
    huge = _request(b"x-big: " + b"a" * (32 << 20) + b"\r\n")
    answers: list[bytes] = []

    def attack() -> None:
        answers.append(_exchange(master.port, huge))

    threads = [threading.Thread(target=attack) for _ in range(20)]
    started = time.monotonic()
    for t in threads:
        t.start()
    peak = before

    def sampled_until_answered() -> bool:
        nonlocal peak
        peak = max(peak, _rss_kb(pid))
        return not any(t.is_alive() for t in threads)

    await until(sampled_until_answered, timeout=120, what="every attack answered")
    after = _rss_kb(pid)
    print(
        f"\n20 heads of 32 MiB: master RSS {before // 1024} MiB before, peak "
        f"{peak // 1024} MiB, {after // 1024} MiB after ({time.monotonic() - started:.1f} s); "
        f"answers {sorted({a[:12] for a in answers})}"
    )
    assert peak - before < 30 << 10, (before, peak)
    assert all(a == b"" or a.startswith(b"HTTP/1.1 431") for a in answers), answers
    assert (await asyncio.to_thread(_exchange, master.port, _request())).startswith(b"HTTP/1.1 200")


async def test_trace_context_past_its_sizes_is_ignored(master: MasterProcess) -> None:
    async with master.client() as http:
        tasks = f"/api/v1/automations/{TYPE}/tasks"
        r = await http.post(tasks, json={"payload": {}}, headers={"traceparent": TRACE})
        kept = (await http.get(f"{tasks}/{r.json()['task_id']}")).json()
        assert kept["trace_id"] == TRACE.split("-")[1]
        for oversize in (TRACE + "-" + "0" * 2000, TRACE + "0"):
            r = await http.post(tasks, json={"payload": {}}, headers={"traceparent": oversize})
            assert r.status_code == 202, r.text
            dropped = (await http.get(f"{tasks}/{r.json()['task_id']}")).json()
            assert dropped["trace_id"] is None


def test_trace_context_bounds() -> None:
    fine = [(b"traceparent", TRACE.encode()), (b"tracestate", b"a=1,b=2")]
    assert bounded_trace_context(fine) is None
    long_parent = [(b"traceparent", TRACE.encode() + b"-00"), (b"x", b"y")]
    assert bounded_trace_context(long_parent) == [(b"x", b"y")]
    members = b",".join(b"k%d=v" % i for i in range(33))
    assert bounded_trace_context([*fine[:1], (b"tracestate", members)]) == fine[:1]
    # the lines of a tracestate count together
    lines = [(b"tracestate", b"k=" + b"v" * 300), (b"tracestate", b"j=" + b"v" * 300)]
    assert bounded_trace_context([*fine[:1], *lines]) == fine[:1]
    assert bounded_trace_context([*fine[:1], lines[0]]) is None
