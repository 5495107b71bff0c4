"""The pure rules of meters (``fleet/core/meters.py``) and what both engines share
(``fleet/core/meter_store.py``): meter names, amounts, scopes and hours, batches, the
per-scope rule ``added`` with its cap, the checks of a batch and a page, prefix ranges
and how a stored value reads."""

from __future__ import annotations

import math

import pytest

from fleet.core.errors import ContractValueError
from fleet.core.meter_store import (
    MAX_PAGE,
    check_batch,
    check_page,
    check_scope,
    check_scopes,
    expires,
    gone,
    prefix_end,
    stored_value,
)
from fleet.core.meters import (
    BUILT_IN,
    HOUR,
    HOUR_KEEP_SECONDS,
    MAX_METERS_PER_SCOPE,
    MeterBatch,
    added,
    check_amount,
    check_meter_name,
    domain_scope,
    hour_of,
    hour_scope,
    hour_start,
    pool_scope,
    run_scope,
    split_meter,
    type_scope,
)


def test_a_plugins_meter_names() -> None:
    assert check_meter_name("api_credits") == "api_credits"
    assert check_meter_name("a" * 40) == "a" * 40
    for bad in ("", "a" * 41, "Api", "1st", "_x", "a-b", "a b", 3, None, *BUILT_IN, "bytes"):
        with pytest.raises(ContractValueError) as info:
            check_meter_name(bad)
        assert info.value.field == "meter"


def test_split_meters_keep_a_safe_part() -> None:
    assert split_meter("bytes", "residential") == "bytes:residential"
    assert split_meter("solves", "capsolver.v2") == "solves:capsolver.v2"
    assert split_meter("requests", "a b/c") == "requests:a_b_c"
    assert split_meter("requests", "") == "requests:_"
    assert split_meter("requests", "x" * 300) == "requests:" + "x" * 200


def test_amounts_are_finite_and_never_negative() -> None:
    assert check_amount(3) == 3.0 and isinstance(check_amount(3), float)
    assert check_amount(0) == 0.0 and check_amount(1e15) == 1e15 and check_amount(0.25) == 0.25
    for bad in (-1, -0.001, math.inf, math.nan, 1e15 + 1e6, True, "1", None):
        with pytest.raises(ContractValueError) as info:
            check_amount(bad)
        assert info.value.field == "amount"


def test_scopes_and_hours() -> None:
    assert type_scope("scrape") == "type:scrape"
    assert run_scope("r-1") == "run:r-1"
    assert domain_scope("scrape", "shop.test") == "domain:scrape:shop.test"
    assert pool_scope("p") == "pool:p"
    at = 1_800_000_123.5
    start = hour_start(at)
    assert start % HOUR == 0 and start <= at < start + HOUR
    assert hour_start(start) == start and hour_start(start - 0.5) == start - HOUR
    assert hour_scope("scrape", at) == f"hour:scrape:{start}"
    assert hour_of(hour_scope("scrape", at)) == start
    for not_hour in ("type:scrape", "hour:scrape:abc", "hour:scrape:", "run:hour:1"):
        assert hour_of(not_hour) is None
    assert expires(f"hour:t:{start}") == start + HOUR_KEEP_SECONDS
    assert expires("type:t") is None
    assert not gone(f"hour:t:{start}", start + HOUR_KEEP_SECONDS - 0.001)
    assert gone(f"hour:t:{start}", start + HOUR_KEEP_SECONDS)
    assert not gone("type:t", 1e12)


def test_a_batch_sums_by_scope_and_meter() -> None:
    batch = MeterBatch()
    batch.add(["type:t", "run:r"], "requests", 1)
    batch.add(["type:t"], "requests", 2.5)
    batch.add(["type:t"], "spend", 0)  # nothing to add: left out
    batch.add(["type:t"], "spend", -1)
    assert batch.sums == {"type:t": {"requests": 3.5}, "run:r": {"requests": 1}}
    other = MeterBatch()
    other.add(["run:r", "pool:p"], "requests", 2)
    other.add(["run:r"], "bytes_received", 100)
    batch.merge(other)
    assert batch.sums == {
        "type:t": {"requests": 3.5},
        "run:r": {"requests": 3.0, "bytes_received": 100.0},
        "pool:p": {"requests": 2.0},
    }
    assert batch and not MeterBatch()
    # merging leaves the other batch as it was
    assert other.sums == {
        "run:r": {"requests": 2.0, "bytes_received": 100.0},
        "pool:p": {"requests": 2.0},
    }


