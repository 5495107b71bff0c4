"""``ctx.proxy``: the slot's proxy URL, how to change it, and its health, shared fleet-wide.

A proxy comes from the automation's config: ``proxy_url`` (one URL, or several
separated by commas/newlines, used round-robin by slot), or ``proxy_provider``
naming an entry point of group ``fleet.proxy_providers`` that builds URLs.

With a backend (every slot of a worker has one), the handle keeps the health of its
proxies in the :class:`~fleet.core.capabilities.ProxyHealth` capability, shared by
every slot of every worker: ``report_bad`` cools a proxy down for everyone, the handle
never moves to a cooling proxy unless all of them cool, it holds a place on the proxy
it uses (``proxy_max_concurrency`` caps them fleet-wide), and ``sticky(key)`` keeps an
account on one proxy. A proxy is named by :func:`proxy_key`, which holds neither a
password nor anything a user name can be guessed from (its digest is keyed with the
backend's secret salt, :func:`proxy_key_salt`); :func:`mask_url` is what logs show of a
URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import SplitResult, unquote, urlsplit

from fleet.core import clock
from fleet.core.capabilities.primitives import KV

# ProxyPolicy is the backend's record of a type's settings; re-exported where the
# handle that takes one always found it.
from fleet.core.capabilities.proxies import ProxyPolicy as ProxyPolicy
from fleet.core.errors import BackendError, ConfigError, Throttled
from fleet.core.flow import check_group
from fleet.core.outage import OutageLog
from fleet.core.records import new_token
from fleet.core.redact import mask_credentials

if TYPE_CHECKING:
    from fleet.core.capabilities.proxies import ProxyHealth

log = logging.getLogger("fleet.proxy")

#: Ports assumed when a proxy URL names none (a key always has one).
DEFAULT_PORTS = {"http": 80, "https": 443, "socks4": 1080, "socks5": 1080, "socks5h": 1080}
#: How long a place on a proxy outlives its slot without a renewal (renewed every third).
PLACE_HOLD_SECONDS = 30.0
#: How long ``ensure``/``rotate``/``sticky`` wait for a place under ``proxy_max_concurrency``
#: before raising :class:`~fleet.core.errors.Throttled`.
PLACE_WAIT_SECONDS = 30.0
#: Default lifetime of a sticky choice after its last use.
STICKY_SECONDS = 3600.0
#: Fresh sessions a provider-backed handle offers besides its current one.
PROVIDER_CANDIDATES = 3
#: Where the backend keeps the salt of proxy keys (``kv`` namespace and key): a random
#: value made once per backend by the first slot that needs it, so every worker keys a
#: proxy alike while a reader of keys (a read token, the metrics) cannot test guesses
#: of a user name against them. Not reachable through the API.
SALT_NS = "fleet-proxy"
SALT_KEY = "key-salt"
# The salt of a process without a backend (or a health store without a kv): its keys
# never leave the process, and still reveal nothing.
_LOCAL_SALT = secrets.token_hex(16)

_outages = OutageLog(log)
#: Proxy lists (owner + proxies) whose "every proxy is cooling" warning is out.
_all_cooling: set[str] = set()
#: Cool-downs already logged (key -> its end), so each is logged once per process.
_cooling_logged: dict[str, float] = {}


def _split(url: str) -> SplitResult:
    return urlsplit(url if "://" in url else f"http://{url}")


def proxy_key(url: str, salt: str | None = None) -> str:
    """The name of a proxy in the backend, the API and the metrics: ``scheme://host:port``,
    plus ``#`` and a digest of the user name when the URL has one (two accounts on one
    gateway are two proxies). Never holds the password, nor the user name itself::

        proxy_key("http://user:pw@gate.example:7000", salt) == "http://gate.example:7000#<10 hex>"

    The digest is an HMAC-SHA-256 keyed with ``salt`` (the backend's,
    :func:`proxy_key_salt`; None: this process's own), so a key cannot be matched
    against guessed user names offline (a user name is often an account id or the API
    key itself). The same URL gives the same key wherever the salt is the same.
    """
    parts = _split(url.strip())
    scheme = (parts.scheme or "http").lower()
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    port = port or DEFAULT_PORTS.get(scheme)
    key = f"{scheme}://{host}" + (f":{port}" if port else "")
    if parts.username:
        secret = (_LOCAL_SALT if salt is None else salt).encode()
        name = unquote(parts.username).encode("utf-8", "replace")
        key += f"#{hmac.new(secret, name, hashlib.sha256).hexdigest()[:10]}"
    return key


async def proxy_key_salt(kv: KV) -> str:
    """The backend's salt of proxy keys, made (atomically, once) if it has none yet.

    Raises:
        BackendError: The backend is unreachable.
    """
    salt = await kv.get(SALT_NS, SALT_KEY)
    if salt is None:
        # setnx: of slots starting at once on a fresh backend, one salt wins for all.
        await kv.setnx(SALT_NS, SALT_KEY, secrets.token_hex(16))
        salt = await kv.get(SALT_NS, SALT_KEY)
    if not salt:
        raise BackendError("the proxy-key salt vanished from the backend as it was made")
    return salt


def mask_url(url: str | None) -> str:
    """``url`` with its credentials masked (safe to log): the one masking function,
    :func:`fleet.core.redact.mask_credentials`, reading ``url`` as a URL even
    without a scheme (``user:pw@host:port``, ``apikey@host``)."""
    if not url:
        return str(url)
    return mask_credentials(url, url_list=True)


class ProxyProvider(Protocol):
    """What a ``fleet.proxy_providers`` entry point returns when called with its config."""

    def url(self, *, session: str, country: str | None) -> str | None:
        """The proxy URL for a sticky ``session`` id and an optional ``country``."""
        ...


class TemplateProvider:
    """Builds URLs from a template with ``{session}`` and ``{country}`` placeholders.

    Config: ``{"template": "http://user-{session}-cc-{country}:pw@host:port",
    "default_country": "us"}``.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        template = config.get("template")
        if not isinstance(template, str) or not template:
            raise ValueError("template proxy provider needs a 'template' string")
        self.template = template
        self.default_country = config.get("default_country") or ""

    def url(self, *, session: str, country: str | None) -> str | None:
        return self.template.format(session=session, country=country or self.default_country)


#: Entry-point group of proxy providers: a callable taking the provider config.
GROUP = "fleet.proxy_providers"

_BUILTIN: dict[str, Callable[[dict[str, Any]], ProxyProvider]] = {"template": TemplateProvider}


def provider_factory(name: str) -> Callable[[dict[str, Any]], ProxyProvider]:
    """The factory registered under ``name``.

    Raises:
        ConfigError: No provider has that name (the message lists the known ones).
    """
    if name in _BUILTIN:
        return _BUILTIN[name]
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            factory: Callable[[dict[str, Any]], ProxyProvider] = ep.load()
            return factory
    known = sorted({*_BUILTIN, *(ep.name for ep in entry_points(group=GROUP))})
    raise ConfigError(
        f"unknown proxy_provider {name!r}; known: {', '.join(known)}", field="proxy_provider"
    )


def split_proxy_urls(value: str | None) -> list[str]:
    """The URLs of a ``proxy_url`` config value (comma or newline separated)."""
    if not value:
        return []
    return [u.strip() for u in value.replace("\n", ",").split(",") if u.strip()]


Option = tuple[str | None, str | None]  # (url, provider session)


class ProxyHandle:
    """The slot's proxy: ``url`` now; ``ensure``, ``rotate``, ``set_country``,
    ``sticky``, ``report_bad`` and ``report_ok``.

    Args:
        urls: Fixed URLs from ``proxy_url`` (rotated through in order).
        provider: A provider building URLs per session and country, or None.
        index: Starting position in ``urls`` (the slot id spreads slots apart).
        health: The backend's proxy health; None keeps everything in this handle
            (no shared scores, no cool-downs, no cap).
        policy: Threshold, cool-down and cap from this worker's config: used only
            while the backend stores no policy for ``owner`` (the type's stored
            policy, one value for the fleet, is applied by the backend itself).
        owner: The automation type using the proxies: names them in log lines, and
            the backend applies its stored policy to this handle's takes and reports.
        hold_seconds: How long a place outlives a slot that stopped renewing it.
        wait_seconds: How long to wait for a place under the cap.
    """

    def __init__(
        self,
        urls: list[str] | None = None,
        provider: ProxyProvider | None = None,
        index: int = 0,
        *,
        health: ProxyHealth | None = None,
        policy: ProxyPolicy | None = None,
        owner: str = "",
        hold_seconds: float = PLACE_HOLD_SECONDS,
        wait_seconds: float = PLACE_WAIT_SECONDS,
    ) -> None:
        self._urls = list(urls or [])
        self._provider = provider
        self._index = index
        self._country: str | None = None
        self._session = os.urandom(6).hex()
        self._health = health if (self._urls or provider is not None) else None
        self.policy = policy or ProxyPolicy()
        self.owner = owner
        self.hold_seconds = hold_seconds
        self.wait_seconds = wait_seconds
        self._token = new_token()
        self._held: str | None = None
        # Set by sticky() until the slot's task ends (release) or it rotates: ensure()
        # then keeps the sticky proxy rather than spreading the slot's load.
        self._sticky: str | None = None
        self._renewer: asyncio.Task[None] | None = None
        # The backend's salt of proxy keys, read by the first call that needs a key the
        # backend shares (None until then: keys are this process's own).
        self._salt: str | None = None
        source = "|".join(sorted({proxy_key(u) for u in self._urls})) or "provider"
        self._list_id = f"{owner}|{hashlib.sha256(source.encode()).hexdigest()[:12]}"
        self.url: str | None = None
        self._set(*self._current())

    # ------------------------------------------------------------------ state
    @property
    def key(self) -> str | None:
        """The current proxy's :func:`proxy_key` (None without a proxy), salted as the
        backend's once the handle has talked to it (after :meth:`ensure`)."""
        return None if self.url is None else proxy_key(self.url, self._salt)

    async def _shared_salt(self) -> str | None:
        # Raises BackendError (the callers treat it as any other outage).
        salts = None if self._health is None else self._health.salts
        if self._salt is None and salts is not None:
            self._salt = await proxy_key_salt(salts)
        return self._salt

    @property
    def active(self) -> bool:
        """True if the config gives this slot proxies at all."""
        return bool(self._urls) or self._provider is not None

    def _label(self) -> str:
        return self.owner or "ctx.proxy"

    def _build(self, session: str, country: str | None) -> Option:
        assert self._provider is not None
        return self._provider.url(session=session, country=country), session

    def _current(self) -> Option:
        if self._provider is not None:
            return self._build(self._session, self._country)
        if self._urls:
            return self._urls[self._index % len(self._urls)], None
        return None, None

    def _fresh(self, n: int, country: str | None) -> list[Option]:
        return [self._build(os.urandom(6).hex(), country) for _ in range(n)]

    def _fixed_from(self, start: int) -> list[Option]:
        n = len(self._urls)
        return [(self._urls[(start + i) % n], None) for i in range(n)]

    def _set(self, url: str | None, session: str | None) -> None:
        self.url = url
        if session is not None:
            self._session = session
        elif url is not None and url in self._urls:
            here = self._index % len(self._urls)
            if self._urls[here] != url:
                self._index = self._urls.index(url)

    # ------------------------------------------------------------------ picking
    async def _pick(
        self,
        options: list[Option],
        *,
        sticky: str | None = None,
        sticky_seconds: float = 0.0,
        spread: bool = False,
    ) -> str | None:
        usable = [(u, s) for u, s in options if u]
        if not usable:  # a provider without an exit for this country or session
            self._set(None, options[0][1] if options else None)
            await self._release()
            return None
        if self._health is None:
            self._set(*usable[0])
            return self.url
        component = f"{self._label()}: proxy health"
        try:
            salt = await self._shared_salt()
        except BackendError as exc:
            _outages.failed(component, exc, hint="picking proxies without their health")
            self._set(*usable[0])
            return self.url
        by_key: dict[str, Option] = {}
        for url, session in usable:
            by_key.setdefault(proxy_key(url, salt), (url, session))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_seconds
        while True:
            try:
                got = await self._health.take(
                    list(by_key),
                    self._token,
                    held=self._held,
                    max_concurrency=self.policy.max_concurrency,
                    hold_seconds=self.hold_seconds,
                    sticky=sticky,
                    sticky_seconds=sticky_seconds,
                    spread=spread,
                    automation_type=self.owner or None,
                )
            except BackendError as exc:
                # Without the backend the slot still has proxies: the first choice.
                _outages.failed(component, exc, hint="picking proxies without their health")
                self._set(*usable[0])
                return self.url
            _outages.recovered(component)
            if got.key is not None:
                break
            # No holding a place while waiting for another: two slots could each hold
            # what the other waits for.
            await self._release()
            left = deadline - loop.time()
            if left <= 0:
                raise Throttled(
                    1.0,
                    f"{self._label()}: every usable proxy is at proxy_max_concurrency="
                    f"{await self._fleet_cap()} (waited {self.wait_seconds:g} s)",
                )
            await asyncio.sleep(min(got.wait + 0.002, left))
        self._set(*by_key[got.key])
        self._held = got.key
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._renew(), name=f"proxy:{got.key}")
        self._note_cooling(got.cooling, got.key)
        return self.url

    async def _fleet_cap(self) -> int | None:
        """The cap the backend applied: the type's stored one, else this handle's."""
        if self._health is not None and self.owner:
            with contextlib.suppress(BackendError):
                stored, _ = await self._health.policy(self.owner)
                if stored is not None:
                    return stored.max_concurrency
        return self.policy.max_concurrency

    def _note_cooling(self, cooling: bool, key: str) -> None:
        if cooling and self._list_id not in _all_cooling:
            _all_cooling.add(self._list_id)
            log.warning(
                "%s: every proxy is cooling down; using the one that recovers first (%s) "
                "until one is healthy again",
                self._label(),
                key,
            )
        elif not cooling and self._list_id in _all_cooling:
            _all_cooling.discard(self._list_id)
            log.warning("%s: a healthy proxy is back (%s)", self._label(), key)

    async def _renew(self) -> None:
        assert self._health is not None
        while True:
            await asyncio.sleep(self.hold_seconds / 3)
            key = self._held
            if key is None:
                return
            try:
                kept = await self._health.renew(key, self._token, self.hold_seconds)
            except BackendError:
                continue  # an outage: the next period tries again
            if not kept and self._held == key:
                self._held = None  # expired (a stall): the next ensure() takes one again
                return

    async def _release(self) -> None:
        held, self._held = self._held, None
        if held is not None and self._health is not None:
            with contextlib.suppress(BackendError):
                await self._health.release(held, self._token)

    # ------------------------------------------------------------------ public
    async def ensure(self) -> str | None:
        """Hold a place on a healthy proxy, and make it the slot's. The worker calls
        this before every ``run_one`` and ``run_slot``; a continuous slot that runs for
        long calls it now and then.

        Fixed URLs spread the load fleet-wide: the slot keeps its proxy while that one
        carries no more than its share of the places held on the healthy proxies, else
        it moves to the least-used one (:func:`~fleet.core.capabilities.proxies.spread_choice`),
        so a proxy back from a cool-down takes its share again. A provider's session,
        and a proxy chosen by :meth:`sticky` during the current task, are kept while
        healthy.

        Raises:
            Throttled: ``proxy_max_concurrency`` left no place within ``wait_seconds``.
        """
        if not self.active:
            return None
        if self._provider is not None:
            options = [self._current(), *self._fresh(PROVIDER_CANDIDATES, self._country)]
            return await self._pick(options)
        return await self._pick(self._fixed_from(self._index), spread=self._sticky is None)

    async def rotate(self) -> str | None:
        """Move to a new exit: a new sticky session, or the next healthy fixed URL."""
        self._sticky = None
        if self._provider is not None:
            return await self._pick(self._fresh(PROVIDER_CANDIDATES + 1, self._country))
        if not self._urls:
            return None
        return await self._pick(self._fixed_from(self._index + 1))

    async def set_country(self, country: str) -> str | None:
        """Ask the provider for an exit in ``country`` (fixed URLs ignore it)."""
        self._country = country
        if self._provider is not None:
            current = self._build(self._session, country)
            return await self._pick([current, *self._fresh(PROVIDER_CANDIDATES, country)])
        return await self.ensure()

    async def sticky(self, key: str, *, ttl_seconds: float = STICKY_SECONDS) -> str | None:
        """Use the proxy kept for ``key`` (an account, a session), fleet-wide: the same
        one for every retry and slot while it is healthy; a new one, kept from then on,
        once it cools down. The choice lasts ``ttl_seconds`` after its last use.

        Raises:
            ContractValueError: (a ``ValueError``) for an invalid key.
            Throttled: The sticky proxy had no free place within ``wait_seconds``.
        """
        name = check_group(key, field="key")
        if self._provider is not None:
            options = [
                self._build(hashlib.sha256(f"{name}\0{n}".encode()).hexdigest()[:12], self._country)
                for n in range(PROVIDER_CANDIDATES + 1)
            ]
        elif self._urls:
            start = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
            options = self._fixed_from(start)
        else:
            return None
        url = await self._pick(options, sticky=name, sticky_seconds=ttl_seconds)
        self._sticky = name
        return url

    async def report_bad(self, reason: str = "") -> str | None:
        """Report the current proxy as bad (fleet-wide: past ``proxy_bad_threshold``
        it cools down for ``proxy_cooldown_seconds`` on every worker, the type's values
        as the backend stores them) and rotate away."""
        url = self.url
        if url is not None:
            await self.report_url(url, ok=False, reason=reason)
        return await self.rotate()

    async def report_url(self, url: str, *, ok: bool, reason: str = "") -> None:
        """Report a proxy's health: the slot's (:meth:`report_bad`) or another one, an
        identity's exit, without rotating the slot's proxy."""
        if self._health is None:
            return
        try:
            await self._shared_salt()
            key = proxy_key(url, self._salt)
            if ok:
                await self._health.report(key, ok=True)
                return
            # Every credential form (a scheme or not, user name only) goes: the reason is
            # stored, listed to read tokens and logged.
            reason = mask_credentials(reason)
            until = await self._health.report(
                key,
                ok=False,
                threshold=self.policy.bad_threshold,
                cooldown_seconds=self.policy.cooldown_seconds,
                reason=reason,
                automation_type=self.owner or None,
            )
        except BackendError as exc:
            _outages.failed(f"{self._label()}: proxy health", exc, hint="report not kept")
        else:
            self._log_cooling(key, until, reason)

    async def report_ok(self) -> None:
        """Report that the current proxy worked (its run of bad reports ends)."""
        if self.url is None or self._health is None:
            return
        with contextlib.suppress(BackendError):
            await self._shared_salt()
            await self._health.report(proxy_key(self.url, self._salt), ok=True)

    def _log_cooling(self, key: str, until: float | None, reason: str) -> None:
        if until is None or _cooling_logged.get(key) == until:
            return
        if len(_cooling_logged) > 1000:
            _cooling_logged.clear()
        _cooling_logged[key] = until
        log.info(
            "%s: proxy %s cools down for %.0f s (%s)",
            self._label(),
            key,
            max(0.0, until - clock.now()),
            reason or "reported bad",
        )

    async def release(self) -> None:
        """Give back the place this slot holds; the URL stays, and the next
        :meth:`ensure` takes a place again. The worker calls this when a task (or a
        ``run_slot``) ends, when the slot stops and when its proxies change."""
        self._sticky = None  # the next task's ensure() spreads again
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        with contextlib.suppress(Exception):
            await self._release()

    async def close(self) -> None:
        """The slot stops: give back its place (same as :meth:`release`)."""
        await self.release()

    def discard(self) -> None:
        """:meth:`release` in the background (a handle replaced while its slot runs)."""
        if self._held is None and self._renewer is None:
            return
        task = asyncio.get_running_loop().create_task(self.release())
        _closing.add(task)
        task.add_done_callback(_closing.discard)


_closing: set[asyncio.Task[None]] = set()
