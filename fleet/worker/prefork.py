"""``fleet worker --processes N``: one command, N worker processes forked after the
imports.

The parent imports the plugins once and then forks; each child runs a whole worker
(its own event loop, backend connections, worker id and slots) and the parent only
supervises: it passes SIGTERM/SIGINT on to every child (the first drains, a second
exits at once, as for a single worker), starts a child again when one dies while
the fleet is not stopping, and exits once every child has. Forking after the imports
is what makes N processes cheap to start: the children share the parent's imported
modules instead of importing them N times (bench/sqlite_vs_huey.py measures it).

A child whose parent dies (``kill -9``) gets SIGTERM from the kernel (Linux) and
drains like any stopped worker, so no worker is left behind without its supervisor.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

log = logging.getLogger("fleet.worker")

#: Exit status of a child that must not be started again (its worker id is held by
#: another live process, or its arguments are wrong): the parent stops them all.
FATAL_STATUS = 3

#: First wait before starting a dead child again; doubled per quick death, up to
#: ``RESTART_CAP`` seconds. A child that lived ``STABLE_SECONDS`` starts the count over.
RESTART_BASE = 0.5
RESTART_CAP = 30.0
STABLE_SECONDS = 60.0

#: A child takes a stop signal that comes this soon after the first as the same stop:
#: Ctrl-C reaches the whole process group and systemd signals the whole control group,
#: so a child gets the signal both from them and from its parent.
SAME_SIGNAL_SECONDS = 1.0

_PR_SET_PDEATHSIG = 1
_STOPS = (signal.SIGTERM, signal.SIGINT)


def can_fork() -> bool:
    """True where ``os.fork`` exists (Linux, macOS, BSD)."""
    return hasattr(os, "fork")


def _die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the parent dies (Linux only; elsewhere a
    child outliving a killed parent keeps working until it is stopped)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))


def _exit_status(wait_status: int) -> int:
    """A ``waitpid`` status as a shell would report it (128 + signal when killed)."""
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


class Supervisor:
    """Forks ``count`` children, each running ``child(index)`` (1-based) to its exit
    status, and keeps them running until a signal stops them.

    Args:
        count: How many children to keep running.
        child: Runs in the forked child; returns the child's exit status.
        sleep: How to wait between restarts (tests pass a shorter one).
    """

    def __init__(
        self,
        count: int,
        child: Callable[[int], int],
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        self.count = count
        self._child = child
        self._sleep = sleep
        self._pids: dict[int, int] = {}  # pid -> index
        self._started: dict[int, float] = {}  # index -> monotonic start
        self._deaths: dict[int, int] = {}  # index -> quick deaths in a row
        self._due: dict[int, float] = {}  # index -> monotonic time to start it again
        self._signals = 0
        self._parent = os.getpid()
        self.status = 0

    # ------------------------------------------------------------------ parent
    def run(self) -> int:
        """Start the children and supervise them; returns the exit status: 0 after a
        clean stop, else the first non-zero status a child stopped with."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in _STOPS}
        try:
            # The imported modules become permanent: the children's garbage
            # collector never touches (and so never copies) their pages; they
            # keep them frozen (Python's advice for a fork after imports).
            gc.freeze()
            for index in range(1, self.count + 1):
                self._spawn(index)
            while self._pids or (self._due and not self._signals):
                self._reap()
                self._restart_due()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return self.status

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals == 1:
            log.warning(
                "received %s: stopping %d worker process(es)",
                signal.Signals(signum).name,
                len(self._pids),
            )
        for pid in list(self._pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def _spawn(self, index: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns here (coverage is per pid)
            self._in_child(index)
        self._pids[pid] = index
        self._started[index] = time.monotonic()
        log.info("worker process %d started (pid %d)", index, pid)

    def _reap(self) -> None:
        if not self._pids:
            # Only restarts are pending: wait for the next one (a signal cuts it short).
            wait = min(self._due.values()) - time.monotonic()
            if wait > 0:
                self._sleep(min(wait, 0.2))
            return
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG if self._due else 0)
        except ChildProcessError:
            self._pids.clear()
            return
        if pid == 0:
            self._sleep(0.05)
            return
        index = self._pids.pop(pid, None)
        if index is None:
            return
        status = _exit_status(wait_status)
        if self._signals:
            if os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) in _STOPS:
                # Stopped by the signal passed on before it had set up its own
                # handlers: it had not taken any task yet, a clean stop.
                status = 0
            if status and not self.status:
                self.status = status
            return
        if status == FATAL_STATUS:
            log.error("worker process %d (pid %d) cannot run: stopping all", index, pid)
            self.status = status
            self._stop_all()
            return
        lived = time.monotonic() - self._started.get(index, 0.0)
        quick = self._deaths.get(index, 0) + 1 if lived < STABLE_SECONDS else 1
        self._deaths[index] = quick
        delay = min(RESTART_BASE * 2 ** (quick - 1), RESTART_CAP)
        log.error(
            "worker process %d (pid %d) exited with status %d; starting it again in %.1fs",
            index,
            pid,
            status,
            delay,
        )
        self._due[index] = time.monotonic() + delay

    def _restart_due(self) -> None:
        if self._signals:
            self._due.clear()
            return
        now = time.monotonic()
        for index, at in list(self._due.items()):
            if at <= now:
                del self._due[index]
                self._spawn(index)

    def _stop_all(self) -> None:
        self._signals += 1
        self._due.clear()
        for pid in list(self._pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    # ------------------------------------------------------------------- child
    def _in_child(self, index: int) -> None:
        status = 1
        try:
            for sig in _STOPS:
                signal.signal(sig, signal.SIG_DFL)
            _die_with_parent()
            if os.getppid() != self._parent:  # the parent died before the request landed
                os._exit(0)
            status = self._child(index)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            log.exception("worker process %d failed", index)
            status = 1
        finally:
            logging.shutdown()
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(status)