def test_added_sums_by_name() -> None:
    stored = {"requests": 2.0, "spend": 0.1}
    after = added(stored, {"spend": 0.2, "bytes_received": 10.0})
    assert after == {"requests": 2.0, "spend": 0.1 + 0.2, "bytes_received": 10.0}
    assert stored == {"requests": 2.0, "spend": 0.1}  # not changed in place
    assert added({}, {}) == {}
    assert added({}, {"a": 0.0}) == {"a": 0.0}


def test_added_drops_new_names_past_the_cap_and_grows_the_known_ones() -> None:
    full = {f"m{i:03d}": 1.0 for i in range(MAX_METERS_PER_SCOPE)}
    after = added(full, {"m000": 2.0, "zzz": 5.0, "aaa": 1.0})
    assert len(after) == MAX_METERS_PER_SCOPE and after["m000"] == 3.0
    assert "zzz" not in after and "aaa" not in after
    # one place left: new names take it in name order, whatever the row's order
    almost = dict(list(full.items())[:-1])
    after = added(almost, {"zzz": 5.0, "bbb": 1.0, "m000": 1.0})
    assert len(after) == MAX_METERS_PER_SCOPE
    assert after["bbb"] == 1.0 and "zzz" not in after and after["m000"] == 2.0


def test_a_batch_is_checked_whole_and_sorted() -> None:
    batch = MeterBatch({"type:t": {"spend": 1.0, "attempts": 2}, "run:r": {}})
    assert check_batch(batch) == {"type:t": [("attempts", 2.0), ("spend", 1.0)]}
    bad: list[object] = [
        {"type:t": {"spend": -1.0}},
        {"type:t": {"spend": math.nan}},
        {"": {"spend": 1.0}},
        {"type:t\n": {"spend": 1.0}},
        {"x" * 1025: {"spend": 1.0}},
        {"hour:t:soon": {"spend": 1.0}},
        {"type:t": {"": 1.0}},
        {"type:t": {"m" * 257: 1.0}},
        {"type:t": {3: 1.0}},
        {3: {"spend": 1.0}},
        {"type:t": [("spend", 1.0)]},
    ]
    for sums in bad:
        with pytest.raises(ContractValueError):
            check_batch(MeterBatch(sums))  # type: ignore[arg-type]
    with pytest.raises(ContractValueError):
        check_batch({"type:t": {"spend": 1.0}})
    assert check_scope("hour:t:3600") == "hour:t:3600"


def test_pages_and_gets_are_checked() -> None:
    assert check_page("run:", None, 1) == ("run:", "", 1)
    assert check_page("", "run:b", MAX_PAGE) == ("", "run:b", MAX_PAGE)
    for prefix, after, limit in (
        (None, None, 5),
        ("run:", 3, 5),
        ("run:", None, 0),
        ("run:", None, MAX_PAGE + 1),
        ("run:", None, True),
        ("run:", None, 2.0),
    ):
        with pytest.raises(ContractValueError):
            check_page(prefix, after, limit)
    assert check_scopes(("type:a", "run:b", "type:a")) == ["type:a", "run:b"]
    for bad in ("type:a", b"type:a", None, ["type:a", ""]):
        with pytest.raises(ContractValueError):
            check_scopes(bad)


def test_prefix_ranges_end_past_every_name_with_the_prefix() -> None:
    assert prefix_end("run:") == "run;"
    assert prefix_end("") is None
    assert prefix_end("a\U0010ffff") == "b"
    assert prefix_end("\U0010ffff\U0010ffff") is None
    assert prefix_end("a\ud7ff") == "a\ue000"
    names = ["run:", "run:a", "run:\U0010ffff", "run:\U0010ffffz", "run;", "ruo", "rum"]
    end = prefix_end("run:")
    assert end is not None
    inside = [n for n in names if "run:" <= n < end]
    assert inside == [n for n in names if n.startswith("run:")]
    # byte order (SQLite's and Redis') is code point order
    assert sorted(names) == sorted(names, key=lambda n: n.encode())


def test_stored_values_that_are_not_finite_numbers_read_as_zero() -> None:
    assert stored_value(2.5) == 2.5 and stored_value(3) == 3.0
    for bad in ("abc", "1", None, b"1", math.inf, -math.inf, math.nan, True, 10**400):
        assert stored_value(bad) == 0.0
