"""The rules of error groups (fleet/core/error_groups.py): the normalised message, the
location in the plugin's code, the key and its id, the merge and the snapshot budget."""

from __future__ import annotations

import json

import pytest

from fleet.core.error_groups import (
    MAX_DOMAINS,
    GroupDelta,
    Held,
    Sample,
    evicted,
    group_id,
    key_of,
    location,
    location_in,
    merged,
    normalise,
    parse_cursor,
)
from fleet.core.errors import ContractValueError


def _raise(message: str) -> ValueError:
    try:
        json.loads("{")  # a frame in the standard library below ours
    except ValueError:
        try:
            raise ValueError(message)
        except ValueError as exc:
            return exc
    raise AssertionError


def test_three_hundred_urls_make_one_key() -> None:
    keys = {
        key_of("shop", _raise(f"no price on https://shop-{i}.test/item/{i * 7}?page={i}")).id
        for i in range(300)
    }
    assert len(keys) == 1


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("GET http://a.test/x?id=4 failed", "GET <url> failed"),
        ("user bob@mail.example.com refused", "user <email> refused"),
        ("task 3f2b8c1e-9a7d-4e2b-8f00-1a2b3c4d5e6f gone", "task <uuid> gone"),
        ("no key 'price' in 'item-42'", "no key <str> in <str>"),
        ('field "title" empty', "field <str> empty"),
        ("object at 0x7f3a2b1c gone, hash deadbeef42", "object at <id> gone, hash <id>"),
        ("took 12.5 s for 3 pages", "took <n> s for <n> pages"),
        ("  many\n  spaces  ", "many spaces"),
    ],
)
def test_normalise_masks_what_varies(raw: str, want: str) -> None:
    assert normalise(raw) == want


def test_normalise_keeps_words_with_hex_letters() -> None:
    assert normalise("bad feedback from decoded page") == "bad feedback from decoded page"


def test_location_is_the_innermost_user_frame_without_its_line() -> None:
    exc = _raise("x")
    assert location(exc.__traceback__) == "test_error_groups.py:_raise"
    assert location(None) == "?"


def test_key_parts_and_a_stable_id() -> None:
    k = key_of("shop", _raise("no price on https://a.test/1"))
    assert (k.exc, k.message) == ("ValueError", "no price on <url>")
    assert k.id == group_id(k) and len(k.id) == 16
    assert key_of("other", _raise("no price on https://b.test/2")).id != k.id
    # a class of a module is named with its module
    assert key_of("shop", ContractValueError("x")).exc == "fleet.core.errors.ContractValueError"


def _d(count: int, first: float, last: float, *domains: str, task: str = "t") -> GroupDelta:
    return GroupDelta("0" * 16, "E", "m", "f.py:g", count, first, last, domains, Sample(task))


def test_merge() -> None:
    g = merged(None, _d(2, 5.0, 6.0, "a", "a", task="one"))
    assert (g.count, g.first_seen, g.last_seen, g.domains) == (2, 5.0, 6.0, ("a",))
    g = merged(g, _d(1, 3.0, 4.0, "b", task="older"))
    assert (g.count, g.first_seen, g.last_seen, g.sample.task_id) == (3, 3.0, 6.0, "one")
    g = merged(g, _d(1, 7.0, 7.0, *[f"d{i}" for i in range(40)], task="newer"))
    assert g.sample.task_id == "newer" and len(g.domains) == MAX_DOMAINS
    assert g.domains[:2] == ("a", "b")


def test_evicted_per_group_then_budget() -> None:
    held = [Held("g", "1", 1.0, 10), Held("g", "2", 2.0, 10), Held("h", "1", 0.5, 50)]
    keep, gone = evicted(held, Held("g", "3", 3.0, 10), per_group=2, budget=1000)
    assert keep and gone == [("g", "1")]
    keep, gone = evicted(held, Held("g", "3", 3.0, 40), per_group=5, budget=100)
    assert keep and gone == [("h", "1")]
    assert evicted(held, Held("g", "3", 3.0, 101), budget=100) == (False, [])


def test_cursor() -> None:
    assert parse_cursor(None) is None and parse_cursor("") is None
    assert parse_cursor(f"{1.25!r}:{'a' * 16}") == (1.25, "a" * 16)
    for bad in ("x", "1.0:zz", "nan:" + "a" * 16):
        with pytest.raises(ContractValueError):
            parse_cursor(bad)


def test_location_in_a_formatted_stack() -> None:
    stack = (
        "Traceback (most recent call last):\n"
        '  File "/srv/plugins/shop.py", line 40, in run_one\n    await self.fetch()\n'
        '  File "/srv/plugins/shop.py", line 12, in fetch\n    await asyncio.sleep(9)\n'
        f'  File "{json.__file__}", line 1, in loads\n'
    )
    assert location_in(stack) == "shop.py:fetch"
    assert location_in("") == "?" and location_in(None) == "?"
