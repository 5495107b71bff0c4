"""``fleet run TYPE``: one automation in this process, no master.

Tasks come from the caller (``--payload``, a JSON-lines file or stdin); emits
are written to ``out`` as JSON lines; the run ends when every given task is
done or dead (a continuous automation runs until interrupted).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Iterable, Iterator
from typing import IO, Any

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.memory.store import drop_store
from fleet.core.automation import Automation, BatchAutomation
from fleet.core.backoff import RetryPolicy
from fleet.core.records import dumps
from fleet.core.submission import make_push_request
from fleet.worker.agent import Worker
from fleet.worker.outcomes import Finished
from fleet.worker.process import install_signal_handlers

_FINAL = {"done", "dead", "cancelled", "unknown"}


def read_json_lines(lines: Iterable[str]) -> Iterator[Any]:
    """Parse one JSON value per non-blank line.

    Raises:
        ValueError: A line is not JSON (the message gives its number).
    """
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {number}: not JSON: {exc.msg}") from exc


class _Tracker:
    """Which of our tasks are finished, and how."""

    def __init__(self, ids: list[str]) -> None:
        self.pending = set(ids)
        self.dead: set[str] = set()
        self.done = 0
        self.all_done = asyncio.Event()
        if not self.pending:
            self.all_done.set()

    def finish(self, task_id: str, outcome: str) -> None:
        if task_id not in self.pending:
            return
        self.pending.discard(task_id)
        if outcome == "dead":
            self.dead.add(task_id)
        self.done += 1
        if not self.pending:
            self.all_done.set()

    def on_finished(self, task_id: str, outcome: Finished) -> None:
        if outcome in ("done", "dead"):
            self.finish(task_id, outcome)


async def _print_emits(
    backend: Backend, automation_type: str, worker_id: str, cursor: str | None, out: IO[str]
) -> str | None:
    while True:
        entries = await backend.stream_read(automation_type, after=cursor, n=500)
        if not entries:
            return cursor
        for entry in entries:
            if entry.worker_id == worker_id:
                out.write(dumps(entry.payload) + "\n")
        out.flush()
        cursor = entries[-1].id


async def run_local(
    cls: type[Automation[Any]],
    payloads: list[Any],
    *,
    backend_url: str | None = None,
    slots: int | None = None,
    config: dict[str, Any] | None = None,
    out: IO[str] | None = None,
    progress: bool = False,
    grace: float = 30.0,
    signals: bool = True,
) -> int:
    """Run one automation in-process until its given tasks are finished.

    Args:
        cls: The automation class.
        payloads: Task payloads (JSON values) for a batch automation.
        backend_url: Where the queue lives (default: a ``memory://`` store of
            this run only, dropped when it ends).
        slots: Slots to run (default: the config's).
        config: Config fields (validated against the automation's ``Config``).
        out: Where emits go as JSON lines (default stdout).
        progress: Show a progress bar on stderr.
        grace: Shutdown grace period.
        signals: Install SIGINT/SIGTERM handlers (graceful first, forced second).

    Returns:
        1 if any task was dead-lettered (or the config is invalid), else 0.
    """
    out = out or sys.stdout
    worker_id = f"run-{os.getpid()}"
    # A store of its own per call: runs in one process (tests, notebooks) must
    # not see each other's tasks, counters or emits.
    private = None if backend_url else f"fleet-run-{os.getpid()}-{uuid.uuid4().hex}"
    backend = await open_backend(backend_url or f"memory://{private}")
    fixed = dict(config or {})
    if slots is not None:
        fixed["slots"] = slots
    t = cls.automation_type
    try:
        ids: list[str] = []
        if issubclass(cls, BatchAutomation) and payloads:
            requests = [make_push_request(p) for p in payloads]
            for start in range(0, len(requests), 1000):
                results = await backend.push(t, requests[start : start + 1000])
                ids.extend(r.task_id for r in results)
        tracker = _Tracker(ids)
        worker = Worker(
            backend,
            [cls],
            worker_id,
            grace=grace,
            fixed_config=fixed,
            policy=RetryPolicy.from_env(),
            on_finished=tracker.on_finished,
        )
        runner = worker.runners[t]
        tail = await backend.stream_tail(t, 1)
        cursor_id: str | None = tail[-1].id if tail else None
        await worker.start()
        if signals:
            install_signal_handlers(worker)
        if runner.last_error is not None:
            sys.stderr.write(f"fleet run: {t}: {runner.last_error}\n")
            await worker.shutdown()
            return 1
        bar = _Progress(len(ids)) if progress and ids else None
        stop = asyncio.ensure_future(worker.stop_requested.wait())
        ticks = 0
        try:
            while not stop.done():
                if issubclass(cls, BatchAutomation) and tracker.all_done.is_set():
                    break
                await asyncio.wait([stop], timeout=0.1)
                cursor_id = await _print_emits(backend, t, worker_id, cursor_id, out)
                ticks += 1
                if ticks % 10 == 0 and tracker.pending:
                    await _check_elsewhere(backend, t, tracker)
                if bar is not None:
                    bar.update(tracker.done, len(tracker.dead))
        finally:
            stop.cancel()
            await worker.shutdown()
            await _print_emits(backend, t, worker_id, cursor_id, out)
            if bar is not None:
                bar.update(tracker.done, len(tracker.dead))
                bar.close()
        if tracker.dead:
            sys.stderr.write(f"fleet run: {len(tracker.dead)} task(s) dead-lettered\n")
        return 1 if tracker.dead or tracker.pending else 0
    finally:
        await backend.close()
        if private is not None:
            drop_store(private)


async def _check_elsewhere(backend: Backend, automation_type: str, tracker: _Tracker) -> None:
    # Tasks can also end outside our slots (expired ttl, dead at reserve, cancelled).
    for task_id in list(tracker.pending)[:200]:
        info = await backend.task_state(automation_type, task_id)
        if info.state in _FINAL:
            tracker.finish(task_id, "dead" if info.state == "dead" else "done")


class _Progress:
    """A rich progress bar on stderr."""

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(
            TextColumn("[bold]tasks"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[dead]} dead"),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = self._progress.add_task("tasks", total=total, dead=0)
        self._progress.start()

    def update(self, done: int, dead: int) -> None:
        self._progress.update(self._task, completed=done, dead=dead)

    def close(self) -> None:
        self._progress.stop()
