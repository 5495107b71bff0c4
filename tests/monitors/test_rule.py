"""The monitors' one rule (fleet.core.monitors): values, thresholds, live samples,
the end, and the ok → firing → resolved states with their times."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fleet.core.monitors import MIN_SAMPLE, Figures, Monitors, MonitorState, evaluate, merged


def figures(ended: bool = False, **kw: Any) -> Figures:
    counters = {"done": 0, "dead": 0, "submitted": 0, "duplicates": 0, **kw.pop("counters", {})}
    return Figures(
        counters=counters,
        meters=kw.pop("meters", {}),
        created_at=kw.pop("created_at", 1000.0),
        finished_at=kw.pop("finished_at", None),
        ended=ended,
        output_at=kw.pop("output_at", 1000.0),
        settled=kw.pop("settled", ended),
    )


def by_name(states: list[MonitorState]) -> dict[str, MonitorState]:
    return {s.name: s for s in states}


def test_rates_wait_for_their_sample_live_but_not_at_the_end() -> None:
    spec = Monitors(max_error_rate=0.1, max_null_rate={"price": 0.2})
    few = figures(counters={"done": 1, "dead": 2}, meters={"outputs": 3, "nulls:price": 3})
    live = by_name(evaluate(spec, few, 2000.0, {}))
    assert live["max_error_rate"].value is None and live["max_error_rate"].state == "ok"
    ended = by_name(evaluate(spec, figures(True, counters={"done": 1, "dead": 2}), 2000.0, {}))
    assert ended["max_error_rate"].value == pytest.approx(2 / 3)
    assert ended["max_error_rate"].state == "firing"
    many = figures(meters={"outputs": MIN_SAMPLE, "nulls:price": 5})
    (m,) = [s for s in evaluate(spec, many, 2000.0, {}) if s.name == "max_null_rate:price"]
    assert (m.value, m.threshold, m.state) == (0.25, 0.2, "firing")


def test_firing_then_resolved_keeps_its_times() -> None:
    spec = Monitors(max_duplicate_rate=0.5)
    bad = figures(counters={"submitted": 10, "duplicates": 30})
    good = figures(counters={"submitted": 100, "duplicates": 30})
    (first,) = evaluate(spec, bad, 10.0, {})
    assert (first.state, first.since) == ("firing", 10.0)
    (still,) = evaluate(spec, bad, 20.0, {"max_duplicate_rate": first})
    assert (still.state, still.since) == ("firing", 10.0)
    (resolved,) = evaluate(spec, good, 30.0, {"max_duplicate_rate": still})
    assert (resolved.state, resolved.since) == ("resolved", 30.0)
    (later,) = evaluate(spec, good, 40.0, {"max_duplicate_rate": resolved})
    assert (later.state, later.since) == ("resolved", 30.0)
    assert MonitorState.from_dict(later.to_dict()) == later


def test_items_duration_and_silence() -> None:
    spec = Monitors(min_items=5, max_duration_seconds=60, no_output_for_seconds=30)
    running = by_name(evaluate(spec, figures(meters={"outputs": 0}, output_at=1000.0), 1045.0, {}))
    assert running["min_items"].state == "ok"  # a running run may still emit
    assert running["max_duration_seconds"].state == "ok"
    assert running["no_output_for_seconds"].state == "firing"
    assert running["no_output_for_seconds"].value == 45.0
    ended = figures(True, meters={"outputs": 4}, finished_at=1070.0)
    done = by_name(evaluate(spec, ended, 5000.0, {}))
    assert (done["min_items"].state, done["min_items"].value) == ("firing", 4.0)
    assert (done["max_duration_seconds"].state, done["max_duration_seconds"].value) == (
        "firing",
        70.0,
    )
    assert done["no_output_for_seconds"].state == "ok"


def test_min_items_waits_for_the_last_meters() -> None:
    spec = Monitors(min_items=1)
    (m,) = evaluate(spec, figures(True, settled=False, meters={"outputs": 0}), 1.0, {})
    assert m.state == "ok"  # ended, but a worker's last item may still be on its way
    (m,) = evaluate(spec, figures(True, meters={"outputs": 0}), 1.0, {})
    assert m.state == "firing"


def test_schema_valid_rate() -> None:
    spec = Monitors(min_schema_valid_rate=0.9)
    f = figures(meters={"outputs": 40, "outputs_valid": 30})
    (m,) = evaluate(spec, f, 1.0, {})
    assert (m.value, m.state) == (0.75, "firing")


def test_merged_takes_the_strictest() -> None:
    spec = merged(
        [
            Monitors(min_items=10, max_error_rate=0.1, max_null_rate={"a": 0.5}),
            Monitors(min_items=20, max_error_rate=0.2, max_null_rate={"a": 0.2, "b": 0.1}),
        ]
    )
    assert spec.min_items == 20 and spec.max_error_rate == 0.1
    assert spec.max_null_rate == {"a": 0.2, "b": 0.1}
    assert spec.names() == ["min_items", "max_error_rate", "max_null_rate:a", "max_null_rate:b"]


def test_bad_specs() -> None:
    for bad in (
        {"max_error_rate": 1.5},
        {"min_items": -1},
        {"min_itemz": 3},
        {"max_null_rate": {"a": 2}},
    ):
        with pytest.raises(ValidationError):
            Monitors.model_validate(bad)
    assert Monitors().empty and not Monitors(min_items=0).empty
