"""A process's error groups of one type, summed and sent (docs/errors.md).

A failed attempt lands in the type's :class:`ErrorBook` (``ctx.access.errors``): its
group's count, first and last seen, the domains it touched and its newest sample are
summed here and sent every :data:`FLUSH_SECONDS` in one ``errors.record`` (at close too),
so a storm of 2,000 failures of one kind is one backend call per 2 s. A task that does
not fail pays nothing here: the book is reached only from the worker's ``except``.

Snapshots: each slot's :class:`Recorder` remembers the last response its task's
``ctx.http()`` clients got and the browser page it holds. At a failure (the page's, in
``BrowserPool.acquire`` before its context closes; the response's, where the attempt
failed) the book is asked whether the group still wants one (:meth:`ErrorBook.wants`:
this process took fewer than :data:`~fleet.core.error_groups.SNAPSHOTS_PER_GROUP` of it)
and only then is the HTML read and the screenshot taken. Snapshots are put one call each,
after the flush's record.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fleet.core.error_groups import (
    HTML_CAP,
    MESSAGE_CAP,
    PNG_CAP,
    SNAPSHOTS_PER_GROUP,
    TRACEBACK_CAP,
    GroupDelta,
    GroupKey,
    Sample,
    Snapshot,
    SnapshotMeta,
    class_name,
    domain_of,
    key_of,
    location_in,
    normalise,
)
from fleet.core.errors import FleetError, TaskTimeout
from fleet.core.flushing import LaterFlush
from fleet.core.redact import mask_credentials

if TYPE_CHECKING:
    from fleet.core.capabilities.errors import ErrorGroups

log = logging.getLogger("fleet.errors")

#: How often a book sends what it holds (s).
FLUSH_SECONDS = 2.0
#: Groups a process remembers the snapshots it took of (then it forgets them all).
MEMO_GROUPS = 10_000
#: Seconds a page gets to give its HTML and its screenshot.
SNAPSHOT_TIMEOUT = 5.0
#: Snapshots held for sending at most (more are dropped: the backend is away).
MAX_PENDING = 32


@dataclass(slots=True)
class _Sum:
    key: GroupKey
    count: int
    first: float
    last: float
    domains: list[str] = field(default_factory=list)
    sample: Sample = field(default_factory=Sample)


class ErrorBook(LaterFlush):
    """A type's failure groups in one process.

    Args:
        errors: Where they go (the backend's ``errors``).
        automation_type: The type.
    """

    def __init__(self, errors: ErrorGroups, automation_type: str) -> None:
        super().__init__(FLUSH_SECONDS, f"errors:{automation_type}")
        self._errors = errors
        self.automation_type = automation_type
        self._sums: dict[str, _Sum] = {}
        self._snapshots: list[tuple[str, Snapshot]] = []
        self._taken: dict[str, int] = {}

    def key(self, exc: BaseException) -> GroupKey:
        """The group key of ``exc`` in this type."""
        return key_of(self.automation_type, exc)

    def wants(self, group: str) -> bool:
        """True if this process took fewer than ``SNAPSHOTS_PER_GROUP`` of ``group``."""
        return self._taken.get(group, 0) < SNAPSHOTS_PER_GROUP

    def _took(self, group: str) -> None:
        if len(self._taken) >= MEMO_GROUPS:
            self._taken.clear()
        self._taken[group] = self._taken.get(group, 0) + 1

    def failed(
        self,
        key: GroupKey,
        *,
        task_id: str,
        message: str,
        traceback: str,
        domains: list[str],
        at: float | None = None,
    ) -> str:
        """One failure of ``key``'s group; its id."""
        at = time.time() if at is None else at
        group = key.id
        sample = Sample(
            task_id,
            mask_credentials(message[:MESSAGE_CAP]),
            mask_credentials(traceback[-TRACEBACK_CAP:]),
        )
        got = self._sums.get(group)
        if got is None:
            got = self._sums[group] = _Sum(key, 0, at, at)
        got.count += 1
        got.first, got.last = min(got.first, at), max(got.last, at)
        for d in domains:
            if d not in got.domains and len(got.domains) < 64:
                got.domains.append(d)
        got.sample = sample
        self._schedule()
        return group

    def snapshot(self, group: str, snapshot: Snapshot) -> None:
        """Send ``snapshot`` of ``group`` with the next flush (counted as taken)."""
        self._took(group)
        if len(self._snapshots) < MAX_PENDING:
            self._snapshots.append((group, snapshot))
            self._schedule()

    async def flush(self) -> None:
        """Send what the book holds: one ``record`` of every group's delta, then each
        snapshot (kept for the next flush if the backend fails)."""
        sums, self._sums = self._sums, {}
        snaps, self._snapshots = self._snapshots, []
        deltas = [
            GroupDelta(
                s.key.id,
                s.key.exc,
                s.key.message,
                s.key.location,
                s.count,
                s.first,
                s.last,
                tuple(s.domains),
                s.sample,
            )
            for s in sums.values()
        ]
        recorded = not deltas
        try:
            if deltas:
                await self._errors.record(self.automation_type, deltas)
                recorded = True
            while snaps:
                group, snap = snaps[0]
                await self._errors.put(self.automation_type, group, snap)
                snaps.pop(0)
        except FleetError as exc:
            log.warning("%s: error groups not sent, kept for the next try: %s",
                        self.automation_type, exc)  # fmt: skip
            if not recorded:
                for group, s in sums.items():
                    self._merge_back(group, s)
            self._snapshots = (snaps + self._snapshots)[:MAX_PENDING]
            self._schedule()

    def _merge_back(self, group: str, s: _Sum) -> None:
        got = self._sums.get(group)
        if got is None:
            self._sums[group] = s
            return
        got.count += s.count
        got.first, got.last = min(got.first, s.first), max(got.last, s.last)


def _html_of(text: str) -> tuple[bytes, bool]:
    raw = text.encode("utf-8", "replace")
    if len(raw) <= HTML_CAP:
        return raw, False
    return raw[:HTML_CAP].decode("utf-8", "ignore").encode("utf-8"), True


def response_html(response: Any) -> str | None:
    """The text of a response whose body was read (None: not read, or not text)."""
    try:
        content = response.content
    except Exception:  # httpx.ResponseNotRead, a closed stream: nothing to keep
        return None
    kind = str(response.headers.get("content-type", "")).lower()
    if kind and not any(t in kind for t in ("html", "xml", "text", "json")):
        return None
    try:
        return str(response.text) if content is not None else None
    except Exception:  # an encoding that does not decode
        return None


def _new_id() -> str:
    return secrets.token_hex(8)


class Recorder:
    """What a slot's running task has in hand to snapshot: the last response of its
    ``ctx.http()`` clients and the browser page it holds (``ctx``'s, one per slot).

    Args:
        book: The type's error book.
    """

    __slots__ = ("book", "page", "pending", "response", "task_id")

    def __init__(self, book: ErrorBook) -> None:
        self.book = book
        self.response: Any = None
        self.page: Any = None
        self.task_id = ""
        #: A snapshot taken by a page at a failure: (the exception's id, group, it).
        self.pending: tuple[int, str, Snapshot] | None = None

    def reset(self, task_id: str | None) -> None:
        """A new attempt (or none): forget the last one's response, page and snapshot."""
        self.response = None
        self.page = None
        self.pending = None
        self.task_id = task_id or ""

    def domains(self) -> list[str]:
        out: list[str] = []
        for url in (self._page_url(), self._response_url()):
            d = domain_of(url)
            if d and d not in out:
                out.append(d)
        return out

    def _response_url(self) -> str | None:
        r = self.response
        if r is None:
            return None
        try:
            return str(r.request.url)
        except Exception:  # no request bound: nothing to say
            return None

    def _page_url(self) -> str | None:
        p = self.page
        if p is None:
            return None
        try:
            return str(p.url)
        except Exception:  # a closed page
            return None

    async def take_page(self, page: Any, label: str = "") -> Snapshot | None:
        """The page's HTML and a PNG of its viewport (None if neither could be read)."""
        html: str | None = None
        png: bytes | None = None
        with contextlib.suppress(Exception):
            html = await asyncio.wait_for(page.content(), SNAPSHOT_TIMEOUT)
        with contextlib.suppress(Exception):
            png = await asyncio.wait_for(page.screenshot(type="png"), SNAPSHOT_TIMEOUT)
        if html is None and png is None:
            return None
        if png is not None and len(png) > PNG_CAP:
            png = None
        url = ""
        with contextlib.suppress(Exception):
            url = str(page.url)
        return self._snapshot(html, png, url, label)

    def take_response(self, label: str = "") -> Snapshot | None:
        """The last response's HTML (None: no response, or its body was not read)."""
        if self.response is None:
            return None
        html = response_html(self.response)
        if html is None:
            return None
        return self._snapshot(html, None, self._response_url() or "", label)

    def _snapshot(self, html: str | None, png: bytes | None, url: str, label: str) -> Snapshot:
        body, truncated = (None, False) if html is None else _html_of(html)
        meta = SnapshotMeta(
            _new_id(),
            time.time(),
            label=label,
            task_id=self.task_id,
            url=mask_credentials(url),
            html_bytes=len(body or b""),
            truncated=truncated,
            png_bytes=len(png or b""),
        )
        return Snapshot(meta, body, png)

    async def page_failed(self, page: Any, exc: BaseException) -> None:
        """A page is about to close under ``exc``: snapshot it if its group wants one
        (``BrowserPool.acquire`` calls this before closing the page's context). Never
        raises: the task's own exception is what goes on."""
        if not isinstance(exc, Exception):
            return  # a cancel or an exit, not a failure
        try:
            await self._page_failed(page, exc)
        except Exception:
            log.exception("%s: no snapshot of the page", self.book.automation_type)

    async def _page_failed(self, page: Any, exc: Exception) -> None:
        key = self.book.key(exc)
        if not self.book.wants(key.id):
            return
        snap = await self.take_page(page)
        if snap is not None:
            self.book._took(key.id)  # held until the attempt's failure lands
            self.pending = (id(exc), key.id, snap)

    def failed(self, exc: BaseException, traceback: str) -> str | None:
        """The attempt failed with ``exc``: count it in its group, with a snapshot of
        the page (taken at its close) or of the last response if the group wants one;
        the group's id. Never raises (None: it could not be counted, logged)."""
        try:
            return self._failed(exc, traceback)
        except Exception:
            log.exception("%s: a failure not counted in its group", self.book.automation_type)
            return None

    def timed_out(self, error: str, stack: str) -> str | None:
        """The attempt was stopped past its ``timeout_seconds`` (no exception reached
        the worker): counted under ``TaskTimeout``, its message and where the run was
        when the limit struck (``stack``), with the last response's HTML if the group
        wants one. Never raises."""
        try:
            message = error.partition(": ")[2] or error
            key = GroupKey(
                self.book.automation_type,
                class_name(TaskTimeout(message)),
                normalise(message),
                location_in(stack),
            )
            return self._count(key, error, stack)
        except Exception:
            log.exception("%s: a timeout not counted in its group", self.book.automation_type)
            return None

    def _failed(self, exc: BaseException, traceback: str) -> str:
        return self._count(self.book.key(exc), f"{type(exc).__name__}: {exc}", traceback, exc)

    def _count(
        self, key: GroupKey, message: str, traceback: str, exc: BaseException | None = None
    ) -> str:
        book = self.book
        group = book.failed(
            key,
            task_id=self.task_id,
            message=message,
            traceback=traceback,
            domains=self.domains(),
        )
        pending, self.pending = self.pending, None
        if pending is not None and pending[1] == group and exc is not None:
            book._taken[group] -= 1  # counted again by snapshot()
            book.snapshot(group, pending[2])
        elif book.wants(group):
            snap = self.take_response()
            if snap is not None:
                book.snapshot(group, snap)
        return group


#: The recorder of the slot whose task runs in this asyncio task (set by ``ctx``).
CURRENT: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "fleet_recorder", default=None
)


def note_response(response: Any) -> None:
    """A client of a task got ``response``: the recorder keeps it as the last one (one
    context-variable read and one attribute write per request)."""
    rec = CURRENT.get()
    if rec is not None:
        rec.response = response


def current() -> Recorder | None:
    """The running task's recorder (None outside a task)."""
    return CURRENT.get()


__all__ = ["CURRENT", "ErrorBook", "Recorder", "current", "note_response"]
