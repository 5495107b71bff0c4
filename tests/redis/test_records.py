"""The Redis task record codec (pure, no Redis)."""

from __future__ import annotations

import json

import pytest

from fleet.backends.redis.records import body_with_record, delivered_body, parse_record
from fleet.core.records import TaskBody


def test_hot_record_without_tail() -> None:
    rec = parse_record("p|2|3|5|abc.1||1764408081.5|")
    assert (rec.state, rec.attempt, rec.max_attempts, rec.priority) == ("p", 2, 3, 5)
    assert rec.token == "abc.1" and rec.cancel is False
    assert rec.expires_at == 1764408081.5 and rec.finished_at is None
    assert rec.last_error is None and rec.scheduled_body is None


def test_tail_may_hold_pipes_and_json() -> None:
    tail = json.dumps({"e": "a|b|c", "t": "tb\n|x", "f": "12.25", "b": '{"id":"x"}'})
    rec = parse_record("s|1|3|-1||1||99.5|" + tail)
    assert rec.state == "s" and rec.priority == -1 and rec.cancel is True
    assert rec.last_error == "a|b|c" and rec.traceback == "tb\n|x"
    assert rec.failed_at == 12.25 and rec.finished_at == 99.5
    assert rec.scheduled_body == '{"id":"x"}'


def test_not_a_record() -> None:
    with pytest.raises(ValueError):
        parse_record('{"s": "q"}')


def test_body_with_record_applies_the_mutable_fields() -> None:
    raw = TaskBody(id="t", payload={"n": 1}, priority=2, last_error="old").to_json()
    rec = parse_record('p|3|5|2|tok||||{"e":"boom","f":"7.5"}')
    body = body_with_record(raw, rec)
    assert (body.attempt, body.max_attempts, body.priority) == (3, 5, 2)
    assert body.last_error == "boom" and body.failed_at == 7.5 and body.traceback is None
    assert body.payload == {"n": 1}


@pytest.mark.parametrize(
    "record",
    [
        "p|1|3|0|tok.1|||",
        'p|2||5|tok.2||12.5||{"e":"x|y","t":"tb","f":"3.25"}',
        "p|1|0|-1|tok.3|1|||",
        "p||||tok.4|||",
    ],
)
def test_fast_delivery_path_matches_the_general_one(record: str) -> None:
    raw = TaskBody(
        id="t",
        payload=[1, {"a": None}],
        priority=5,
        max_attempts=4,
        enqueued_at=1.5,
        ttl_seconds=9.0,
    ).to_json()
    assert delivered_body(raw, record) == body_with_record(raw, parse_record(record))
