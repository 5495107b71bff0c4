"""Conformance: every task ``reserve`` drops for its ttl is logged at INFO on the
``fleet.backends`` logger (type, id, age, ttl), the same on every backend."""

from __future__ import annotations

import logging
import re

import pytest

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock

from .helpers import TYPE, push, reserve_ids

LINE = re.compile(
    r"task (?P<id>\S+) of (?P<type>\S+) expired unstarted after (?P<age>\d+\.\d)s "
    r"in the queue \(ttl (?P<ttl>[\d.]+)s\)"
)


def drops(caplog: pytest.LogCaptureFixture) -> list[dict[str, str]]:
    out = []
    for record in caplog.records:
        if record.name == "fleet.backends" and (m := LINE.fullmatch(record.getMessage())):
            assert record.levelno == logging.INFO
            out.append(m.groupdict())
    return out


@pytest.fixture(autouse=True)
def _info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="fleet.backends")


async def test_each_ttl_drop_is_logged_with_type_id_and_age(
    backend: Backend, caplog: pytest.LogCaptureFixture, frozen: ManualClock
) -> None:
    await push(backend, "old1", "old2", ttl_seconds=0.1)
    await push(backend, "fresh", ttl_seconds=60)
    frozen.advance(0.3)
    assert await reserve_ids(backend, k=5) == ["fresh"]
    got = drops(caplog)
    assert [(d["id"], d["type"], d["ttl"]) for d in got] == [
        ("old1", TYPE, "0.1"),
        ("old2", TYPE, "0.1"),
    ]
    assert all(0.3 <= float(d["age"]) < 10 for d in got)
    assert (await backend.queues.depths(TYPE)).counters.expired == 2


async def test_a_reserve_that_only_drops_logs_too(
    backend: Backend, caplog: pytest.LogCaptureFixture, frozen: ManualClock
) -> None:
    await push(backend, "gone", ttl_seconds=0.05)
    frozen.advance(0.2)
    # Nothing is delivered (the Redis reply then carries only the drops), and a
    # blocking reserve logs the drop once, not once per look.
    assert await backend.queues.reserve(TYPE, k=3, timeout=0.3) == []
    assert [d["id"] for d in drops(caplog)] == ["gone"]
    assert await reserve_ids(backend, k=3) == []
    assert len(drops(caplog)) == 1


async def test_nothing_is_logged_when_nothing_expired(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    await push(backend, "a", ttl_seconds=60)
    await push(backend, "b")
    assert await reserve_ids(backend, k=5) == ["a", "b"]
    assert await reserve_ids(backend, k=5) == []
    assert [r for r in caplog.records if r.name == "fleet.backends"] == []
