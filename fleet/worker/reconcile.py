"""What a type's slots should do next: a pure function of (observed, desired).

The runner feeds :func:`decide` the slots it has and the config it wants and
carries out the :class:`Plan` it gets back; nothing here touches a clock, an
event loop or the backend, so every rule is tested with plain values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

WorkerState = Literal["IDLE", "RUNNING", "ERROR", "DRAINING", "STOPPED"]


@dataclass(frozen=True, slots=True)
class SlotView:
    """One slot as the runner sees it.

    Attributes:
        slot_id: 0..N-1 within the worker; a stopping slot keeps its id until it ends.
        started_at: When the slot (its current incarnation) started, unix seconds.
        stopping: A graceful stop was already requested.
    """

    slot_id: int
    started_at: float
    stopping: bool = False


@dataclass(frozen=True, slots=True)
class Desired:
    """What the type should be doing.

    Attributes:
        slots: ``Config.slots`` of the applied config.
        enabled: ``Config.enabled``.
        recycle_seconds: ``Config.recycle_seconds`` (None: never recycle).
        config_ok: False while the desired config does not validate (state ERROR).
        draining: A drain was requested for this worker and type.
        shutting_down: The worker process is stopping.
    """

    slots: int
    enabled: bool = True
    recycle_seconds: float | None = None
    config_ok: bool = True
    draining: bool = False
    shutting_down: bool = False

    @property
    def target(self) -> int:
        """How many slots should run."""
        if self.shutting_down or self.draining or not self.config_ok or not self.enabled:
            return 0
        return max(self.slots, 0)


@dataclass(frozen=True, slots=True)
class Plan:
    """The actions to take now.

    Attributes:
        start: Slot ids to start (free ids below the target, lowest first).
        stop: Slot ids to stop gracefully because there are too many (newest first).
        recycle: Slot ids to stop gracefully because they are older than
            ``recycle_seconds``; a later pass starts them again.
    """

    start: tuple[int, ...] = ()
    stop: tuple[int, ...] = ()
    recycle: tuple[int, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.start or self.stop or self.recycle)


def decide(slots: Sequence[SlotView], desired: Desired, now: float) -> Plan:
    """Compare the slots that exist with the desired config.

    Rules: slots whose id is at or above the target stop (so scaling down stops
    the newest slots and ids stay 0..N-1); free ids below the target start —
    an id whose previous slot is still stopping is left until that slot ends;
    running slots older than ``recycle_seconds`` are stopped to be restarted.

    Args:
        slots: Every slot that still exists, stopping or not.
        desired: The desired shape of the type.
        now: The current time (unix seconds).

    Returns:
        The plan; empty when nothing needs to change.
    """
    target = desired.target
    active = [s for s in slots if not s.stopping]
    taken = {s.slot_id for s in slots}
    stop = tuple(s.slot_id for s in sorted(active, key=lambda s: -s.slot_id) if s.slot_id >= target)
    start = tuple(i for i in range(target) if i not in taken)
    recycle: tuple[int, ...] = ()
    if desired.recycle_seconds is not None:
        limit = desired.recycle_seconds
        recycle = tuple(
            s.slot_id
            for s in sorted(active, key=lambda s: s.slot_id)
            if s.slot_id < target and now - s.started_at >= limit
        )
    return Plan(start=start, stop=stop, recycle=recycle)


def type_state(desired: Desired, running_slots: int) -> WorkerState:
    """The state a type reports (``wkr:<type>:<id>:state`` field ``state``).

    Args:
        desired: The desired shape of the type.
        running_slots: Slots that exist now (including ones finishing a task).

    Returns:
        ``STOPPED`` when the worker is stopping and no slot is left, ``ERROR`` when
        the config does not validate, ``DRAINING`` while a drain is requested,
        ``RUNNING`` while any slot exists, else ``IDLE``.
    """
    if desired.shutting_down and running_slots == 0:
        return "STOPPED"
    if not desired.config_ok:
        return "ERROR"
    if desired.draining:
        return "DRAINING"
    return "RUNNING" if running_slots > 0 else "IDLE"
