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
        self.total = len(ids)
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


class _Emits:
    """The emits of one worker, written to ``out`` as JSON lines as they come."""

    def __init__(self, worker: Worker, automation_type: str, out: IO[str]) -> None:
        self._backend = worker.backend
        self._type = automation_type
        self._worker_id = worker.worker_id
        self._out = out
        self._cursor: str | None = None

    async def skip_old(self) -> None:
        """Start after the stream's current end."""
        tail = await self._backend.streams.tail(self._type, 1)
        self._cursor = tail[-1].id if tail else None

    async def flush(self) -> None:
        """Write every emit of ours since the last call."""
        while True:
            entries = await self._backend.streams.read(self._type, after=self._cursor, n=500)
            if not entries:
                return
            for entry in entries:
                if entry.worker_id == self._worker_id:
                    self._out.write(dumps(entry.payload) + "\n")
            self._out.flush()
            self._cursor = entries[-1].id


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
    worker_id = f"run-{os.getpid()}"
    # A store of its own per call: runs in one process (tests, notebooks) must
    # not see each other's tasks, counters or emits.
    private = None if backend_url else f"fleet-run-{os.getpid()}-{uuid.uuid4().hex}"
    backend = await open_backend(backend_url or f"memory://{private}")
    fixed = dict(config or {})
    if slots is not None:
        fixed["slots"] = slots
    try:
        tracker = _Tracker(await _push(backend, cls, payloads))
        worker = Worker(
            backend,
            [cls],
            worker_id,
            grace=grace,
            fixed_config=fixed,
            policy=RetryPolicy.from_env(),
            on_finished=tracker.on_finished,
        )
        return await _run(worker, cls, tracker, out or sys.stdout, progress, signals)
    finally:
        await backend.close()
        if private is not None:
            drop_store(private)


async def _push(backend: Backend, cls: type[Automation[Any]], payloads: list[Any]) -> list[str]:
    """Push the payloads (a batch automation only); returns the task ids."""
    ids: list[str] = []
    if issubclass(cls, BatchAutomation) and payloads:
        requests = [make_push_request(p) for p in payloads]
        for start in range(0, len(requests), 1000):
            results = await backend.queues.push(cls.automation_type, requests[start : start + 1000])
            ids.extend(r.task_id for r in results)
    return ids


async def _run(
    worker: Worker,
    cls: type[Automation[Any]],
    tracker: _Tracker,
    out: IO[str],
    progress: bool,
    signals: bool,
) -> int:
    """Start the worker, follow it until the tasks are finished or a stop is
    asked, shut it down; returns the exit code."""
    t = cls.automation_type
    runner = worker.runners[t]
    emits = _Emits(worker, t, out)
    await emits.skip_old()
    await worker.start()
    if signals:
        install_signal_handlers(worker)
    if runner.last_error is not None:
        sys.stderr.write(f"fleet run: {t}: {runner.last_error}\n")
        await worker.shutdown()
        return 1
    bar = _Progress(tracker.total) if progress and tracker.total else None
    stop = asyncio.ensure_future(worker.stop_requested.wait())
    try:
        await _follow(worker, cls, tracker, stop, emits, bar)
    finally:
        stop.cancel()
        await worker.shutdown()
        await emits.flush()
        if bar is not None:
            bar.update(tracker.done, len(tracker.dead))
            bar.close()
    if tracker.dead:
        sys.stderr.write(f"fleet run: {len(tracker.dead)} task(s) dead-lettered\n")
    return 1 if tracker.dead or tracker.pending else 0


async def _follow(
    worker: Worker,
    cls: type[Automation[Any]],
    tracker: _Tracker,
    stop: asyncio.Future[Any],
    emits: _Emits,
    bar: _Progress | None,
) -> None:
    """Print emits and progress until the tasks are finished (a batch
    automation) or ``stop`` is done."""
    backend, t = worker.backend, cls.automation_type
    ticks = 0
    while not stop.done():
        if issubclass(cls, BatchAutomation) and tracker.all_done.is_set():
            break
        await asyncio.wait([stop], timeout=0.1)
        await emits.flush()
        ticks += 1
        if ticks % 10 == 0 and tracker.pending:
            await _check_elsewhere(backend, t, tracker)
        if bar is not None:
            bar.update(tracker.done, len(tracker.dead))


async def _check_elsewhere(backend: Backend, automation_type: str, tracker: _Tracker) -> None:
    # Tasks can also end outside our slots (expired ttl, dead at reserve, cancelled).
    for task_id in list(tracker.pending)[:200]:
        info = await backend.queues.state(automation_type, task_id)
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
