"""OutageLog: which failures and recoveries of a component deserve a log line."""

from __future__ import annotations

import logging

import pytest

from fleet.core.errors import BackendUnavailable
from fleet.core.outage import REPORT_EVERY, OutageLog, is_outage

DOWN = BackendUnavailable("redis at redis://:***@db:6379/0 is unavailable: Connection refused")


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def outages(clock: Clock) -> OutageLog:
    return OutageLog(logging.getLogger("test.outage"), clock=clock)


def test_the_first_failure_says_what_is_down(outages: OutageLog) -> None:
    line = outages.failed("heartbeat", DOWN)
    assert line == (
        "heartbeat: backend down (redis at redis://:***@db:6379/0 is unavailable: "
        "Connection refused); retrying"
    )
    assert outages.is_down("heartbeat")


def test_failures_within_the_period_say_nothing(outages: OutageLog, clock: Clock) -> None:
    outages.failed("heartbeat", DOWN)
    for _ in range(100):
        clock.now += (REPORT_EVERY - 1) / 100
        assert outages.failed("heartbeat", DOWN) is None


def test_one_still_down_line_per_period(outages: OutageLog, clock: Clock) -> None:
    outages.failed("feeder", DOWN)
    clock.now += REPORT_EVERY
    line = outages.failed("feeder", "timed out")
    assert line == "feeder: backend still down after 30s (2 failed attempts; last: timed out)"
    clock.now += REPORT_EVERY / 2
    assert outages.failed("feeder", DOWN) is None
    clock.now += REPORT_EVERY / 2
    assert outages.failed("feeder", DOWN) is not None


def test_recovery_says_back_once(outages: OutageLog, clock: Clock) -> None:
    outages.failed("events", DOWN)
    clock.now += 2.5
    outages.failed("events", DOWN)
    clock.now += 5.75
    assert outages.recovered("events") == "events: backend back after 8.2s (2 failed attempts)"
    assert not outages.is_down("events")
    assert outages.recovered("events") is None
    assert outages.failed("events", DOWN) is not None  # a new outage is a new first line


def test_recovered_without_an_outage_says_nothing(outages: OutageLog) -> None:
    assert outages.recovered("sweeper") is None


def test_components_are_independent(outages: OutageLog) -> None:
    assert outages.failed("a", DOWN) is not None
    assert outages.failed("b", DOWN) is not None
    assert outages.recovered("a") is not None
    assert outages.is_down("b") and not outages.is_down("a")
    assert outages.failed("b", DOWN) is None


def test_a_hint_replaces_retrying(outages: OutageLog) -> None:
    line = outages.failed("master", DOWN, hint="check that it runs")
    assert line is not None and line.endswith("; check that it runs")


def test_lines_are_warnings_on_the_given_logger(
    outages: OutageLog, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    other = logging.getLogger("test.outage.slot")
    with caplog.at_level(logging.WARNING):
        outages.failed("slots", DOWN, logger=other)
        outages.failed("slots", DOWN, logger=other)
        clock.now += 1
        outages.recovered("slots")
    assert [(r.name, r.levelno) for r in caplog.records] == [
        ("test.outage.slot", logging.WARNING),
        ("test.outage", logging.WARNING),
    ]
    assert "Traceback" not in caplog.text


def test_an_eight_second_outage_of_many_retries_is_two_lines(
    outages: OutageLog, clock: Clock
) -> None:
    lines = []
    for _ in range(80):  # a retry every 0.1 s
        lines.append(outages.failed("wt-echo: reserve", DOWN))
        clock.now += 0.1
    lines.append(outages.recovered("wt-echo: reserve"))
    said = [line for line in lines if line is not None]
    assert len(said) == 2
    assert "backend down" in said[0] and "backend back after 8.0s (80 failed attempts)" in said[1]


def test_is_outage_follows_explicit_causes() -> None:
    assert is_outage(DOWN)
    assert not is_outage(ValueError("bug"))
    try:
        try:
            raise DOWN
        except BackendUnavailable as exc:
            raise RuntimeError("plugin wrapped it") from exc
    except RuntimeError as wrapped:
        assert is_outage(wrapped)
    try:
        try:
            raise DOWN
        except BackendUnavailable:
            raise KeyError("a bug while handling it") from None
    except KeyError as unrelated:
        assert not is_outage(unrelated)
