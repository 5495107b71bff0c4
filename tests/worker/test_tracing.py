"""Tracing (issue 26, 5): a submit's W3C ``traceparent`` is kept with its task and each
run is traced as its child, with its emits and the tasks it submits under it; the task
record shows the trace id. In process with the SDK's in-memory exporter on every
backend, through the REST header, and across a real worker process."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import tracing
from fleet.core.catalog import catalog_entry
from fleet.core.submission import make_push_request
from tests.docs.blocks import fenced_blocks, section
from tests.master.conftest import ADMIN, InProcess, auth, live_factory, master, sqlite_url
from tests.support.waits import until
from tests.worker.support import push, running_worker, wait_until
from tests.worker.tracing_plugin import LINK, PAGE, TracedLink, TracedPage

__all__ = ["live_factory", "master", "sqlite_url"]  # fixtures of the master tests

ROOT = Path(__file__).resolve().parents[2]
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[InMemorySpanExporter, Any]]:
    """Tracing on in this process, into an in-memory exporter (and off again after)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("fleet"))
    monkeypatch.setattr(tracing, "ACTIVE", True)
    yield exporter, provider.get_tracer("test")
    provider.shutdown()


def _hex(value: int, digits: int) -> str:
    return format(value, f"0{digits}x")


def by_name(found: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in found if s.name.startswith(prefix)]


def test_traceparents_are_checked_as_w3c_says() -> None:
    assert tracing.valid_traceparent(PARENT) == PARENT
    assert tracing.valid_traceparent(PARENT.upper()) == PARENT
    assert tracing.trace_id_of(PARENT) == "0af7651916cd43dd8448eb211c80319c"
    for bad in (
        None,
        42,
        "",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",  # no flags
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # zero span id
        "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",  # not hex
    ):
        assert tracing.valid_traceparent(bad) is None, bad
    # An invalid one is dropped from the task, not refused (the task still runs).
    assert make_push_request({}, traceparent="garbage").body.traceparent is None
    assert make_push_request({}, traceparent=PARENT).body.traceparent == PARENT


async def test_without_tracing_a_clients_traceparent_is_kept(backend: Backend) -> None:
    assert not tracing.ACTIVE
    (task_id,) = await push(backend, LINK, {"n": 1}, traceparent=PARENT)
    info = await backend.queues.state(LINK, task_id)
    assert info.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert info.to_dict()["trace_id"] == info.trace_id
    (plain,) = await push(backend, LINK, {"n": 2})
    assert (await backend.queues.state(LINK, plain)).trace_id is None


async def test_a_run_is_the_child_of_its_submit(backend: Backend, spans: Any) -> None:
    exporter, tracer = spans
    with tracer.start_as_current_span("client") as client:
        with tracing.submit_span(PAGE) as traceparent:
            (task_id,) = await push(backend, PAGE, {"n": 1}, traceparent=traceparent)
    async with running_worker(backend, [TracedPage, TracedLink]):

        async def all_done() -> bool:
            runs = by_name(exporter.get_finished_spans(), f"fleet.run {LINK}")
            return len(runs) == 2  # the link's failed attempt and its retry

        await wait_until(all_done, what="the page and both attempts of its link")
    found = exporter.get_finished_spans()
    trace_id = client.get_span_context().trace_id
    assert {s.context.trace_id for s in found} == {trace_id}  # one trace, end to end
    (submit,) = by_name(found, f"fleet.submit {PAGE}")
    (run,) = by_name(found, f"fleet.run {PAGE}")
    (emit,) = by_name(found, f"fleet.emit {PAGE}")
    (child_submit,) = by_name(found, f"fleet.submit {LINK}")
    link_runs = sorted(by_name(found, f"fleet.run {LINK}"), key=lambda s: s.start_time or 0)
    assert submit.parent is not None and submit.parent.span_id == client.get_span_context().span_id
    assert run.parent is not None and run.parent.span_id == submit.context.span_id
    assert emit.parent is not None and emit.parent.span_id == run.context.span_id
    assert child_submit.parent is not None
    assert child_submit.parent.span_id == run.context.span_id
    for link_run in link_runs:  # every attempt of the child is the child's submit's child
        assert link_run.parent is not None
        assert link_run.parent.span_id == child_submit.context.span_id
    attrs = dict(run.attributes or {})
    assert attrs["fleet.type"] == PAGE and attrs["fleet.task_id"] == task_id
    assert attrs["fleet.attempt"] == 1 and attrs["fleet.worker_id"] == "w1"
    assert attrs["fleet.outcome"] == "ok"
    failed, retried = (dict(s.attributes or {}) for s in link_runs)
    assert (failed["fleet.attempt"], failed["fleet.outcome"]) == (1, "failed")
    assert failed["fleet.error"] == "RuntimeError: link broke"
    assert link_runs[0].status.status_code.name == "ERROR"
    assert (retried["fleet.attempt"], retried["fleet.outcome"]) == (2, "ok")
    info = await backend.queues.state(PAGE, task_id)
    assert info.trace_id == _hex(trace_id, 32)


