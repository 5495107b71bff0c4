"""The reconcile decision and the reported state, as plain values."""

from __future__ import annotations

from fleet.worker.reconcile import Desired, Plan, SlotView, decide, type_state

NOW = 1000.0


def views(*ids: int, started: float = NOW, stopping: tuple[int, ...] = ()) -> list[SlotView]:
    return [SlotView(i, started, i in stopping) for i in ids]


def test_starts_missing_slots_from_zero() -> None:
    assert decide([], Desired(slots=3), NOW) == Plan(start=(0, 1, 2))
    assert decide(views(0, 2), Desired(slots=3), NOW) == Plan(start=(1,))


def test_nothing_to_do_when_matching() -> None:
    assert decide(views(0, 1), Desired(slots=2), NOW).empty


def test_scale_down_stops_the_newest_slots() -> None:
    plan = decide(views(0, 1, 2, 3), Desired(slots=2), NOW)
    assert plan.stop == (3, 2) and plan.start == ()


def test_stopping_slot_keeps_its_id_until_it_ends() -> None:
    # scaled down to 2 then back to 4 while slot 3 is still finishing its task
    plan = decide(views(0, 1, 3, stopping=(3,)), Desired(slots=4), NOW)
    assert plan.start == (2,)
    assert plan.stop == ()


def test_disabled_error_draining_and_shutdown_stop_everything() -> None:
    for desired in (
        Desired(slots=2, enabled=False),
        Desired(slots=2, config_ok=False),
        Desired(slots=2, draining=True),
        Desired(slots=2, shutting_down=True),
    ):
        assert desired.target == 0
        assert decide(views(0, 1), desired, NOW) == Plan(stop=(1, 0))
    # slots that are already stopping are not stopped twice
    assert decide(views(0, 1, stopping=(0, 1)), Desired(slots=2, enabled=False), NOW).empty


def test_recycle_only_slots_older_than_the_limit() -> None:
    slots = [SlotView(0, NOW - 100), SlotView(1, NOW - 5), SlotView(2, NOW - 60)]
    plan = decide(slots, Desired(slots=3, recycle_seconds=60), NOW)
    assert plan.recycle == (0, 2)
    assert plan.stop == () and plan.start == ()
    assert decide(slots, Desired(slots=3), NOW).empty  # no recycle_seconds: never


def test_recycled_slot_is_started_again_once_it_ended() -> None:
    assert decide(views(1, 2), Desired(slots=3, recycle_seconds=60), NOW).start == (0,)


def test_type_state() -> None:
    assert type_state(Desired(slots=2), 2) == "RUNNING"
    assert type_state(Desired(slots=0), 0) == "IDLE"
    assert type_state(Desired(slots=2, enabled=False), 0) == "IDLE"
    assert type_state(Desired(slots=2, config_ok=False), 0) == "ERROR"
    assert type_state(Desired(slots=2, draining=True), 1) == "DRAINING"
    assert type_state(Desired(slots=2, shutting_down=True), 1) == "RUNNING"
    assert type_state(Desired(slots=2, shutting_down=True), 0) == "STOPPED"
