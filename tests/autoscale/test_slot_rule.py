"""The adaptive slots rule (fleet.core.autoslots.next_slots) and the config that
sets it, as tables of plain values."""

from __future__ import annotations

import pytest

from fleet.core.autoslots import AutoSlotsTuning, Limit, Signals, next_slots
from fleet.core.config import BaseConfig
from fleet.worker.configstate import check_config

T = AutoSlotsTuning()
GiB = 1 << 30
#: A window with work queued where nothing is wrong.
OK = Signals(queued=100, finished=50, cpu_percent=20, loop_lag=0.01, efficiency=1.0)


def over(**changes: float) -> Signals:
    fields: dict[str, float] = {
        "loop_lag": OK.loop_lag,
        "cpu_percent": OK.cpu_percent,
        "rss_bytes": OK.rss_bytes,
        "free_memory_percent": OK.free_memory_percent,
        "queued": OK.queued,
        "finished": OK.finished,
        "troubled": OK.troubled,
        "efficiency": OK.efficiency,
    }
    fields.update(changes)
    return Signals(**fields)  # type: ignore[arg-type]  # ints among the floats


@pytest.mark.parametrize(
    ("current", "signals", "tuning", "lo", "hi", "slots", "limit"),
    [
        # Additive increase while every signal is under and tasks wait.
        (4, OK, T, 1, 16, 5, "growing"),
        (4, OK, T.model_copy(update={"increase": 3}), 1, 16, 7, "growing"),
        (16, OK, T, 1, 16, 16, "max_slots"),
        (15, OK, T.model_copy(update={"increase": 4}), 1, 16, 16, "growing"),
        # No task waiting: hold.
        (4, over(queued=0), T, 1, 16, 4, "idle"),
        # Too few finished attempts to judge whether the last step paid.
        (4, over(finished=1), T, 1, 16, 4, "warming"),
        (1, over(finished=0), T, 1, 16, 2, "growing"),
        # Multiplicative decrease, naming the signal.
        (10, over(troubled=10), T, 1, 16, 7, "throttled"),
        (10, over(troubled=5), T, 1, 16, 11, "growing"),  # 10 % is not over 10 %
        (
            10,
            over(rss_bytes=3 * GiB),
            T.model_copy(update={"max_rss_bytes": 2 * GiB}),
            1,
            16,
            7,
            "rss",
        ),
        (10, over(free_memory_percent=2.0), T, 1, 16, 7, "free_memory"),
        (10, over(efficiency=0.4, loop_lag=0.5), T, 1, 16, 7, "loop_lag"),
        (10, over(efficiency=0.4, cpu_percent=99), T, 1, 16, 7, "cpu"),
        (10, over(efficiency=0.4), T, 1, 16, 7, "efficiency"),
        # Lag or CPU alone do not stop a type whose slots still pay (I/O beside CPU).
        (10, over(loop_lag=0.5, cpu_percent=99), T, 1, 16, 11, "growing"),
        # Memory holds every type back, queued work or not.
        (10, over(queued=0, free_memory_percent=1.0), T, 1, 16, 7, "free_memory"),
        # Always at least one fewer, never below min_slots.
        (2, over(troubled=40), T, 1, 16, 1, "throttled"),
        (1, over(troubled=40), T, 1, 16, 1, "throttled"),
        (5, over(troubled=40), T, 4, 16, 4, "throttled"),
        # Bounds that moved since: clamped first.
        (30, OK, T, 1, 16, 16, "max_slots"),
        (0, over(queued=0), T, 2, 16, 2, "idle"),
    ],
)
def test_next_slots(
    current: int,
    signals: Signals,
    tuning: AutoSlotsTuning,
    lo: int,
    hi: int,
    slots: int,
    limit: Limit,
) -> None:
    decision = next_slots(current, signals, tuning, lo, hi)
    assert (decision.slots, decision.limit) == (slots, limit)


def test_memory_comes_before_the_type_signals() -> None:
    s = over(free_memory_percent=1.0, troubled=40, efficiency=0.1, loop_lag=9.0)
    assert next_slots(8, s, T, 1, 16).limit == "free_memory"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            {"slots": "atuo"},
            "invalid config field slots: Value error, slots is a whole number from 0 to "
            "10000 or \"auto\", not 'atuo'",
        ),
        ({"slots": -1}, "slots is a whole number from 0 to 10000"),
        ({"slots": 10_001}, "slots is a whole number from 0 to 10000"),
        ({"slots": True}, "slots is a whole number"),
        ({"slots": "auto", "min_slots": 5, "max_slots": 2}, "min_slots (5) is above max_slots (2)"),
        ({"min_slots": 20}, "min_slots (20) is above max_slots (16)"),
        ({"min_slots": 0}, "invalid config field min_slots"),
        ({"auto_slots": {"decrease": 1.5}}, "invalid config field auto_slots.decrease"),
        ({"auto_slots": {"max_lag": 1}}, "invalid config field auto_slots.max_lag"),
    ],
)
def test_bad_slot_configs_are_refused_naming_the_field(data: dict[str, object], error: str) -> None:
    checked = check_config(BaseConfig, data)
    assert checked.error is not None and error in checked.error


@pytest.mark.parametrize("value", ["auto", "AUTO", " Auto "])
def test_auto_is_spelt_one_way(value: str) -> None:
    cfg = BaseConfig.model_validate({"slots": value})
    assert cfg.slots == "auto" and cfg.auto


def test_fixed_slots_are_as_before() -> None:
    cfg = BaseConfig.model_validate({"slots": 7})
    assert cfg.slots == 7 and not cfg.auto
    assert BaseConfig().slots == 1