async def test_the_rest_header_parents_the_submit(spans: Any, master: InProcess) -> None:
    exporter, _ = spans
    await master.backend.catalog.put(LINK, catalog_entry(TracedLink))
    base = f"/api/v1/automations/{LINK}/tasks"
    headers = {**auth(ADMIN), "traceparent": PARENT}
    one = await master.client.post(base, json={"payload": {"n": 1}}, headers=headers)
    many = await master.client.post(
        f"{base}/batch", json={"tasks": [{"payload": {"n": 2}}]}, headers=headers
    )
    bad = await master.client.post(
        base, json={"payload": {"n": 3}}, headers={**auth(ADMIN), "traceparent": "x"}
    )
    assert one.status_code == many.status_code == bad.status_code == 202, one.text
    ids = [one.json()["task_id"], many.json()["results"][0]["task_id"], bad.json()["task_id"]]
    records = [(await master.client.get(f"{base}/{i}", headers=auth(ADMIN))).json() for i in ids]
    submits = by_name(exporter.get_finished_spans(), f"fleet.submit {LINK}")
    assert len(submits) == 3
    for span in submits[:2]:  # the header's span is their parent
        assert span.parent is not None and span.parent.span_id == int("b7ad6b7169203331", 16)
    assert [r["trace_id"] for r in records[:2]] == ["0af7651916cd43dd8448eb211c80319c"] * 2
    # An invalid header is ignored: the submit starts a trace of its own.
    assert submits[2].parent is None
    assert records[2]["trace_id"] == _hex(submits[2].context.trace_id, 32)


@pytest.mark.parametrize("trust", [False, True])
async def test_a_clients_sampled_flag_follows_the_configured_ratio(
    master: InProcess, monkeypatch: pytest.MonkeyPatch, trust: bool
) -> None:
    """With the sampler's ratio at 0, a client's ``sampled`` flag exports nothing
    (issue 40, finding 10) unless FLEET_TRACE_TRUST_CLIENT says to trust it; at 1, an
    unsampled client's submit is recorded all the same."""
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    if trust:
        monkeypatch.setenv("FLEET_TRACE_TRUST_CLIENT", "1")
    await master.backend.catalog.put(LINK, catalog_entry(TracedLink))
    base = f"/api/v1/automations/{LINK}/tasks"
    unsampled = PARENT[:-2] + "00"
    for ratio, sent in ((0.0, PARENT), (1.0, unsampled)):
        exporter = InMemorySpanExporter()
        provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("fleet"))
        monkeypatch.setattr(tracing, "ACTIVE", True)
        r = await master.client.post(
            base, json={"payload": {"n": 1}}, headers={**auth(ADMIN), "traceparent": sent}
        )
        assert r.status_code == 202, r.text
        record = await master.client.get(f"{base}/{r.json()['task_id']}", headers=auth(ADMIN))
        assert record.json()["trace_id"] == "0af7651916cd43dd8448eb211c80319c"  # still joined
        exported = by_name(exporter.get_finished_spans(), f"fleet.submit {LINK}")
        client_wants = sent.endswith("-01")
        assert len(exported) == (int(client_wants) if trust else int(ratio)), (ratio, trust)
        provider.shutdown()


def _console_spans(text: str) -> list[dict[str, Any]]:
    """The spans the console exporter printed (JSON objects one after another)."""
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    i = 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return out
        span, i = decoder.raw_decode(text, i)
        out.append(span)


