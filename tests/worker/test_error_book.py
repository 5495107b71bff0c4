"""The worker's error book (fleet/core/error_book.py) on a real SQLite file: a storm of
2,000 failures of one kind is one backend write per flush and at most 3 snapshots; a
failure's snapshot is the last response's HTML (cut at the cap); a backend that is away
keeps the counts for the next flush; attempts stopped past their time limit are one
``TaskTimeout`` group located where the run was."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from pydantic import BaseModel

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.sqlite import SQLiteBackend
from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.core.error_book import ErrorBook, Recorder
from fleet.core.error_groups import HTML_CAP, SNAPSHOTS_PER_GROUP
from tests.worker.support import push, running_worker, wait_until


def _fail(i: int) -> ValueError:
    try:
        raise ValueError(f"no price on https://shop.test/item/{i}")
    except ValueError as exc:
        return exc


def _response(text: str) -> httpx.Response:
    r = httpx.Response(200, text=text, headers={"content-type": "text/html"})
    r.request = httpx.Request("GET", "https://shop.test/item/1")
    return r


async def test_a_storm_is_one_write_and_three_snapshots(tmp_path: Path) -> None:
    b = await open_backend(f"sqlite:///{tmp_path / 'f.db'}")
    assert isinstance(b, SQLiteBackend)
    try:
        book = ErrorBook(b.errors, "shop")
        rec = Recorder(book)
        rec.reset("t-1")
        rec.response = _response("<p>" + "x" * (HTML_CAP + 10) + "</p>")
        groups = {rec.failed(_fail(i), "Traceback ...") for i in range(2000)}
        assert len(groups) == 1
        (group,) = groups
        assert group is not None
        before = b.write_ops
        await book.flush()
        # One record of the group, then one put per snapshot taken (3 of 2,000).
        assert b.write_ops - before == 1 + SNAPSHOTS_PER_GROUP
        g = await b.errors.get("shop", group)
        assert g is not None and g.count == 2000 and g.domains == ("shop.test",)
        assert len(g.snapshots) == SNAPSHOTS_PER_GROUP
        snap = g.snapshots[0]
        assert snap.truncated and snap.html_bytes == HTML_CAP and snap.task_id == "t-1"
        # Nothing held: the next flush writes nothing.
        before = b.write_ops
        await book.close()
        assert b.write_ops == before
    finally:
        await b.close()


async def test_counts_wait_for_a_backend_that_is_away(tmp_path: Path) -> None:
    b = await open_backend(f"sqlite:///{tmp_path / 'f.db'}")
    book = ErrorBook(b.errors, "shop")
    rec = Recorder(book)
    group = rec.failed(_fail(1), "")
    await b.close()  # away: the flush keeps what it holds
    await book.flush()
    assert [s.count for s in book._sums.values()] == [1]  # kept for the next try
    b2 = await open_backend(f"sqlite:///{tmp_path / 'f.db'}")
    try:
        book._errors = b2.errors
        rec.failed(_fail(2), "")
        await book.close()
        assert group is not None
        g = await b2.errors.get("shop", group)
        assert g is not None and g.count == 2
    finally:
        await b2.close()


class Wait(BaseModel):
    n: int


@register("hangs")
class Hangs(BatchAutomation[BaseConfig]):
    """Waits past its time limit on every task."""

    Config = BaseConfig
    TaskPayload = Wait

    async def run_one(self, task: Task[Wait], ctx: Context[BaseConfig]) -> None:
        await self.hang(task.payload.n)

    async def hang(self, n: int) -> None:
        await asyncio.sleep(30 + n)


async def test_attempts_past_their_time_limit_are_one_group(mem: Backend) -> None:
    await push(mem, "hangs", *[{"n": n} for n in range(3)], max_attempts=1, timeout_seconds=0.2)
    async with running_worker(mem, [Hangs], "w-hangs"):

        async def dead() -> bool:
            return (await mem.queues.depths("hangs")).dead == 3

        await wait_until(dead, timeout=30, what="three timed-out tasks dead")
    page = await mem.errors.page("hangs")
    (g,) = page.items
    assert (g.exc, g.count) == ("fleet.core.errors.TaskTimeout", 3)
    assert g.message == "run_one exceeded timeout_seconds=<n>"
    assert g.location == "test_error_book.py:run_one"  # the run's frame when the limit struck
