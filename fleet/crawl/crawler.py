"""``Crawler``: a batch automation whose tasks are the pages of a crawl.

The plugin writes ``parse``; each task runs the same steps (:meth:`Crawler.run_one`):

1. robots.txt: the host's rules (fetched once for the fleet, :mod:`fleet.crawl.robots`);
   a disallowed page is not fetched (``robots_skipped``); a host's first fetch of its
   rules applies its ``Crawl-delay`` to the host's group before any page is asked.
2. the crawl's page cap (``max_pages``, counted fleet-wide per run);
3. the fetch, through ``ctx.http()`` (identity, proxy tier, block verdicts, meters) or
   a browser page (``render = True``), conditional on what a recrawl kept (a 304 is
   ``not_modified``: not parsed, its kept links followed);
4. ``parse``: items are emitted, links are canonicalised, put through the scope and
   submitted into the run in one batch, each in its host's group, its canonical URL
   its ``unique_key`` (a page the run has seen is a ``duplicate``, not queued).

What a crawl counts beside the run's own counters is metered into the run
(``pages``, ``items``, ``robots_skipped``, ``not_modified``, ``http_errors``,
``too_large``): ``fleet runs watch``, ``GET /runs/{id}`` and the dashboard show them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar, Generic, TypeVar
from urllib.parse import urljoin

import httpx
from pydantic import BaseModel, Field

from fleet.core.access.transport import MAX_BYTES_EXTENSION, TRUNCATED_EXTENSION
from fleet.core.automation import BatchAutomation
from fleet.core.context import Context
from fleet.core.errors import ContractValueError, FleetError, Throttled
from fleet.core.flow import GroupSettings
from fleet.core.records import PushRequest, new_token
from fleet.core.submission import make_push_request
from fleet.core.tasks import Task
from fleet.crawl.config import CrawlConfig
from fleet.crawl.page import Link, Page
from fleet.crawl.recrawl import NAMESPACE as PAGES_NAMESPACE
from fleet.crawl.recrawl import Recrawl
from fleet.crawl.robots import MAX_BYTES as ROBOTS_MAX_BYTES
from fleet.crawl.robots import NAMESPACE as ROBOTS_NAMESPACE
from fleet.crawl.robots import Robots, RobotsBook, RobotsUnavailable
from fleet.crawl.scope import Scope, check_patterns
from fleet.crawl.sitemaps import read as read_sitemap
from fleet.crawl.urls import canonical, canonical_or_none, host_of, origin_of

log = logging.getLogger("fleet.crawl")

CrawlConfigT = TypeVar("CrawlConfigT", bound=CrawlConfig)


#: Seconds added to a ``Crawl-delay`` so that jitter never brings two requests closer.
SPACING_MARGIN = 0.1


class CrawlTask(BaseModel):
    """One page (or sitemap) of a crawl: a crawler's ``TaskPayload``.

    ``fleet crawl start`` submits the seeds; the crawl submits the rest.
    """

    url: str = Field(max_length=2048)
    #: Links from a seed (a seed is 0; a page a sitemap names is 1).
    depth: int = Field(default=0, ge=0, le=10_000)
    #: A sitemap to read rather than a page to parse.
    sitemap: bool = False
    #: The crawl's hosts (``host:port``): links to them are followed ([]: the linking
    #: page's own host).
    hosts: list[str] = Field(default_factory=list, max_length=1000)
    #: The crawl's page cap (wins over the crawler's ``max_pages``).
    max_pages: int | None = Field(default=None, ge=1)
    #: The crawl's depth cap (wins over the crawler's ``max_depth``).
    max_depth: int | None = Field(default=None, ge=0)

    def child(self, url: str, depth: int, *, sitemap: bool = False) -> CrawlTask:
        """A task of the same crawl (its hosts and caps) for ``url``."""
        return CrawlTask(
            url=url,
            depth=depth,
            sitemap=sitemap,
            hosts=self.hosts,
            max_pages=self.max_pages,
            max_depth=self.max_depth,
        )


class CrawlError(FleetError):
    """A page could not be fetched now (a 5xx, a refused connection): retried."""


def seed_task(
    url: str, *, hosts: Sequence[str] = (), **caps: int | None
) -> tuple[str, str, CrawlTask]:
    """A seed's canonical URL, group and task.

    Raises:
        ContractValueError: naming ``url`` for what is not an absolute http(s) URL.
    """
    c = canonical(url)
    return c, host_of(c), CrawlTask(url=c, hosts=list(hosts), **caps)


async def read_capped(r: httpx.Response, limit: int, *, cut: bool = False) -> bytes | None:
    """The body, decoded of its transfer encodings, if at most ``limit`` bytes (else
    None, or with ``cut`` its first ``limit`` bytes), read no further than that."""
    if r.extensions.get(TRUNCATED_EXTENSION):
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in r.aiter_bytes():
        size += len(chunk)
        if size > limit:
            if not cut:
                return None
            chunks.append(chunk[: len(chunk) - (size - limit)])
            break
        chunks.append(chunk)
    return b"".join(chunks)


def delay_rate(seconds: float) -> str:
    """A group rate that starts at most one request every ``seconds``."""
    if seconds == int(seconds):
        return f"1/{int(seconds)}s"
    return f"10/{math.ceil(seconds * 10)}s"


class Crawler(BatchAutomation[CrawlConfigT], Generic[CrawlConfigT]):
    """A crawl's page task. Subclass it, set ``Output`` and write :meth:`parse`::

        @register("books")
        class Books(Crawler):
            Output = Book

            async def parse(self, page, ctx):
                for title in TITLE.findall(page.text):
                    yield Book(url=page.url, title=title)
                for url in page.links():
                    yield Link(url)

    Class attributes shape the crawl (a ``fleet crawl start`` option wins where one
    exists): ``include`` / ``exclude`` (RE2 patterns a followed URL must / must not
    match), ``max_depth``, ``max_pages``, ``obey_robots`` (False: robots.txt is not read;
    logged once per worker), ``seed_from_sitemaps``, ``recrawl`` (conditional requests
    from what the last crawl kept), ``render`` (each page in a browser of the type's
    ``Browser`` pool), ``user_agent`` (sent and matched in robots.txt when the task
    has no identity; an identity's own user agent wins).
    """

    Config: type[CrawlConfigT] = CrawlConfig  # type: ignore[assignment]
    TaskPayload: ClassVar[type[BaseModel]] = CrawlTask

    include: ClassVar[Sequence[str]] = ()
    exclude: ClassVar[Sequence[str]] = ()
    max_depth: ClassVar[int | None] = None
    max_pages: ClassVar[int | None] = None
    obey_robots: ClassVar[bool] = True
    seed_from_sitemaps: ClassVar[bool] = False
    recrawl: ClassVar[bool] = False
    render: ClassVar[bool] = False
    user_agent: ClassVar[str] = "FleetCrawler/1.0"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_patterns(cls.include, field="include")
        check_patterns(cls.exclude, field="exclude")
        for name in ("max_depth", "max_pages"):
            value = getattr(cls, name)
            if value is not None and (not isinstance(value, int) or value < (name == "max_pages")):
                raise ContractValueError(
                    f"{cls.__qualname__}.{name} must be a whole number", field=name
                )
        if cls.render and cls.Browser is None:
            raise ContractValueError(
                f"{cls.__qualname__}.render needs a browser pool: "
                "declare Browser = BrowserNeeds(...)",
                field="render",
            )

    async def parse(
        self, page: Page, ctx: Context[CrawlConfigT]
    ) -> AsyncIterator[BaseModel | Link]:
        """Yield the page's items (instances of ``Output``: emitted) and the
        :class:`Link`s to follow."""
        raise NotImplementedError(f"{type(self).__name__} must implement parse")
        yield  # pragma: no cover  (makes this an async generator)

    # -- the task ------------------------------------------------------------------

    async def run_one(self, task: Task[Any], ctx: Context[CrawlConfigT]) -> None:
        job: CrawlTask = task.payload
        run_id = ctx.run_id
        if run_id is None:
            raise ContractValueError(
                "a crawl's page runs in a run (its unique keys keep each page to one "
                "fetch): start the crawl with `fleet crawl start` or submit into a run",
                field="run",
            )
        url = canonical(job.url)
        host = host_of(url)
        user_agent = self._user_agent(ctx)
        robots = await self._robots(ctx, url, host, user_agent)
        if robots is not None and not robots.allows(url, user_agent):
            await ctx.meter("robots_skipped")
            return
        delay = robots.crawl_delay(user_agent) if robots is not None else None
        if job.sitemap:
            await self._read_sitemap(ctx, job, url, host, delay)
            return
        if job.depth == 0 and self.seed_from_sitemaps:
            await self._seed_sitemaps(ctx, job, url, robots)
        cap = job.max_pages or self.max_pages
        room = True
        pages = ctx.counter(f"fleet-crawl:{run_id}:pages")
        if cap is not None:
            taken = await pages.incr()
            if taken > cap:
                return  # the crawl has its pages: this one is not fetched
            room = taken < cap
        try:
            if self.render:
                await self._rendered(ctx, job, url, host, room, delay)
            else:
                await self._fetched(ctx, job, url, host, user_agent, room, delay)
        except Exception:
            if cap is not None:
                await pages.decr()  # a failed attempt, retried or not, took no page
            raise

    def _user_agent(self, ctx: Context[CrawlConfigT]) -> str:
        identity = ctx.identity
        fp = identity.fingerprint if identity is not None else None
        return fp.user_agent if fp is not None and fp.user_agent else self.user_agent

    def _state(self, ctx: Context[CrawlConfigT]) -> RobotsBook:
        # One book per worker's instance: its slots share the parsed rules.
        book: RobotsBook | None = self.__dict__.get("_robots_book")
        if book is None or book.ttl_seconds != ctx.config.robots_ttl_seconds:
            book = RobotsBook(ctx.config.robots_ttl_seconds)
            self.__dict__["_robots_book"] = book
            if not self.obey_robots:
                log.warning("%s: obey_robots is off: robots.txt is not read", ctx.automation_type)
        return book

    async def _robots(
        self, ctx: Context[CrawlConfigT], url: str, host: str, user_agent: str
    ) -> Robots | None:
        book = self._state(ctx)
        if not self.obey_robots:
            return None

        # A copy that expired: its Crawl-delay spaces the request that fetches the next.
        stale = book.peek(host)
        last_delay = stale.crawl_delay(user_agent) if stale is not None else None

        async def fetch() -> tuple[int, str]:
            try:
                async with ctx.http(
                    classify=False,
                    timeout=ctx.config.request_timeout_seconds,
                    follow_redirects=True,
                    headers={"user-agent": user_agent},
                ) as http:
                    token = None
                    if last_delay is not None:
                        token = await self._space(ctx, host, last_delay)
                    async with http.stream("GET", origin_of(url) + "/robots.txt") as r:
                        if token is not None and last_delay is not None:
                            await self._sent(ctx, host, token, last_delay)
                        # The first 500 KiB, as Google reads it; a longer one is cut.
                        body = await read_capped(r, ROBOTS_MAX_BYTES, cut=True) or b""
                        return r.status_code, body.decode(r.encoding or "utf-8", "replace")
            except httpx.HTTPError as e:
                log.info("%s: robots.txt of %s: %s", ctx.automation_type, host, e)
                return 599, ""

        robots, fetched = await book.get(
            host,
            ctx.kv(ROBOTS_NAMESPACE),
            ctx.lock(f"fleet-crawl-robots:{host}", hold_seconds=60, wait_seconds=60),
            fetch,
        )
        if not robots.reachable:
            raise RobotsUnavailable(f"robots.txt of {host} answered {robots.status}: retried")
        if fetched:
            delay = robots.crawl_delay(user_agent)
            if delay is not None:
                await self._tighten(ctx, host, delay)
                # The robots.txt request, answered just now, is the host's last request.
                await self._space(ctx, host, delay)
        return robots

    async def _space(self, ctx: Context[CrawlConfigT], host: str, delay: float) -> str:
        """Wait until ``delay`` seconds have passed since the fleet's last request to
        ``host``, and mark this one: a fleet-wide lock taken for ``delay`` and left
        to expire, so two requests to the host never start closer than that (the
        host's group rate keeps tasks from waiting here long; this makes the spacing
        exact where a rate lets a late start be followed by an early one). Its token:
        :meth:`_sent` marks the request again once the host answered."""
        locks = ctx.capabilities.locks
        name = f"fleet-crawl-delay:{host}"
        token = new_token()
        deadline = time.monotonic() + max(60.0, 4 * delay)
        # Held a little longer than asked: what passes between the lock and the
        # request reaching the host varies by a few milliseconds.
        while not await locks.acquire(name, token, delay + SPACING_MARGIN):
            if time.monotonic() > deadline:
                raise Throttled(retry_after=delay, message=f"{host}: waited too long for its turn")
            await asyncio.sleep(min(0.02, delay / 4))
        return token

    async def _sent(self, ctx: Context[CrawlConfigT], host: str, token: str, delay: float) -> None:
        """The host answered the request :meth:`_space` let go: the next one waits the
        delay from now, a moment after this one reached the host, however long it
        took to leave (a stalled process, a proxy tier's lookup)."""
        await ctx.capabilities.locks.renew(
            f"fleet-crawl-delay:{host}", token, delay + SPACING_MARGIN
        )

    async def _tighten(self, ctx: Context[CrawlConfigT], host: str, delay: float) -> bool:
        """Slow the host's group to one request per ``delay``; True if that is slower
        than it was (an operator's slower setting stays)."""
        groups = ctx.capabilities.groups
        info = await groups.info(ctx.automation_type, host)
        settings = info.settings or GroupSettings()
        # The type's per-host rate as every reserve reads it (the backend's copy, not
        # this worker's: an operator's PATCH may not have reached it yet).
        defaults, _ = await groups.defaults(ctx.automation_type)
        current = settings.interval if settings.rate is not None else defaults.interval
        if current is not None and current >= delay:
            return False
        await groups.set(
            ctx.automation_type,
            host,
            GroupSettings(settings.concurrency, delay_rate(min(delay, 86400.0)), settings.paused),
        )
        log.info(
            "%s: %s asks a Crawl-delay of %gs: its rate is now %s",
            ctx.automation_type,
            host,
            delay,
            delay_rate(delay),
        )
        return True

    async def _get(
        self,
        ctx: Context[CrawlConfigT],
        url: str,
        user_agent: str,
        headers: dict[str, str],
        delay: float | None,
    ) -> tuple[httpx.Response, bytes | None]:
        """The response and its body (None when it is over ``max_page_bytes``), asked
        ``delay`` seconds at least after the fleet's last request to the host."""
        limit = ctx.config.max_page_bytes
        async with ctx.http(
            timeout=ctx.config.request_timeout_seconds,
            follow_redirects=True,
            headers={"user-agent": user_agent},
        ) as http:
            host = host_of(url)
            # As late as can be: the spacing is between requests, not tasks.
            token = None if delay is None else await self._space(ctx, host, delay)
            try:
                # Capped where the body is read: by the block classifier if it reads
                # it first, else here.
                capped = {MAX_BYTES_EXTENSION: limit}
                async with http.stream("GET", url, headers=headers, extensions=capped) as r:
                    if token is not None and delay is not None:
                        await self._sent(ctx, host, token, delay)
                    return r, await read_capped(r, limit)
            except httpx.TransportError as e:
                raise CrawlError(f"{url}: {type(e).__name__}: {e}") from None

    async def _fetched(
        self,
        ctx: Context[CrawlConfigT],
        job: CrawlTask,
        url: str,
        host: str,
        user_agent: str,
        room: bool,
        delay: float | None,
    ) -> None:
        kept_store = (
            Recrawl(
                ctx.kv(f"{PAGES_NAMESPACE}:{ctx.automation_type}"), ctx.config.recrawl_ttl_seconds
            )
            if self.recrawl
            else None
        )
        kept = await kept_store.get(url) if kept_store is not None else None
        conditional = kept.headers() if kept is not None else {}
        r, body = await self._get(ctx, url, user_agent, conditional, delay)
        if r.status_code == 304 and kept is not None:
            await ctx.meter("not_modified")
            if room:
                await self._follow(ctx, job, url, host, [Link(u) for u in kept.links])
            return
        if not self._answered(r.status_code, url, r.headers.get("retry-after")):
            await ctx.meter("http_errors")
            return
        if body is None:
            await ctx.meter("too_large")
            return
        final = canonical_or_none(str(r.url)) or url
        page = Page(
            url=final,
            status=r.status_code,
            headers={k.lower(): v for k, v in r.headers.items()},
            text=body.decode(r.encoding or "utf-8", errors="replace"),
            depth=job.depth,
        )
        links = await self._parse(ctx, job, page, host, room)
        if kept_store is not None:
            await kept_store.keep(url, r.headers.get("etag"), r.headers.get("last-modified"), links)

    def _answered(self, status: int, url: str, retry_after: str | None = None) -> bool:
        """True for a page to parse; raises for one to ask again later (a 429 holds
        the host's group for its ``Retry-After`` seconds, a minute without one)."""
        if status == 429:
            try:
                wait = min(max(float(retry_after or 60.0), 1.0), 86400.0)
            except ValueError:
                wait = 60.0
            raise Throttled(retry_after=wait, message=f"{url} answered 429")
        if status >= 500:
            raise CrawlError(f"{url} answered {status}: retried")
        return status < 400

    async def _rendered(
        self,
        ctx: Context[CrawlConfigT],
        job: CrawlTask,
        url: str,
        host: str,
        room: bool,
        delay: float | None,
    ) -> None:
        async with ctx.browser.acquire(proxy=ctx.proxy_url) as tab:
            token = None if delay is None else await self._space(ctx, host, delay)
            response = await tab.goto(url, timeout=ctx.config.request_timeout_seconds * 1000)
            if token is not None and delay is not None:
                await self._sent(ctx, host, token, delay)
            status = response.status if response is not None else 200
            if not self._answered(status, url):
                await ctx.meter("http_errors")
                return
            headers = await response.all_headers() if response is not None else {}
            page = Page(
                url=canonical_or_none(tab.url) or url,
                status=status,
                headers=dict(headers),
                text=await tab.content(),
                depth=job.depth,
                browser=tab,
            )
            await self._parse(ctx, job, page, host, room)

    async def _parse(
        self, ctx: Context[CrawlConfigT], job: CrawlTask, page: Page, host: str, room: bool
    ) -> list[str]:
        """Run ``parse``: emit its items, follow its links; the links it yielded."""
        await ctx.meter("pages")
        links: list[Link] = []
        items = 0
        async for out in self.parse(page, ctx):
            if isinstance(out, Link):
                links.append(out)
            else:
                await ctx.emit(out)
                items += 1
        if items:
            await ctx.meter("items", items)
        if room:
            return await self._follow(ctx, job, page.url, host, links)
        return [u for u in (canonical_or_none(urljoin(page.url, link.url)) for link in links) if u]

    async def _follow(
        self,
        ctx: Context[CrawlConfigT],
        job: CrawlTask,
        base: str,
        host: str,
        links: Sequence[Link],
    ) -> list[str]:
        """Submit the links in scope into the run, one batch; the canonical links."""
        scope = Scope(
            frozenset(job.hosts),
            tuple(self.include),
            tuple(self.exclude),
            job.max_depth if job.max_depth is not None else self.max_depth,
        )
        depth = job.depth + 1
        found: dict[str, None] = {}
        for link in links:
            url = canonical_or_none(urljoin(base, link.url))
            if url is not None:
                found.setdefault(url, None)
        requests: list[PushRequest] = []
        own = {base, job.url}
        for url in found:
            # A link to the page itself (an anchor, a menu) is seen: not even a push.
            if url in own or scope.verdict(url, depth, page_host=host) != "follow":
                continue
            requests.append(self._request(ctx, job.child(url, depth), url))
        if requests:
            await ctx.capabilities.queues.push(ctx.automation_type, requests)
        return list(found)

    def _request(self, ctx: Context[CrawlConfigT], child: CrawlTask, key: str) -> PushRequest:
        return make_push_request(
            child.model_dump(mode="json"),
            group=host_of(child.url),
            run=ctx.run_id,
            unique_key=key,
        )

    # -- sitemaps ----------------------------------------------------------------

    async def _seed_sitemaps(
        self, ctx: Context[CrawlConfigT], job: CrawlTask, url: str, robots: Robots | None
    ) -> None:
        named = robots.sitemaps() if robots is not None else []
        found = [canonical_or_none(u) for u in [*named, origin_of(url) + "/sitemap.xml"]]
        requests = []
        for sitemap in dict.fromkeys(u for u in found if u is not None):
            child = job.child(sitemap, job.depth, sitemap=True)
            requests.append(self._request(ctx, child, "sitemap " + sitemap))
        await ctx.capabilities.queues.push(ctx.automation_type, requests)

    async def _read_sitemap(
        self, ctx: Context[CrawlConfigT], job: CrawlTask, url: str, host: str, delay: float | None
    ) -> None:
        r, body = await self._get(ctx, url, self._user_agent(ctx), {}, delay)
        if r.status_code >= 400 or body is None:
            if r.status_code >= 500:
                raise CrawlError(f"sitemap {url} answered {r.status_code}: retried")
            return  # no sitemap there: nothing to read
        sitemap = read_sitemap(body)
        await ctx.meter("sitemaps")
        requests = [
            self._request(
                ctx,
                job.child(s, job.depth, sitemap=True),
                "sitemap " + s,
            )
            for s in sitemap.sitemaps
        ]
        hosts = frozenset(job.hosts) or frozenset({host_of(url)})
        for page in sitemap.pages:
            # A sitemap's page is one link from the seed, when it is on the crawl's hosts.
            if host_of(page) in hosts:
                child = job.child(page, job.depth + 1)
                requests.append(self._request(ctx, child, page))
        for start in range(0, len(requests), 500):
            await ctx.capabilities.queues.push(ctx.automation_type, requests[start : start + 500])
