"""The constant tables of the Lua scripts are the Python ones (issue 41, item 6):
the record's fields and JSON tail (``records.py``), its state letters, the browse
indexes (``keys.BROWSE_INDEXES``), the tier names, the queue counters, the run
counters and the order of the queue scripts' KEYS (``keys.QUEUE_KEY_PARTS``). Read
from the sources, so a table changed on one side only fails here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from fleet.backends.redis import keys
from fleet.backends.redis.records import (
    RECORD_FIELDS,
    RECORD_STATES,
    RECORD_TAIL,
    parse_record,
    split_record,
)
from fleet.backends.redis.scripts import load_source
from fleet.core.records import TIERS, QueueCounters
from fleet.core.runs import COUNTERS

COMMON = load_source("queue_common")
LUA = Path(keys.__file__).parent / "lua"


def _lua_strings(table_text: str) -> list[str]:
    return re.findall(r"'([^']*)'", table_text)


def test_record_fields_and_tail_are_the_python_ones() -> None:
    pattern = re.search(r"local REC_PATTERN = '([^']*)'", COMMON)
    assert pattern is not None
    assert pattern.group(1).count("([^|]*)") == len(RECORD_FIELDS)
    dec = re.search(r"local function dec\(raw\)\n(.*?)\nend\n", COMMON, re.S)
    assert dec is not None
    assert re.findall(r"local (\w+(?:, \w+)*) = string.match", dec.group(1))[0].split(", ") == [
        *RECORD_FIELDS,
        "rest",
    ]
    assert re.findall(r"rec\.(\w+) = \w*\(?jnull\(extra\.(\w+)\)", dec.group(1)) == [
        (k, k) for k in RECORD_TAIL
    ]
    enc = re.search(r"cjson.encode\(\{(.*?)\}\)", COMMON, re.S)
    assert enc is not None
    assert re.findall(r"(\w+) = rec\.\w+", enc.group(1)) == list(RECORD_TAIL)


def test_record_states_are_the_letters_the_scripts_write() -> None:
    """Every state letter a script writes (``rec.s = 'x'`` or ``finish(id, rec, 'x'``,
    in any script) is one Python reads, and Python reads no letter no script writes."""
    sources = "\n".join(load_source(path.stem) for path in sorted(LUA.glob("*.lua")))
    written = set(re.findall(r"rec\.s = '(\w)'", sources))
    written |= set(re.findall(r"finish\(\w+, rec, '(\w)'", sources))
    assert written == set(RECORD_STATES), (written, set(RECORD_STATES))


def test_browse_indexes_are_the_python_ones() -> None:
    table = re.search(r"local IDX_SUFFIX = \{(.*?)\}", COMMON, re.S)
    assert table is not None
    pairs = dict(re.findall(r"(\w) = ':browse:(\w+)'", table.group(1)))
    assert tuple(pairs.values()) == keys.BROWSE_INDEXES
    assert set(pairs) - {"x"} <= set(RECORD_STATES)


def test_tier_names_are_the_python_ones() -> None:
    table = re.search(r"local TIER_NAMES = \{(.*?)\}", load_source("queue_groups"))
    assert table is not None
    assert tuple(_lua_strings(table.group(1))) == TIERS


def test_queue_counters_are_the_python_ones() -> None:
    lua = "\n".join(load_source(n) for n in keys_scripts())
    named = set(re.findall(r"count\('(\w+)'", lua))
    fields = {f.name for f in dataclasses.fields(QueueCounters)}
    assert named and named <= fields, named - fields


def test_run_counters_are_the_python_ones() -> None:
    table = re.search(r"local RUN_COUNTERS = \{(.*?)\}", load_source("run_common"), re.S)
    assert table is not None
    assert tuple(_lua_strings(table.group(1))) == COUNTERS


def test_queue_keys_are_in_the_python_order() -> None:
    """Every ``K_* = KEYS[n]`` of queue_common names the part at n in QUEUE_KEY_PARTS."""
    expect = {
        "K_NORMAL": "",
        "K_HIGH": ":high",
        "K_LOW": ":low",
        "K_PROC": ":processing",
        "K_PBODY": ":processing:body",
        "K_SCHED": ":scheduled",
        "K_DEAD": ":dead",
        "K_TASKS": ":tasks",
        "K_COUNTERS": ":counters",
        "K_DONE": ":done:",
        "K_WAKE": ":wake",
        "K_DEADINFO": ":dead:info",
        "K_DONE_PREV": ":done:",
        "K_STARTED": ":processing:started",
        "K_FINISHED": ":finished",
        "K_REC": ":rec:",
    }
    found: dict[str, int] = {}
    for names, values in re.findall(r"^local (K_[\w, ]+) = (KEYS\[[^\n]+)$", COMMON, re.M):
        for name, value in zip(names.split(", "), values.split(", "), strict=True):
            found[name] = int(re.fullmatch(r"KEYS\[(\d+)\]", value).group(1))  # type: ignore[union-attr]
    assert set(expect) <= set(found)
    for name, part in expect.items():
        assert keys.QUEUE_KEY_PARTS[found[name] - 1] == part, name


def keys_scripts() -> list[str]:
    return ["push", "reserve", "ack", "nack", "release", "sweep", "cancel", "dead", "throttle"]


def test_one_parser_reads_every_field() -> None:
    raw = 'p|2|5|-1|tok|1|99.5|/1767180000.25/|{"e":"boom","g":"g1","rn":"r1","r":1}'
    parts, extra = split_record(raw)
    assert dict(zip(RECORD_FIELDS, parts, strict=False))["d"] == "/1767180000.25/"
    assert extra["g"] == "g1"
    rec = parse_record(raw)
    assert (rec.state, rec.attempt, rec.max_attempts, rec.priority, rec.token) == (
        "p",
        2,
        5,
        -1,
        "tok",
    )
    assert (rec.cancel, rec.expires_at, rec.submitted_at) == (True, 99.5, 1767180000.25)
    assert (rec.last_error, rec.group, rec.run, rec.refunds) == ("boom", "g1", "r1", 1)
    for bad in ("q|1", "q|||||||/1|[1]"):
        try:
            split_record(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
