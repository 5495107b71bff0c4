"""The chaos suite's parts: a fleet of real processes over one backend (workers of
``chaos-job``, a master that sweeps), the plugin's ledger, and the verdict of a run.

Each scenario submits tasks, breaks something, waits until every task is settled and
asks :func:`verdict` for the row of the chaos table: nothing lost, every duplicate
explained by a kill that came before its ack, exactly the expected dead letters.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.support.master_proc import MasterProcess
from tests.support.waits import until
from tests.worker.procs import ROOT, fleet_env

TYPE = "chaos-job"
PLUGIN = "tests.chaos.plugin"
#: The shortest lease BaseConfig allows: a killed worker's tasks come back after it.
VISIBILITY = 10.0
#: ``make chaos`` sets it: more tasks, more kills, longer runs.
LONG = os.environ.get("FLEET_CHAOS_LONG") == "1"


def scale(short: int, long: int) -> int:
    return long if LONG else short


@dataclass
class Ledger:
    """What the plugin wrote: per task id, the pids that started and finished it."""

    path: Path

    def read(self) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
        starts: dict[str, list[int]] = defaultdict(list)
        ends: dict[str, list[int]] = defaultdict(list)
        if not self.path.exists():
            return starts, ends
        for line in self.path.read_text().splitlines():
            rec = json.loads(line)
            (starts if rec["ev"] == "start" else ends)[rec["id"]].append(rec["pid"])
        return starts, ends


@dataclass
class Worker:
    """One ``fleet worker`` process of ``chaos-job``; restartable under its id."""

    fleet: ChaosFleet
    worker_id: str
    url: str | None = None  #: its own backend URL (through a proxy), else the fleet's
    proc: subprocess.Popen[bytes] | None = None
    pids: list[int] = field(default_factory=list)
    restarts: int = 0

    def start(self) -> None:
        log = self.fleet.dir / f"{self.worker_id}.{self.restarts}.log"
        args = [sys.executable, "-m", "fleet", "worker", "--plugin", PLUGIN, "--type", TYPE]
        args += ["--id", self.worker_id, "--backend", self.url or self.fleet.url, "--grace", "5"]
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                args, cwd=ROOT, env=self.fleet.env, stdout=out, stderr=subprocess.STDOUT
            )
        self.pids.append(self.proc.pid)
        self.restarts += 1

    def kill9(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.fleet.killed.add(self.proc.pid)
        return self.proc.pid

    def sigterm(self, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def log(self) -> str:
        return "".join(
            (self.fleet.dir / f"{self.worker_id}.{i}.log").read_text(errors="replace")
            for i in range(self.restarts)
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


class ChaosFleet:
    """Workers and one master (the sweeper) over ``url``; everything is killed at exit."""

    def __init__(self, url: str, directory: Path, *, slots: int = 4) -> None:
        self.url = url
        self.dir = directory
        self.slots = slots
        self.ledger = Ledger(directory / "ledger.jsonl")
        self.env = fleet_env(FLEET_CHAOS_LEDGER=str(self.ledger.path), FLEET_ENTRY_POINTS="0")
        self.workers: dict[str, Worker] = {}
        self.killed: set[int] = set()
        self.master: MasterProcess | None = None

    async def configure(self, **config: Any) -> None:
        """The type's config, before any worker starts (so each one starts with it)."""
        async with await open_backend(self.url) as b:
            base = {"slots": self.slots, "visibility_seconds": VISIBILITY, "max_attempts": 3}
            await b.configs.set(TYPE, {**base, **config})

    def start_master(self) -> None:
        self.master = MasterProcess(self.url, self.dir, sweep_seconds=0.5)

    def add_worker(self, worker_id: str, url: str | None = None) -> Worker:
        w = Worker(self, worker_id, url)
        self.workers[worker_id] = w
        w.start()
        return w

    def close(self) -> None:
        for w in self.workers.values():
            w.stop()
        if self.master is not None:
            self.master.close()


async def submit(backend: Backend, payloads: list[dict[str, Any]]) -> list[str]:
    from fleet.core.submission import make_push_request

    ids: list[str] = []
    for start in range(0, len(payloads), 500):
        chunk = [make_push_request(p) for p in payloads[start : start + 500]]
        ids += [r.task_id for r in await backend.queues.push(TYPE, chunk)]
    return ids


async def settled(backend: Backend, ids: list[str]) -> tuple[set[str], set[str], set[str]]:
    """(done, dead, other) among ``ids``."""
    done: set[str] = set()
    dead: set[str] = set()
    other: set[str] = set()
    for tid in ids:
        state = (await backend.queues.state(TYPE, tid)).state
        (done if state == "done" else dead if state == "dead" else other).add(tid)
    return done, dead, other


@dataclass
class Verdict:
    """One row of the chaos table."""

    scenario: str
    backend: str
    tasks: int
    executions: int
    lost: int
    duplicates: int
    unexplained: list[str]
    dead: int
    recovery_seconds: float

    def row(self) -> str:
        return (
            f"| {self.scenario} | {self.backend} | {self.tasks} | {self.executions} | "
            f"{self.lost} | {self.duplicates} | {self.dead} | {self.recovery_seconds:.1f} s |"
        )


async def wait_settled(
    backend: Backend, ids: list[str], timeout: float
) -> tuple[set[str], set[str], set[str]]:

    async def all_settled() -> tuple[set[str], set[str], set[str]] | None:
        found = await settled(backend, ids)
        return None if found[2] else found

    try:
        found = await until(all_settled, timeout=timeout, interval=0.5)
    except AssertionError:
        return await settled(backend, ids)  # what is left unsettled: the caller's verdict
    assert found is not None
    return found


def verdict(
    scenario: str,
    backend_kind: str,
    fleet: ChaosFleet,
    ids: list[str],
    done: set[str],
    dead: set[str],
    recovery_seconds: float,
) -> Verdict:
    """Count executions per task from the ledger; explain every duplicate.

    A task finished more than once is explained only if every finish but the last one
    was written by a process that was killed afterwards (it finished, then died before
    its ack reached the backend, so the task came back).
    """
    _, ends = fleet.ledger.read()
    duplicates = 0
    unexplained: list[str] = []
    for tid in ids:
        pids = ends.get(tid, [])
        if tid in done and not pids:
            unexplained.append(f"{tid}: done, but no attempt of it finished")
        if len(pids) > 1:
            duplicates += len(pids) - 1
            if not all(pid in fleet.killed for pid in pids[:-1]):
                unexplained.append(f"{tid}: finished by {pids}, killed {sorted(fleet.killed)}")
    executions = sum(Counter({t: len(p) for t, p in ends.items() if t in set(ids)}).values())
    lost = len(set(ids) - done - dead)
    return Verdict(
        scenario, backend_kind, len(ids), executions, lost, duplicates, unexplained,
        len(dead), recovery_seconds,
    )  # fmt: skip
