"""``ctx.identity``: the identity a task holds, and what it does with it
(docs/identities.md).

The worker leases an identity of the type's ``identity_pool`` before ``run_one`` and
hands the slot an :class:`IdentityHandle`; when the task ends the handle's lease is
released with what the task learned: the cookies its HTTP clients received, an account
it stored, and whether the identity worked (``ok``), was blocked (``blocked``: cooled
down fleet-wide, the task sent back without an attempt charged) or is done for
(``retire``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fleet.core.errors import BrowserUnavailable, FleetError
from fleet.core.identities import (
    DEFAULT_COOLDOWN_SECONDS,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RETIRE_AFTER,
    Fingerprint,
    Identity,
    IdentityLease,
    LeaseOutcome,
    check_identity_id,
)

if TYPE_CHECKING:
    import httpx

    from fleet.core.access.router import Access
    from fleet.core.capabilities import TaskCapabilities
    from fleet.core.capabilities.identities import Identities
    from fleet.core.metering import TaskMeter
    from fleet.core.proxy import ProxyHandle

log = logging.getLogger(__name__)

#: The backend topic of identity events, for every pool; the master's event stream
#: (``GET /api/v1/events``) relays each as the event ``identity``.
IDENTITIES_TOPIC = "identities"
#: What happened to an identity: a release cooled it down (``blocked``), retired it
#: (blocks in a row, ``ctx.identity.retire()`` or the REST API), or the REST API
#: brought it back (``revived``).
IdentityEventName = Literal["blocked", "retired", "revived"]


def identity_event(
    pool: str,
    identity_id: str,
    event: IdentityEventName,
    reason: str | None = None,
    cooling_until: float | None = None,
) -> dict[str, Any]:
    """The message of an identity event: ``{pool, id, event, reason, cooling_until}``."""
    return {
        "pool": pool,
        "id": identity_id,
        "event": event,
        "reason": reason,
        "cooling_until": cooling_until,
    }


class IdentityBlocked(FleetError):
    """Raised by ``ctx.identity.blocked()``: the site refused the identity. The worker
    cools it down fleet-wide and gives the task back with its attempt refunded: the
    next try takes another identity."""


class NoIdentity(FleetError):
    """No identity of the pool became usable within ``identity_wait_seconds`` (the
    worker turns it into ``Throttled``: the task goes back uncharged)."""


@dataclass(frozen=True, slots=True)
class IdentityPolicy:
    """A type's identity settings (its ``identity_*`` config fields)."""

    pool: str
    max_concurrency: int = 1
    cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS
    retire_after: int = DEFAULT_RETIRE_AFTER
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    wait_seconds: float = 10.0


def policy_of(config: Any) -> IdentityPolicy | None:
    """A type's identity settings from its config (None: it names no ``identity_pool``)."""
    pool = getattr(config, "identity_pool", None)
    if pool is None:
        return None
    return IdentityPolicy(
        pool=pool,
        max_concurrency=config.identity_max_concurrency,
        cooldown_seconds=config.identity_cooldown_seconds,
        retire_after=config.identity_retire_after,
        lease_seconds=config.identity_lease_seconds,
        wait_seconds=config.identity_wait_seconds,
    )


