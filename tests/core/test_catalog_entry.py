"""The typed catalog entry names every field an entry has, and nothing more."""

from __future__ import annotations

import json
from typing import Any, get_type_hints

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, ContinuousAutomation, Pool
from fleet.core.catalog import (
    CatalogEntry,
    ChannelEntry,
    PoolEntry,
    as_entry,
    as_stored,
    catalog_entry,
    describe,
)
from fleet.core.stored import catalog_entry_of

#: Keys only an entry that could not be read has.
UNREADABLE = {"unreadable", "raw"}


class Item(BaseModel):
    url: str


class Batch(BatchAutomation[BaseConfig]):
    automation_type = "typed-batch"
    TaskPayload = Item
    Output = Item
    Pools = {"things": Pool[Item, Item]("typed-things", payload=Item, tags=Item)}

    async def run_one(self, task: Any, ctx: Any) -> None:
        return None


class Loop(ContinuousAutomation[BaseConfig]):
    automation_type = "typed-loop"


def test_an_entry_has_exactly_the_typed_fields() -> None:
    fields = set(get_type_hints(CatalogEntry)) - UNREADABLE
    for cls in (Batch, Loop):
        assert set(describe(cls)) == fields
    entry = describe(Batch)
    assert set(entry["queue"] or {}) == set(get_type_hints(ChannelEntry))
    assert set(entry["stream"] or {}) == set(get_type_hints(ChannelEntry))
    assert set(entry["pools"]["things"]) == set(get_type_hints(PoolEntry))


def test_the_stored_form_is_the_same_json_object() -> None:
    entry = describe(Batch)
    assert catalog_entry(Batch) == entry
    assert as_entry(as_stored(entry)) is entry
    assert json.loads(json.dumps(catalog_entry(Batch))) == entry


def test_an_unreadable_entry_has_only_its_marker_fields() -> None:
    marker = catalog_entry_of("typed-batch", b"\xff not json")
    assert set(marker) == {"type"} | UNREADABLE
    assert set(marker) <= set(get_type_hints(CatalogEntry))