async def test_a_real_worker_process_continues_the_trace(spans: Any, tmp_path: Path) -> None:
    exporter, tracer = spans
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    env = {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_SERVICE_NAME": "fleet-test-worker",
        "FLEET_HEARTBEAT_SECONDS": "0.5",
    }
    out = (tmp_path / "spans.out").open("wb")
    err = (tmp_path / "worker.log").open("wb")
    args = [sys.executable, "-m", "fleet", "worker", "--plugin", "tests.worker.tracing_plugin"]
    args += ["--type", PAGE, "--id", "traced-1", "--backend", url]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=err)  # noqa: ASYNC220
    backend = await open_backend(url)
    try:
        with tracer.start_as_current_span("client"):
            with tracing.submit_span(PAGE) as traceparent:
                (task_id,) = await push(backend, PAGE, {"n": 5}, traceparent=traceparent)

        def printed() -> list[dict[str, Any]]:
            return _console_spans((tmp_path / "spans.out").read_text())

        def finished() -> bool:
            names = {s["name"] for s in printed()}
            return {f"fleet.run {PAGE}", f"fleet.emit {PAGE}", f"fleet.submit {LINK}"} <= names

        def finished_alive() -> bool:
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            return finished()

        try:
            await until(finished_alive, timeout=60, interval=0.1)
        except AssertionError as exc:
            raise AssertionError((tmp_path / "worker.log").read_text()[-3000:]) from exc
        record = await backend.queues.state(PAGE, task_id)
    finally:
        proc.terminate()
        proc.wait(30)
        out.close()
        err.close()
        await backend.close()
    (submit,) = by_name(exporter.get_finished_spans(), f"fleet.submit {PAGE}")
    found = {s["name"]: s for s in printed()}
    run, emit = found[f"fleet.run {PAGE}"], found[f"fleet.emit {PAGE}"]
    trace_id = "0x" + _hex(submit.context.trace_id, 32)
    assert run["context"]["trace_id"] == emit["context"]["trace_id"] == trace_id
    assert run["parent_id"] == "0x" + _hex(submit.context.span_id, 16)
    assert emit["parent_id"] == run["context"]["span_id"]
    assert found[f"fleet.submit {LINK}"]["parent_id"] == run["context"]["span_id"]
    assert run["attributes"]["fleet.worker_id"] == "traced-1"
    assert run["attributes"]["fleet.task_id"] == task_id
    assert run["attributes"]["fleet.outcome"] == "ok"
    assert run["resource"]["attributes"]["service.name"] == "fleet-test-worker"
    assert record.trace_id == _hex(submit.context.trace_id, 32)


async def test_the_docs_client_example_runs_as_written(
    live_factory: Any, sqlite_url: str, tmp_path: Path
) -> None:
    page = (ROOT / "docs" / "tracing.md").read_text()
    (block,) = [b for b in fenced_blocks(section(page, "## Turning it on")) if b.lang == "python"]
    backend = await open_backend(sqlite_url)
    try:
        entry = {"type": "page-title", "kind": "BatchAutomation", "queue": {"type": "object"}}
        await backend.catalog.put("page-title", entry)
    finally:
        await backend.close()
    live = live_factory(sqlite_url, sweeper=False)
    env = {**os.environ, "FLEET_MASTER_URL": live.url, "FLEET_ADMIN_TOKEN": ADMIN}
    script = tmp_path / "example.py"
    script.write_text(block.text)
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    printed = _console_spans(done.stdout)
    # The example prints the task id; the exporter prints the spans around it.
    (task_id,) = [x for x in done.stdout.splitlines() if re.fullmatch(r"[0-9a-f]{32}", x)]
    by = {s["name"]: s for s in printed}
    submit, outer = by["fleet.submit page-title"], by["refresh-titles"]
    assert submit["parent_id"] == outer["context"]["span_id"]
    async with httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN)) as http:
        record = (await http.get(f"/api/v1/automations/page-title/tasks/{task_id}")).json()
    assert record["trace_id"] is not None, record
    assert "0x" + record["trace_id"] == submit["context"]["trace_id"]