async def lease_waiting(
    identities: Identities, policy: IdentityPolicy, key: str | None = None
) -> IdentityLease:
    """A lease of the pool, asked again (0.05 s doubling to 1 s) while none is usable,
    for at most ``policy.wait_seconds``.

    Raises:
        NoIdentity: none became usable in time.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + policy.wait_seconds
    pause = 0.05
    while True:
        got = await identities.lease(
            policy.pool,
            lease_seconds=policy.lease_seconds,
            max_concurrency=policy.max_concurrency,
            key=key,
        )
        if got is not None:
            return got
        left = deadline - loop.time()
        if left <= 0:
            what = f"the identity kept for {key!r}" if key else "an identity"
            raise NoIdentity(
                f"{what} of pool {policy.pool!r} was not usable within "
                f"{policy.wait_seconds:g} s (all leased, cooling or retired)"
            )
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, 1.0)


def jar_of(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    """The cookies an httpx client holds, as ``storage_state`` cookies."""
    return cookies_of(client.cookies)


def cookies_of(jar: httpx.Cookies) -> list[dict[str, Any]]:
    """The cookies of an httpx jar, as ``storage_state`` cookies."""
    out = []
    for c in jar.jar:
        out.append(
            {
                "name": c.name,
                "value": c.value or "",
                "domain": c.domain,
                "path": c.path or "/",
                "expires": float(c.expires) if c.expires is not None else -1.0,
                "httpOnly": bool(c.has_nonstandard_attr("HttpOnly")),
                "secure": bool(c.secure),
                "sameSite": "Lax",
            }
        )
    return out


def _stored_cookie(c: dict[str, Any]) -> dict[str, Any]:
    """A Playwright cookie as an identity keeps it (the same ``storage_state`` keys)."""
    return {
        "name": c.get("name", ""),
        "value": c.get("value", ""),
        "domain": c.get("domain", ""),
        "path": c.get("path") or "/",
        "expires": float(c.get("expires", -1)),
        "httpOnly": bool(c.get("httpOnly", False)),
        "secure": bool(c.get("secure", False)),
        "sameSite": c.get("sameSite") if c.get("sameSite") in ("Strict", "Lax", "None") else "Lax",
    }


async def leased_handle(
    capabilities: TaskCapabilities,
    policy: IdentityPolicy,
    *,
    proxy: ProxyHandle | None = None,
    browser: Any = None,
    key: str | None = None,
    access: Access | None = None,
) -> IdentityHandle:
    """Lease an identity (waiting, :func:`lease_waiting`) and hand it out as a handle
    that reports a blocked identity's proxy through ``proxy``, tells the fleet of blocks
    and retirements on :data:`IDENTITIES_TOPIC`, and renews its lease while held: what a
    batch task gets before ``run_one`` and ``ctx.use_identity`` for a block."""
    lease = await lease_waiting(capabilities.identities, policy, key)

    async def report(url: str, reason: str) -> None:
        if proxy is not None:
            await proxy.report_url(url, ok=False, reason=reason)

    async def tell(event: dict[str, Any]) -> None:
        await capabilities.events.publish(IDENTITIES_TOPIC, event)

    handle = IdentityHandle(
        capabilities.identities, policy, lease, on_blocked=report, on_event=tell
    )
    handle.browser = browser
    handle.access = access
    handle.start_renewing()
    return handle


def _meter_requests(page: Any, metering: TaskMeter) -> set[asyncio.Task[None]]:
    """Meter every request the page's browser finishes (its sizes, as Playwright
    reports them) as traffic of the tier ``browser``; the set of the reads still going."""
    from urllib.parse import urlsplit

    pending: set[asyncio.Task[None]] = set()

    async def meter(request: Any) -> None:
        try:
            sizes = await request.sizes()
        except Exception:  # the page went away before its sizes were read
            return
        metering.traffic(
            urlsplit(request.url).hostname or "",
            "browser",
            requests=1,
            sent=int(sizes.get("requestHeadersSize", 0)) + int(sizes.get("requestBodySize", 0)),
            received=int(sizes.get("responseHeadersSize", 0))
            + int(sizes.get("responseBodySize", 0)),
        )

    def finished(request: Any) -> None:
        task = asyncio.ensure_future(meter(request))
        pending.add(task)
        task.add_done_callback(pending.discard)

    page.on("requestfinished", finished)
    return pending


def _classify_navigations(page: Any, access: Access) -> None:
    """Make ``page.goto`` classify the document it lands on (``ctx.check``)."""
    from fleet.core.access.solving import check

    navigate = page.goto

    async def goto(url: str, *args: Any, fleet_classify: bool = True, **kwargs: Any) -> Any:
        response = await navigate(url, *args, **kwargs)
        await check(access, response, page=page, classify=fleet_classify)
        return response

    page.goto = goto


class IdentityHandle:
    """The identity of the running task (``ctx.identity``).

    Attributes:
        pool: Its pool.
    """

    def __init__(
        self,
        identities: Identities,
        policy: IdentityPolicy,
        lease: IdentityLease,
        on_blocked: Callable[[str, str], Awaitable[None]] | None = None,
        on_event: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> None:
        self._identities = identities
        self._policy = policy
        self._lease = lease
        self._clients: list[httpx.AsyncClient] = []
        self._account: dict[str, Any] | None = None
        self._outcome: LeaseOutcome | None = None
        self._reason: str | None = None
        self._on_blocked = on_blocked
        self._on_event = on_event
        self._renewer: asyncio.Task[None] | None = None
        self._browser_cookies: list[dict[str, Any]] = []
        self._solved_cookies: list[dict[str, Any]] = []
        self._jar: httpx.Cookies | None = None
        self.pool = policy.pool
        #: The type's tier routing and classifier (``ctx.access``), for :meth:`http`.
        self.access: Access | None = None
        #: Where its clients' traffic and its browser's seconds are metered (``ctx``'s).
        self.metering: TaskMeter | None = None
        #: The slot's browser pool (``ctx.browser``), for :meth:`browser_context`.
        self.browser: Any = None

    # -------------------------------------------------------------- what it is
    @property
    def identity(self) -> Identity:
        """The identity as it was leased (its cookies as of the lease)."""
        return self._lease.identity

    @property
    def id(self) -> str:
        return self._lease.identity.id

    @property
    def proxy_url(self) -> str | None:
        """Its exit (None: direct)."""
        return self._lease.identity.proxy

    @property
    def fingerprint(self) -> Fingerprint | None:
        return self._lease.identity.fingerprint

    @property
    def account(self) -> dict[str, Any] | None:
        """The stored account (or the one :meth:`set_account` set in this task)."""
        return self._account if self._account is not None else self._lease.identity.account

    @property
    def cookies(self) -> list[dict[str, Any]]:
        """Its cookies as of the lease (``storage_state`` form)."""
        return list(self._lease.identity.cookies)

    def headers(self) -> list[tuple[str, str]]:
        """The request headers of its fingerprint, in the browser's order (none without one)."""
        return [] if self.fingerprint is None else self.fingerprint.request_headers()

    # -------------------------------------------------------------- using it
    def http(
        self, *, impersonate: str | None = None, classify: bool = True, **options: Any
    ) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` through the identity's proxy (or the domain's proxy
        tier, when the type has ``proxy_tiers``), with its headers and cookies; the
        cookies it receives are saved to the identity when the task ends. Its responses
        are classified (a block raises ``Blocked``; ``classify=False``: not);
        ``impersonate="chrome"`` sends through curl_cffi. ``options`` go to
        ``httpx.AsyncClient`` (``headers`` added after the identity's)."""
        from fleet.core.access.clients import build_client

        client = build_client(
            self.access,
            proxy=self.proxy_url,
            headers=self.headers(),
            impersonate=impersonate,
            classify=classify,
            metering=self.metering,
            options=options,
        )
        for c in (*self._lease.identity.cookies, *self._solved_cookies):
            client.cookies.set(c["name"], c["value"], domain=c["domain"], path=c.get("path", "/"))
        self._clients.append(client)
        return client

    def jar(self) -> httpx.Cookies:
        """The identity's cookies for this task as one jar (what a proxy tier of
        identities sends and keeps; saved to the identity at release)."""
        if self._jar is None:
            import httpx

            self._jar = httpx.Cookies()
            for c in (*self._lease.identity.cookies, *self._solved_cookies):
                self._jar.set(c["name"], c["value"], domain=c["domain"], path=c.get("path", "/"))
        return self._jar

    def add_cookies(self, cookies: list[dict[str, Any]]) -> None:
        """Cookies a solver earned: set in the identity's open clients and saved to it
        when the task ends."""
        for raw in cookies:
            c = _stored_cookie(raw)
            self._solved_cookies.append(c)
            for client in self._clients:
                client.cookies.set(c["name"], c["value"], domain=c["domain"], path=c["path"])
            if self._jar is not None:
                self._jar.set(c["name"], c["value"], domain=c["domain"], path=c["path"])

    @contextlib.asynccontextmanager
    async def browser_context(self, browser: Any = None, **options: Any) -> AsyncIterator[Any]:
        """A page in a fresh browser context dressed as the identity: its proxy, user
        agent, locale, timezone, viewport, headers and cookies (Playwright's
        ``storage_state``); the context's cookies are saved to the identity when the
        task ends. ``browser``: the slot's browser pool (default ``ctx.browser``, which
        the worker sets here); ``options`` go to Playwright's ``new_context``. What
        ``page.goto`` answers is classified: a block raises ``Blocked`` (one navigation
        opts out with ``page.goto(url, fleet_classify=False)``).

        Raises:
            BrowserUnavailable: the type declares no ``Browser``, or none is free.
        """
        pool = browser if browser is not None else self.browser
        if pool is None:
            raise BrowserUnavailable(
                "ctx.identity.browser_context() needs a browser: declare `Browser = "
                "BrowserNeeds(...)` on the automation (pip install 'fleet-automation[browser]')"
            )
        fp = self.fingerprint
        dressed: dict[str, Any] = {
            "storage_state": {"cookies": list(self._lease.identity.cookies), "origins": []}
        }
        if fp is not None:
            dressed["user_agent"] = fp.user_agent
            if fp.locale:
                dressed["locale"] = fp.locale
            if fp.timezone:
                dressed["timezone_id"] = fp.timezone
            if fp.viewport:
                dressed["viewport"] = dict(fp.viewport)
            extra = {k: v for k, v in fp.headers if k.lower() != "user-agent"}
            if extra:
                dressed["extra_http_headers"] = extra
        dressed.update(options)
        async with pool.acquire(self.proxy_url, **dressed) as page:
            if self.access is not None:
                _classify_navigations(page, self.access)
            opened = time.monotonic()
            metered = _meter_requests(page, self.metering) if self.metering else None
            try:
                yield page
            finally:
                if self.metering is not None:
                    self.metering.browser(time.monotonic() - opened)
                if metered:
                    await asyncio.gather(*metered, return_exceptions=True)
                with contextlib.suppress(Exception):  # a closed page keeps what it had
                    self._browser_cookies.extend(await page.context.cookies())

    async def ok(self) -> None:
        """The identity worked (its blocks in a row end at release)."""
        self._outcome = "ok"

    async def blocked(self, reason: str = "blocked") -> None:
        """The site refused the identity: it cools down fleet-wide (``retired`` after
        ``identity_retire_after`` blocks in a row), its proxy is reported bad, and the
        task goes back without an attempt charged.

        Raises:
            IdentityBlocked: always: the task ends here.
        """
        await self.mark_blocked(reason)
        raise IdentityBlocked(f"identity {self.id!r} of pool {self.pool!r} blocked: {reason}")

    async def mark_blocked(self, reason: str = "blocked", proxy: str | None = None) -> None:
        """What :meth:`blocked` does, without ending the task: the identity is released
        as blocked, and ``proxy`` (default: its own) reported bad (the worker's, for an
        uncaught ``Blocked``)."""
        self._outcome = "blocked"
        self._reason = reason
        exit_url = proxy or self.proxy_url
        if self._on_blocked is not None and exit_url:
            await self._on_blocked(exit_url, reason)

    async def retire(self, reason: str = "retired") -> None:
        """Retire the identity fleet-wide now (a banned account): no lease takes it again."""
        if await self._identities.retire(self.pool, self.id, reason):
            await self._tell("retired", reason)

    async def set_account(self, account: dict[str, Any]) -> None:
        """Store an account on the identity (saved when the task ends)."""
        if not isinstance(account, dict):
            raise TypeError("an account is a JSON object (dict)")
        self._account = dict(account)

    async def sticky(self, key: str) -> IdentityHandle:
        """Hold the identity kept for ``key`` (an account, a site) on every worker: the
        current lease is released, the key's identity leased (waiting while it is busy).

        Raises:
            NoIdentity: it did not become usable in time (the task goes back uncharged).
        """
        check_identity_id(key, what="key")
        if self._lease.key == key:
            return self
        await self.finish(None)
        self._lease = await lease_waiting(self._identities, self._policy, key)
        self._clients = []
        self.start_renewing()
        return self

    # -------------------------------------------------------------- the worker's
    def start_renewing(self) -> None:
        """Renew the lease every third of its length while it is held (the worker's)."""
        self._renewer = asyncio.create_task(self._renew(), name=f"identity:{self.pool}:{self.id}")

    async def _renew(self) -> None:
        every = max(self._policy.lease_seconds / 3, 0.05)
        while True:
            await asyncio.sleep(every)
            try:
                held = await self._identities.renew(
                    self.pool, self.id, self._lease.token, self._policy.lease_seconds
                )
            except FleetError as exc:
                log.warning("identity %s of %s: renewal failed: %s", self.id, self.pool, exc)
                continue
            if not held:
                log.warning("identity %s of %s: lease lost", self.id, self.pool)
                return

    async def finish(self, task_ok: bool | None) -> None:
        """Release the lease with what the task learned (the worker's, once per lease):
        the outcome the task set, else ``ok`` if it succeeded; the cookies of its clients
        (closed here); the account it set."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        cookies: list[dict[str, Any]] | None = None
        if self._clients or self._browser_cookies or self._solved_cookies or self._jar:
            cookies = list(self._solved_cookies)
            cookies += [c for client in self._clients for c in jar_of(client)]
            cookies += cookies_of(self._jar) if self._jar is not None else []
            self._jar = None
            cookies += [_stored_cookie(c) for c in self._browser_cookies]
            self._browser_cookies = []
            self._solved_cookies = []
            for client in self._clients:
                with contextlib.suppress(Exception):
                    await client.aclose()
        outcome = self._outcome or ("ok" if task_ok else "none")
        released = False
        try:
            released = await self._identities.release(
                self.pool,
                self.id,
                self._lease.token,
                outcome=outcome,
                reason=self._reason,
                cookies=cookies,
                account=self._account,
                cooldown_seconds=self._policy.cooldown_seconds,
                retire_after=self._policy.retire_after,
            )
        except FleetError as exc:  # the lease runs out on its own: nothing is lost
            log.warning("identity %s of %s: release failed: %s", self.id, self.pool, exc)
        if released and outcome == "blocked":
            await self._tell_block(self._reason)
        self._outcome = None
        self._reason = None

    async def _tell_block(self, reason: str | None) -> None:
        """Tell ``on_event`` what a blocked release did: cooled down, or retired (its
        blocks in a row reached ``retire_after``), as the backend now says."""
        if self._on_event is None:
            return
        try:
            now = await self._identities.get(self.pool, self.id)
        except FleetError as exc:
            log.warning("identity %s of %s: no event: %s", self.id, self.pool, exc)
            return
        if now is None:  # deleted meanwhile
            return
        event: IdentityEventName = "retired" if now.state == "retired" else "blocked"
        await self._tell(event, reason, now.cooling_until)

    async def _tell(
        self, event: IdentityEventName, reason: str | None, cooling_until: float | None = None
    ) -> None:
        """Hand ``on_event`` an identity event; a failure to deliver it is logged only
        (events are fire-and-forget: the backend already holds the state)."""
        if self._on_event is None:
            return
        try:
            await self._on_event(identity_event(self.pool, self.id, event, reason, cooling_until))
        except Exception as exc:
            log.warning("identity %s of %s: event %s not sent: %s", self.id, self.pool, event, exc)
