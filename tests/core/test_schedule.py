"""The pure schedule logic: definitions, ticks (cron in a time zone, fixed periods),
daylight-saving transitions, misfires, jitter and tick task ids — no event loop."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel

from fleet.core import BatchAutomation, RegistrationError, Schedule, register
from fleet.core.automation import registered, unregister
from fleet.core.errors import ContractValueError
from fleet.core.schedule import (
    check_definition,
    jitter_of,
    new_record,
    next_tick,
    parse_every,
    plan,
    tick_task_id,
)

BERLIN = ZoneInfo("Europe/Berlin")


def every(seconds: float, **kw: Any) -> dict[str, Any]:
    return check_definition({"every_seconds": seconds, "payload": {}, **kw})


def cron(expr: str, tz: str = "UTC", **kw: Any) -> dict[str, Any]:
    return check_definition({"cron": expr, "timezone": tz, "payload": {}, **kw})


def ts(tz: ZoneInfo, *args: int) -> float:
    return datetime(*args, tzinfo=tz).timestamp()  # type: ignore[misc]


def test_every_parses_durations() -> None:
    assert [parse_every(x) for x in ("30s", "5m", "2h", "1d", 7, "1.5m")] == [
        30.0, 300.0, 7200.0, 86400.0, 7.0, 90.0,
    ]  # fmt: skip
    for bad in ("0.5", "0s", "soon", True, -3):
        with pytest.raises(ContractValueError):
            parse_every(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron": "0 * * * *", "every_seconds": 5}, "cron"),
        ({}, "cron"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * *"}, "cron"),
        ({"every_seconds": 0.5}, "every_seconds"),
        ({"every_seconds": 5, "timezone": "Mars/Olympus"}, "timezone"),
        ({"every_seconds": 5, "misfire": "twice"}, "misfire"),
        ({"every_seconds": 5, "jitter_seconds": -1}, "jitter_seconds"),
        ({"every_seconds": 5, "max_attempts": 0}, "max_attempts"),
        ({"every_seconds": 5, "group": "a\nb"}, "group"),
        ({"every_seconds": 5, "priority": "high"}, "priority"),
    ],
)
def test_bad_definitions_name_their_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ContractValueError) as exc:
        check_definition({"payload": {}, **fields})
    assert exc.value.field == field


def test_fixed_periods_tick_on_multiples_of_the_period() -> None:
    d = every(300)
    assert next_tick(d, 1000.0) == 1200.0
    assert next_tick(d, 1200.0) == 1500.0  # strictly after


def test_cron_follows_its_time_zone() -> None:
    d = cron("0 9 * * *", "Europe/Berlin")
    after = ts(BERLIN, 2026, 7, 1, 12, 0)
    assert next_tick(d, after) == ts(BERLIN, 2026, 7, 2, 9, 0)
    assert next_tick(cron("0 9 * * *"), after) == ts(ZoneInfo("UTC"), 2026, 7, 2, 9, 0)


def test_dst_spring_forward_fires_the_skipped_time_once() -> None:
    # 2026-03-29: Berlin clocks jump from 02:00 to 03:00; 02:30 does not exist.
    d = cron("30 2 * * *", "Europe/Berlin")
    first = next_tick(d, ts(BERLIN, 2026, 3, 28, 12, 0))
    assert datetime.fromtimestamp(first, BERLIN).strftime("%m-%d %H:%M") == "03-29 03:00"
    second = next_tick(d, first)
    assert datetime.fromtimestamp(second, BERLIN).strftime("%m-%d %H:%M") == "03-30 02:30"


def test_dst_fall_back_fires_the_repeated_time_once() -> None:
    # 2026-10-25: 02:00-03:00 happens twice in Berlin; a 02:30 job runs once.
    d = cron("30 2 * * *", "Europe/Berlin")
    first = next_tick(d, ts(BERLIN, 2026, 10, 24, 12, 0))
    second = next_tick(d, first)
    assert datetime.fromtimestamp(first, BERLIN).strftime("%m-%d %H:%M") == "10-25 02:30"
    assert second - first == 25 * 3600  # the next day's 02:30, not the repeat an hour later


def test_hourly_cron_across_fall_back_keeps_every_hour() -> None:
    d = cron("0 * * * *", "Europe/Berlin")
    t = ts(BERLIN, 2026, 10, 25, 0, 30)
    ticks = []
    for _ in range(5):
        t = next_tick(d, t)
        ticks.append(t)
    assert [b - a for a, b in itertools.pairwise(ticks)] == [3600.0] * 4


def rec(definition: dict[str, Any], next_run: float) -> Any:
    return new_record("t", "s", definition, now=0.0).evolve(next_run=next_run)


def test_plan_fires_each_tick_once_and_moves_on() -> None:
    r = rec(every(2), 100.0)
    assert plan(r, 99.9) is None
    step = plan(r, 100.3)
    assert step is not None and (step.fire, step.next_run, step.missed) == (100.0, 102.0, 0)


def test_misfire_once_fires_one_catch_up_and_skip_none() -> None:
    # Down from 100 to 110 with every 2 s: ticks 100..110 all passed.
    once = plan(rec(every(2, misfire="once"), 100.0), 110.5)
    assert once is not None and (once.fire, once.next_run) == (110.0, 112.0)
    assert once.missed == 5
    skip = plan(rec(every(2, misfire="skip"), 100.0), 110.5)
    assert skip is not None and (skip.fire, skip.next_run, skip.missed) == (None, 112.0, 6)


def test_misfire_with_cron() -> None:
    r = rec(cron("*/5 * * * *"), 300.0)
    step = plan(r, 300.0 + 17 * 60)  # 3 ticks missed after 300
    assert step is not None and (step.fire, step.next_run) == (1200.0, 1500.0)


def test_disabled_never_due_and_jitter_is_stable() -> None:
    assert plan(rec(every(2, enabled=False), 100.0), 1e9) is None
    j = jitter_of("s", 1000.0, 30.0)
    assert 0 <= j < 30 and j == jitter_of("s", 1000.0, 30.0) != jitter_of("s", 1030.0, 30.0)
    r = rec(every(60, jitter_seconds=30), 1000.0)
    assert plan(r, 1000.0 + j - 0.01) is None
    assert plan(r, 1000.0 + j + 0.01) is not None


def test_tick_task_ids() -> None:
    assert tick_task_id("hourly", 1_780_000_000.0) == "schedule:hourly:1780000000"


class Page(BaseModel):
    url: str


@pytest.fixture
def clean_registry() -> Any:
    before = set(registered())
    yield
    for name in set(registered()) - before:
        unregister(name)


def test_declarations_are_checked_at_register(clean_registry: None) -> None:
    with pytest.raises(RegistrationError, match="twice"):

        @register("sched-dupe")
        class Dupe(BatchAutomation[Any]):
            TaskPayload = Page
            Schedules = [
                Schedule(id="a", every=5, payload=Page(url="u")),
                Schedule(id="a", every=6, payload=Page(url="u")),
            ]

    with pytest.raises(RegistrationError, match="url"):

        @register("sched-bad-payload")
        class BadPayload(BatchAutomation[Any]):
            TaskPayload = Page
            Schedules = [Schedule(id="a", every=5, payload={"nope": 1})]

    with pytest.raises(RegistrationError, match="cron"):

        @register("sched-bad-cron")
        class BadCron(BatchAutomation[Any]):
            TaskPayload = Page
            Schedules = [Schedule(id="a", cron="every day", payload=Page(url="u"))]

    @register("sched-good")
    class Good(BatchAutomation[Any]):
        TaskPayload = Page
        Schedules = [Schedule(id="hourly", cron="0 * * * *", payload=Page(url="u"))]

    assert Good.Schedules[0].definition()["payload"] == {"url": "u"}
