"""Conformance of the Configs capability: partial configs stored with the generation
they were set at (one write per PATCH, whatever the number of workers), read back
together with :meth:`config_book`."""

from __future__ import annotations

import sqlite3

import pytest
import redis

from fleet.backends.base import Backend
from fleet.core.config_book import ConfigBook, desired_of


async def test_publish_stores_the_config_at_the_next_generation(backend: Backend) -> None:
    assert await backend.configs.book("t", ["w1"]) == ConfigBook()
    assert await backend.configs.next_generation("t") == 1
    gen = await backend.configs.publish("t", {"slots": 3})
    assert gen == 2  # the same counter as next_generation
    assert await backend.configs.get("t") == {"slots": 3}
    book = await backend.configs.book("t", ["w1", "w2"])
    assert (book.type_wide, book.type_gen, dict(book.overrides)) == ({"slots": 3}, 2, {})
    assert book.gen("w1") == 2 and book.merged("w1") == {"slots": 3}


async def test_an_override_has_its_own_generation(backend: Backend) -> None:
    await backend.configs.publish("t", {"slots": 3, "label": "a"})
    w2 = await backend.configs.publish("t", {"slots": 7}, "w2")
    book = await backend.configs.book("t", ["w1", "w2"])
    assert book.gen("w1") == 1 and book.gen("w2") == w2 == 2
    assert book.merged("w2") == {"slots": 7, "label": "a"}
    assert book.override("w1") == {}
    # A later type-wide change is newer than every override.
    assert await backend.configs.publish("t", {"slots": 4}) == 3
    book = await backend.configs.book("t", ["w2"])
    assert book.gen("w2") == 3 and book.merged("w2") == {"slots": 7}


async def test_the_book_holds_only_the_workers_asked_for(backend: Backend) -> None:
    await backend.configs.publish("t", {"a": 1}, "w1")
    await backend.configs.publish("t", {"b": 2}, "w2")
    await backend.configs.publish("u", {"c": 3}, "w1")  # another type
    book = await backend.configs.book("t", ["w2"])
    assert dict(book.overrides) == {"w2": ({"b": 2}, 2)}
    assert book.type_wide == {} and book.type_gen == 0


async def test_publish_takes_a_floor_like_next_generation(backend: Backend) -> None:
    assert await backend.configs.publish("t", {}, floor=7) == 8
    assert await backend.configs.publish("t", {}, floor=3) == 9
    assert await backend.configs.next_generation("t") == 10


async def test_config_set_keeps_the_generation(backend: Backend) -> None:
    gen = await backend.configs.publish("t", {"slots": 2})
    await backend.configs.set("t", {"slots": 5})  # a worker putting back what was lost
    book = await backend.configs.book("t", [])
    assert (book.type_wide, book.type_gen) == ({"slots": 5}, gen)
    await backend.configs.set("t", {"x": 1}, "w9")  # an override that was never published
    assert dict((await backend.configs.book("t", ["w9"])).overrides) == {"w9": ({"x": 1}, 0)}


async def test_purge_type_forgets_configs_and_generations(backend: Backend) -> None:
    await backend.configs.publish("t", {"slots": 2})
    await backend.configs.publish("t", {"slots": 1}, "w1")
    await backend.purge_type("t")
    assert await backend.configs.book("t", ["w1"]) == ConfigBook()


async def test_unreadable_generations_read_as_none(backend: Backend) -> None:
    await backend.configs.publish("t", {"slots": 2})
    if backend.url.startswith("redis"):
        client = redis.Redis.from_url(backend.url)
        client.delete("fleet:config:t:gens")
        client.set("fleet:config:t:gens", "not a hash")
        client.close()
    elif backend.url.startswith("sqlite"):
        with sqlite3.connect(backend.url.removeprefix("sqlite:///")) as conn:
            conn.execute("UPDATE config SET gen = 'x' WHERE type = 't'")
    else:
        pytest.skip("the memory backend stores generations as ints, never as text")
    book = await backend.configs.book("t", [])
    assert (book.type_wide, book.type_gen) == ({"slots": 2}, 0)
    # The next PATCH repairs it.
    gen = await backend.configs.publish("t", {"slots": 3})
    assert (await backend.configs.book("t", [])).type_gen == gen


def test_the_desired_config_is_the_newer_of_what_the_worker_wrote_and_the_book() -> None:
    book = ConfigBook({"slots": 2}, 5, {"w1": ({"label": "x"}, 3)})
    assert desired_of(book, "w1", {"slots": 1}, 4) == ({"slots": 2, "label": "x"}, 5)
    assert desired_of(book, "w1", {"slots": 9}, 6) == ({"slots": 9}, 6)
    assert desired_of(book, "w2", None, 0) == ({"slots": 2}, 5)
    assert book.distinct(["w1", "w2", "w3"]) == {
        "w1": {"slots": 2, "label": "x"},
        "w2": {"slots": 2},
    }
