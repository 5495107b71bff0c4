"""Worker ids: one live process per id, fleet-wide.

Two ``fleet worker`` processes on one host would otherwise both default to the host
name and overwrite each other's heartbeats under one row. Each process claims its id
in the backend (KV ``fleet-control`` / ``worker-id:<id>``, with a TTL renewed by the
heartbeat). Without ``--id`` a process takes the host name, or ``host-2``, ``host-3``…
while lower ones are held by live processes; an explicit ``--id`` held by a live
process is refused. A claim left by a process of this host that is gone (kill -9,
OOM) is taken over at once, so a restarted service keeps its id.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from dataclasses import dataclass

import psutil

from fleet.core.capabilities import KV
from fleet.core.errors import FleetError
from fleet.protocol import CONTROL_NS, worker_id_key
from fleet.worker.hardware import host_name

log = logging.getLogger("fleet.worker")

#: Suffixes tried for a default id before giving up (``host``, ``host-2`` … ``host-N``).
MAX_DEFAULT_IDS = 64


class WorkerIdInUse(FleetError):
    """The worker id asked for with ``--id`` is held by a live worker process."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds an id: host, pid, the process's start time and a random nonce."""

    host: str
    pid: int
    started: float
    nonce: str

    def encode(self) -> str:
        return json.dumps(
            {"host": self.host, "pid": self.pid, "started": self.started, "nonce": self.nonce}
        )

    @classmethod
    def decode(cls, raw: str) -> Holder | None:
        try:
            doc = json.loads(raw)
            return cls(str(doc["host"]), int(doc["pid"]), float(doc["started"]), str(doc["nonce"]))
        except (ValueError, TypeError, KeyError):
            return None  # a value we did not write: treat as held by someone else

    @classmethod
    def this_process(cls) -> Holder:
        return cls(host_name(), os.getpid(), _start_time(os.getpid()) or 0.0, secrets.token_hex(8))

    def is_gone(self) -> bool:
        """True only when the holder surely no longer runs: same host, and no
        process with its pid and start time (a reused pid has another start time)."""
        if self.host != host_name():
            return False  # another machine's process: only its TTL tells
        started = _start_time(self.pid)
        return started is None or abs(started - self.started) > 1.0


def _start_time(pid: int) -> float | None:
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def default_ids(host: str, n: int = MAX_DEFAULT_IDS) -> list[str]:
    """The ids a worker without ``--id`` tries, in order."""
    return [host, *(f"{host}-{i}" for i in range(2, n + 1))]


class IdClaim:
    """This process's hold on its worker id (renewed by the heartbeat)."""

    def __init__(self, worker_id: str, holder: Holder, hold_seconds: float) -> None:
        self.worker_id = worker_id
        self.holder = holder
        self.hold_seconds = hold_seconds
        self._warned = False

    async def renew(self, kv: KV) -> None:
        """Keep the claim alive; write it back if the backend lost it."""
        key = worker_id_key(self.worker_id)
        current = await kv.get(CONTROL_NS, key)
        mine = self.holder.encode()
        if current is not None and current != mine:
            other = Holder.decode(current)
            if not self._warned:  # the claim expired during a partition and was taken
                self._warned = True
                where = f"pid {other.pid} on {other.host}" if other else "another process"
                log.warning("worker id %s is now also claimed by %s", self.worker_id, where)
            return
        await kv.set(CONTROL_NS, key, mine, ttl_seconds=self.hold_seconds)

    async def release(self, kv: KV) -> None:
        """Give the id back (a graceful stop), so a restart takes it at once."""
        key = worker_id_key(self.worker_id)
        if await kv.get(CONTROL_NS, key) == self.holder.encode():
            await kv.delete(CONTROL_NS, key)


async def _try(kv: KV, worker_id: str, me: Holder, hold: float) -> Holder | None:
    """Claim ``worker_id``; None on success, else the live holder."""
    key = worker_id_key(worker_id)
    value = me.encode()
    for _ in range(2):
        if await kv.setnx(CONTROL_NS, key, value, ttl_seconds=hold):
            return None
        raw = await kv.get(CONTROL_NS, key)
        if raw is None:
            continue  # expired between the two calls
        holder = Holder.decode(raw)
        if holder is None or not holder.is_gone():
            return holder or Holder("?", 0, 0.0, "")
        log.info(
            "worker id %s was held by pid %d of this host, which is gone: taking it over",
            worker_id,
            holder.pid,
        )
        await kv.delete(CONTROL_NS, key)
    return Holder("?", 0, 0.0, "")


async def claim_worker_id(kv: KV, requested: str | None, *, hold_seconds: float) -> IdClaim:
    """Claim ``requested``, or the first free default id.

    Raises:
        WorkerIdInUse: ``requested`` (or every default id) is held by a live worker.
        BackendError: The backend failed.
    """
    me = Holder.this_process()
    candidates = [requested] if requested else default_ids(host_name())
    holder: Holder | None = None
    for worker_id in candidates:
        holder = await _try(kv, worker_id, me, hold_seconds)
        if holder is None:
            return IdClaim(worker_id, me, hold_seconds)
    assert holder is not None
    if requested:
        raise WorkerIdInUse(
            f"worker id {requested!r} is held by a live worker (pid {holder.pid} on "
            f"{holder.host}); stop that worker or pass another --id"
        )
    raise WorkerIdInUse(
        f"all {len(candidates)} default worker ids of host {host_name()!r} are held by live "
        "workers; pass --id"
    )
