"""OutageLog and OutageBoard: which failures and recoveries deserve a log line — one
outage per process and backend, however many components notice it."""

from __future__ import annotations

import logging

import pytest

from fleet.core.errors import BackendUnavailable
from fleet.core.outage import (
    REPORT_EVERY,
    SETTLE_SECONDS,
    STALE_SECONDS,
    OutageBoard,
    OutageLog,
    backend_of,
    is_outage,
)

DOWN = BackendUnavailable("redis at redis://:***@db:6379/0 is unavailable: Connection refused")
OTHER = BackendUnavailable("redis at redis://other:6379/0 is unavailable: Connection refused")


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
def board() -> OutageBoard:
    """The process's outages, of this test alone."""
    return OutageBoard()


@pytest.fixture
def outages(clock: Clock, board: OutageBoard) -> OutageLog:
    return OutageLog(logging.getLogger("test.outage"), clock=clock, board=board)


def view(clock: Clock, board: OutageBoard) -> OutageLog:
    """Another loop's OutageLog in the same process."""
    return OutageLog(logging.getLogger("test.outage.other"), clock=clock, board=board)


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
    clock.now += SETTLE_SECONDS
    assert outages.failed("events", DOWN) is not None  # a new outage is a new first line


def test_recovered_without_an_outage_says_nothing(outages: OutageLog) -> None:
    assert outages.recovered("sweeper") is None


def test_components_share_the_outage_of_their_backend(
    outages: OutageLog, clock: Clock, board: OutageBoard
) -> None:
    other = view(clock, board)
    assert outages.failed("a", DOWN) is not None
    assert outages.failed("b", DOWN) is None  # the same outage, already said
    assert other.failed("heartbeat", DOWN) is None
    assert outages.is_down("a") and outages.is_down("b") and other.is_down("heartbeat")
    clock.now += 2
    assert (
        other.recovered("heartbeat")
        == "heartbeat: backend back after 2.0s (3 failed attempts in 3 loops)"
    )
    # The others' own successes say nothing more, and end their own state.
    assert outages.is_down("a")
    assert outages.recovered("a") is None and not outages.is_down("a")


def test_another_backend_is_another_outage(outages: OutageLog) -> None:
    assert outages.failed("a", DOWN) is not None
    assert outages.failed("b", OTHER) is not None
    assert outages.recovered("a") is not None
    assert outages.failed("b", OTHER) is None  # still the other one's outage


def test_many_loops_of_an_eight_second_outage_are_two_lines(
    clock: Clock, board: OutageBoard
) -> None:
    loops = [view(clock, board) for _ in range(12)]  # feeder, events, slots, ...
    lines = []
    for _ in range(80):
        for n, loop in enumerate(loops):
            lines.append(loop.failed(f"loop {n}", DOWN if n % 2 else "timed out"))
        clock.now += 0.1
    for n, loop in enumerate(loops):
        lines.append(loop.recovered(f"loop {n}"))
    said = [line for line in lines if line is not None]
    assert len(said) == 2, said
    assert said[0].startswith("loop 0: backend down (timed out)")
    assert said[1] == "loop 0: backend back after 8.0s (960 failed attempts in 12 loops)"


def test_still_down_once_per_period_whoever_fails(clock: Clock, board: OutageBoard) -> None:
    a, b = view(clock, board), view(clock, board)
    a.failed("feeder", DOWN)
    said = []
    for _ in range(int(6 * REPORT_EVERY)):  # 90 s
        clock.now += 0.5
        said += [a.failed("feeder", DOWN), b.failed("heartbeat", "timed out")]
    still = [line for line in said if line is not None]
    assert len(still) == 3, still
    assert still[0].startswith("feeder: backend still down after 30s (")
    assert still[0].endswith(
        "in 2 loops; last: redis at redis://:***@db:6379/0 is unavailable: Connection refused)"
    )


def test_an_uncertain_success_ends_the_outage_only_when_no_loop_still_fails(
    outages: OutageLog, clock: Clock
) -> None:
    outages.failed("ticker: slots", DOWN)
    outages.failed("heartbeat", DOWN)
    clock.now += 6
    # A run_slot that lasted, while the heartbeat still fails: not back.
    assert outages.recovered("ticker: slots", certain=False) is None
    assert not outages.is_down("ticker: slots")
    assert outages.failed("heartbeat", DOWN) is None
    assert outages.recovered("heartbeat", certain=False) is not None  # nobody fails now


def test_late_failures_after_the_recovery_say_nothing(
    outages: OutageLog, clock: Clock, board: OutageBoard
) -> None:
    other = view(clock, board)
    outages.failed("heartbeat", DOWN)
    assert outages.recovered("heartbeat") is not None
    # A call that began during the outage fails after it: no new outage line ...
    clock.now += SETTLE_SECONDS / 2
    assert other.failed("event subscription", DOWN) is None
    # ... and a success ends it without a "back" line.
    assert outages.recovered("heartbeat") is None
    assert other.recovered("event subscription") is None
    assert not board.is_down(backend_of(DOWN) or "")


def test_failures_that_outlast_the_settling_time_are_a_new_outage(
    outages: OutageLog, clock: Clock
) -> None:
    outages.failed("heartbeat", DOWN)
    outages.recovered("heartbeat")
    clock.now += 1
    assert outages.failed("heartbeat", DOWN) is None
    clock.now += SETTLE_SECONDS
    line = outages.failed("heartbeat", DOWN)
    assert line is not None and "backend down" in line
    clock.now += 1
    back = outages.recovered("heartbeat")
    # The outage began with the first failure past the recovery.
    assert back == "heartbeat: backend back after 6.0s (2 failed attempts)"


def test_an_outage_nobody_retries_is_forgotten(outages: OutageLog, clock: Clock) -> None:
    assert outages.failed("worker id claim", DOWN) is not None  # then the loop gave up
    clock.now += STALE_SECONDS
    assert outages.failed("heartbeat", DOWN) is not None


def test_an_error_naming_no_backend_joins_the_outage_under_way(
    outages: OutageLog, clock: Clock, board: OutageBoard
) -> None:
    assert outages.failed("heartbeat", DOWN) is not None
    other = view(clock, board)
    assert other.failed("event subscription", "redis did not confirm in time") is None
    assert other.recovered("event subscription") is not None


def test_an_outage_that_began_unnamed_is_the_named_backends(
    outages: OutageLog, clock: Clock, board: OutageBoard
) -> None:
    assert outages.failed("event subscription", "timed out") is not None
    other = view(clock, board)
    assert other.failed("heartbeat", DOWN) is None  # the same outage
    assert outages.recovered("event subscription") is not None
    assert other.recovered("heartbeat") is None


def test_backend_of() -> None:
    try:
        try:
            raise DOWN
        except BackendUnavailable as exc:
            raise RuntimeError("plugin wrapped it") from exc
    except RuntimeError as wrapped:
        assert backend_of(wrapped) == "redis://:***@db:6379/0"
    assert backend_of(DOWN) == "redis://:***@db:6379/0"
    assert backend_of("redis at redis://h:1/0 cannot serve this now: LOADING") == "redis://h:1/0"
    assert (
        backend_of("BackendUnavailable: sqlite /tmp/f.db: database is locked") == "sqlite:/tmp/f.db"
    )
    assert backend_of("timed out") is None


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
