"""Event-loop stalls: blocking code caught in the act.

A worker's slots share one event loop. A ``run_one`` that blocks it (a CPU loop,
``time.sleep``, a synchronous HTTP call) stops every other slot, the lease
renewals and the heartbeat, and no asyncio time limit can fire while it does. So a
worker watches its loop from a thread:

* the loop beats: a callback every :data:`BEAT` seconds notes the time;
* the watch thread looks every :data:`BEAT` seconds; once the loop has missed its
  beat for ``FLEET_STALL_SECONDS`` (default 1; 0 turns the watch off) it takes the
  loop thread's stack and the asyncio task that is running, and logs the stall
  once, with that stack; when the loop beats again it logs how long it lasted;
* the stall is charged to that asyncio task. A time-limited ``run_one`` runs in a
  task of its own (:mod:`fleet.worker.limits`), so a run that blocked the loop
  and ended past its ``timeout_seconds`` is recorded as timed out, with the stack
  where it blocked, even though it "finished" (:func:`blocked_by`).

The watch costs one timer callback every :data:`BEAT` seconds on the loop and a
thread that wakes as often; a task pays nothing.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fleet.worker import env

log = logging.getLogger("fleet.worker.stalls")

#: Default of ``FLEET_STALL_SECONDS``: how long the loop may miss its beat before
#: the worker calls it a stall.
DEFAULT_STALL_SECONDS = 1.0
#: Seconds between two beats of the loop (and two looks of the watch thread).
BEAT = 0.1


def stall_seconds() -> float:
    """``FLEET_STALL_SECONDS`` (> 0; 0 turns the watch off), or the default when
    unset or invalid."""
    return env.seconds("FLEET_STALL_SECONDS", DEFAULT_STALL_SECONDS)


@dataclass(slots=True)
class Stall:
    """One stall of the loop: when it began (monotonic), the asyncio task that was
    running (its name), and where the loop thread was when it was caught."""

    began: float
    task_name: str
    stack: str
    ended: float | None = None

    def seconds(self, now: float | None = None) -> float:
        end = self.ended if self.ended is not None else (time.monotonic() if now is None else now)
        return end - self.began


class StallWatch:
    """Watches one event loop for stalls (see the module's docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, threshold: float) -> None:
        self._loop = loop
        self._threshold = threshold
        self._loop_thread = threading.get_ident()
        self._last_beat = time.monotonic()
        self._current: Stall | None = None
        self._lock = threading.Lock()
        #: The stalls each asyncio task caused (kept as long as the task lives).
        self._by_task: weakref.WeakKeyDictionary[asyncio.Task[object], Stall] = (
            weakref.WeakKeyDictionary()
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="fleet-stall-watch", daemon=True)
        self._timer: asyncio.TimerHandle | None = None
        self.stalls = 0  #: stalls seen so far

    def start(self) -> None:
        self._beat()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()
        self._thread.join(timeout=1.0)

    def blocked_by(self, task: asyncio.Task[object]) -> Stall | None:
        """The stall ``task`` caused, if it blocked the loop (the longest one)."""
        with self._lock:
            return self._by_task.get(task)

    # -------------------------------------------------------------- the loop
    def _beat(self) -> None:
        now = time.monotonic()
        with self._lock:
            self._last_beat = now
            ended, self._current = self._current, None
            if ended is not None:
                ended.ended = now
        if ended is not None:
            log.warning(
                "the event loop was blocked for %.1fs by %s (see the stall logged above)",
                ended.seconds(),
                ended.task_name,
            )
        if not self._stop.is_set():
            self._timer = self._loop.call_later(BEAT, self._beat)

    # ------------------------------------------------------------ the thread
    def _watch(self) -> None:
        while not self._stop.wait(BEAT):
            with self._lock:
                missed = time.monotonic() - self._last_beat
                if self._current is not None or missed < self._threshold:
                    continue
            self._caught(self._last_beat)

    def _caught(self, began: float) -> None:
        """The loop missed its beat past the threshold: who blocks it, and where."""
        frame = sys._current_frames().get(self._loop_thread)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
        try:
            # A read of the loop's running task: a dict lookup, safe from here.
            task = asyncio.current_task(self._loop)
        except RuntimeError:
            task = None
        name = task.get_name() if task is not None else "the loop itself"
        stall = Stall(began=began, task_name=name, stack=stack)
        with self._lock:
            if self._last_beat != began:  # it beat meanwhile: over already
                return
            self._current = stall
            self.stalls += 1
            if task is not None:
                before = self._by_task.get(task)
                if before is None or before.seconds() <= stall.seconds():
                    self._by_task[task] = stall
        log.warning(
            "the event loop is blocked (%.1fs so far) by %s; every slot of this worker, "
            "its lease renewals and heartbeat wait for it. Run blocking code with "
            "asyncio.to_thread or in a process pool. It is here:\n%s",
            time.monotonic() - began,
            name,
            stack.rstrip(),
        )


_watches: dict[asyncio.AbstractEventLoop, tuple[StallWatch, int]] = {}


def current() -> StallWatch | None:
    """The watch of the running loop, if one is on."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    held = _watches.get(loop)
    return None if held is None else held[0]


def blocked_by(task: asyncio.Task[object]) -> Stall | None:
    """The stall ``task`` caused on the running loop's watch, if any."""
    watch = current()
    return None if watch is None else watch.blocked_by(task)


@asynccontextmanager
async def watching(threshold: float | None = None) -> AsyncIterator[StallWatch | None]:
    """Watch the running loop while the block runs (one watch per loop, shared by
    the workers of one process); yields None when ``FLEET_STALL_SECONDS`` is 0."""
    limit = stall_seconds() if threshold is None else threshold
    if limit <= 0:
        yield None
        return
    loop = asyncio.get_running_loop()
    held = _watches.get(loop)
    if held is None:
        watch = StallWatch(loop, limit)
        watch.start()
        _watches[loop] = (watch, 1)
    else:
        watch = held[0]
        _watches[loop] = (watch, held[1] + 1)
    try:
        yield watch
    finally:
        watch_, users = _watches[loop]
        if users <= 1:
            del _watches[loop]
            watch_.stop()
        else:
            _watches[loop] = (watch_, users - 1)
