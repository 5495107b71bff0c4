"""Identities: a proxy, a fingerprint, cookies and an optional account, leased
fleet-wide as one unit (docs/identities.md).

Pure data and rules, shared by every backend: the record and its checks, the state a
record is in at a time, the order leases take identities in, and how the cookies of a
released lease merge into the stored jar.

**The order of a pool** (who gets the next lease), the same on every backend: among the
identities that are usable now (not retired, not cooling, fewer live leases than the
pool's ``max_concurrency``), the one leased least recently (``last_used_at``; never:
0), then the smallest id. A lease sets ``last_used_at`` to its time, so a pool is
walked round robin.

**Cookies** are kept as Playwright's ``storage_state`` keeps them (``name``, ``value``,
``domain``, ``path``, ``expires``, ``httpOnly``, ``secure``, ``sameSite``). A release
that brings cookies back merges them into the stored jar by ``(domain, path, name)``:
the released cookie wins (so of two leases of one identity, the one released last wins
for a cookie both changed), and a cookie whose ``expires`` has passed is dropped.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fleet.core.errors import ContractValueError

#: The states of an identity (:func:`state_at` decides which it is in).
IdentityState = Literal["ready", "leased", "cooling", "retired"]
IDENTITY_STATES: tuple[IdentityState, ...] = ("ready", "leased", "cooling", "retired")
#: How a lease ended (``release(outcome=...)``).
LeaseOutcome = Literal["ok", "blocked", "none"]
#: Longest identity id, pool name and sticky key.
MAX_ID = 200
#: Largest stored document of one identity (bytes of its JSON).
MAX_DOC_BYTES = 256 * 1024
#: Most cookies a jar keeps (the newest kept past it).
MAX_COOKIES = 500
#: Defaults of a pool's leases (the ``identity_*`` config fields say otherwise).
DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_COOLDOWN_SECONDS = 600.0
DEFAULT_RETIRE_AFTER = 3

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$")
_COOKIE_KEYS = ("name", "value", "domain", "path", "expires", "httpOnly", "secure", "sameSite")


def check_pool_name(name: object) -> str:
    """A pool name: 1-200 letters, digits, ``_``, ``-``, ``.``, starting with one of the
    first two (it is part of backend keys).

    Raises:
        ContractValueError: naming ``pool``.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ContractValueError(
            f"an identity pool name is 1-{MAX_ID} letters, digits, '_', '-' or '.', "
            f"starting with a letter or digit; got {name!r}",
            field="pool",
        )
    return name


def check_identity_id(value: object, *, what: str = "id") -> str:
    """An identity id or sticky key: 1-200 characters without control characters."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_ID
        or any(ord(c) < 32 or ord(c) == 127 for c in value)
    ):
        raise ContractValueError(
            f"{what} must be 1-{MAX_ID} characters without control characters", field=what
        )
    return value


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a browser says of itself, coherent with the identity's exit.

    Attributes:
        user_agent: The ``User-Agent``.
        headers: The other request headers, in the order the browser sends them.
        locale: ``en-US``; ``timezone``: ``America/New_York``; ``platform``: ``Win32``.
        viewport: ``{"width": 1366, "height": 768}``.
    """

    user_agent: str
    headers: tuple[tuple[str, str], ...] = ()
    locale: str | None = None
    timezone: str | None = None
    viewport: dict[str, int] | None = None
    platform: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "user_agent": self.user_agent,
            "headers": [list(h) for h in self.headers],
            "locale": self.locale,
            "timezone": self.timezone,
            "viewport": self.viewport,
            "platform": self.platform,
        }

    def request_headers(self) -> list[tuple[str, str]]:
        """The headers of a request in the browser's order: ``User-Agent`` where
        ``headers`` place it (its value ``user_agent``), else first."""
        if any(k.lower() == "user-agent" for k, _ in self.headers):
            return [
                (k, self.user_agent if k.lower() == "user-agent" else v) for k, v in self.headers
            ]
        return [("User-Agent", self.user_agent), *self.headers]


@dataclass(frozen=True, slots=True)
class IdentityStats:
    """What happened to an identity: leases, their outcomes, the last block's reason."""

    uses: int = 0
    ok: int = 0
    blocked: int = 0
    blocked_in_row: int = 0
    last_used_at: float = 0.0
    last_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "uses": self.uses,
            "ok": self.ok,
            "blocked": self.blocked,
            "blocked_in_row": self.blocked_in_row,
            "last_used_at": self.last_used_at or None,
            "last_reason": self.last_reason,
        }


@dataclass(frozen=True, slots=True)
class Identity:
    """One identity of a pool.

    Attributes:
        id: Unique in its pool.
        proxy: Its exit: a proxy URL (``http://user:pass@host:port``), or None (direct).
        fingerprint: Its browser's self-description, or None (requests say nothing).
        cookies: Its jar (Playwright ``storage_state`` cookies).
        account: What an account creator or a login stored (JSON), or None.
        state: As of the read (:func:`state_at`).
        leases: Live leases now.
        cooling_until: When a cool-down ends (None: not cooling).
        stats: Its counts.
        created_at: When it was put.
    """

    id: str
    proxy: str | None = None
    fingerprint: Fingerprint | None = None
    cookies: tuple[dict[str, Any], ...] = ()
    account: dict[str, Any] | None = None
    state: IdentityState = "ready"
    leases: int = 0
    cooling_until: float | None = None
    stats: IdentityStats = field(default_factory=IdentityStats)
    created_at: float = 0.0

    def doc(self) -> dict[str, Any]:
        """What a backend stores of it as one JSON document (not its state or stats)."""
        return {
            "id": self.id,
            "proxy": self.proxy,
            "fingerprint": None if self.fingerprint is None else self.fingerprint.to_dict(),
            "cookies": list(self.cookies),
            "account": self.account,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.doc(),
            "state": self.state,
            "leases": self.leases,
            "cooling_until": self.cooling_until,
            "stats": self.stats.to_dict(),
            "created_at": self.created_at,
        }

    def evolve(self, **changes: Any) -> Identity:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class IdentityLease:
    """A held lease: the identity as leased, and the token that renews and releases it."""

    pool: str
    identity: Identity
    token: str
    deadline: float
    key: str | None = None


@dataclass(frozen=True, slots=True)
class IdentityPage:
    """A page of a pool, by id; ``counts`` by state and ``blocks`` (the blocks its
    identities reported, summed) over the whole pool, read in the same pass."""

    items: tuple[Identity, ...]
    next: str | None
    counts: dict[str, int]
    blocks: int = 0


# ---------------------------------------------------------------- checks


def _text(value: Any, where: str, *, limit: int = 4096, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise ContractValueError(
            f"{where} must be a string of at most {limit} characters", field=where
        )
    return value


def _fingerprint(raw: Any) -> Fingerprint | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ContractValueError("fingerprint must be an object", field="fingerprint")
    ua = _text(raw.get("user_agent"), "fingerprint.user_agent", optional=False)
    headers_raw = raw.get("headers") or []
    if isinstance(headers_raw, Mapping):
        headers_raw = list(headers_raw.items())
    if not isinstance(headers_raw, list):
        raise ContractValueError(
            "fingerprint.headers must be a list of [name, value]", field="fingerprint.headers"
        )
    headers: list[tuple[str, str]] = []
    for i, pair in enumerate(headers_raw):
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(isinstance(x, str) and "\n" not in x and "\r" not in x for x in pair)
        ):
            raise ContractValueError(
                "a header is [name, value], both strings without line breaks",
                field=f"fingerprint.headers.{i}",
            )
        headers.append((pair[0], pair[1]))
    viewport = raw.get("viewport")
    if viewport is not None:
        if not (
            isinstance(viewport, Mapping)
            and set(viewport) == {"width", "height"}
            and all(
                isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 20_000
                for v in viewport.values()
            )
        ):
            raise ContractValueError(
                "fingerprint.viewport must be {width, height} in pixels",
                field="fingerprint.viewport",
            )
        viewport = {"width": int(viewport["width"]), "height": int(viewport["height"])}
    return Fingerprint(
        user_agent=ua or "",
        headers=tuple(headers),
        locale=_text(raw.get("locale"), "fingerprint.locale", limit=64),
        timezone=_text(raw.get("timezone"), "fingerprint.timezone", limit=64),
        viewport=viewport,
        platform=_text(raw.get("platform"), "fingerprint.platform", limit=64),
    )


def check_cookie(raw: Any, where: str) -> dict[str, Any]:
    """One cookie in ``storage_state`` form (name, value, domain required)."""
    if not isinstance(raw, Mapping):
        raise ContractValueError("a cookie must be an object", field=where)
    out: dict[str, Any] = {}
    for key in ("name", "value", "domain"):
        out[key] = _text(raw.get(key), f"{where}.{key}", optional=False)
    out["path"] = _text(raw.get("path"), f"{where}.path") or "/"
    expires = raw.get("expires", -1)
    if (
        isinstance(expires, bool)
        or not isinstance(expires, int | float)
        or not math.isfinite(expires)
    ):
        raise ContractValueError(
            "expires is a Unix time, or -1 for a session cookie", field=f"{where}.expires"
        )
    out["expires"] = float(expires)
    for flag in ("httpOnly", "secure"):
        value = raw.get(flag, False)
        if not isinstance(value, bool):
            raise ContractValueError(f"{flag} must be true or false", field=f"{where}.{flag}")
        out[flag] = value
    same = raw.get("sameSite", "Lax")
    if same not in ("Strict", "Lax", "None"):
        raise ContractValueError("sameSite is Strict, Lax or None", field=f"{where}.sameSite")
    out["sameSite"] = same
    return out


def parse_identity(raw: Any, *, where: str = "") -> Identity:
    """An identity from its JSON (what a user posts, or a stored document).

    Raises:
        ContractValueError: naming the field that is wrong (``where`` its prefix).
    """
    prefix = f"{where}." if where else ""
    if not isinstance(raw, Mapping):
        raise ContractValueError("an identity must be an object", field=where or None)
    unknown = set(raw) - {"id", "proxy", "fingerprint", "cookies", "account"}
    if unknown:
        raise ContractValueError(
            f"unknown identity field(s) {', '.join(sorted(unknown))}",
            field=prefix + sorted(unknown)[0],
        )
    try:
        identity_id = check_identity_id(raw.get("id"))
    except ContractValueError as exc:
        raise ContractValueError(exc.message, field=prefix + "id") from None
    proxy = _text(raw.get("proxy"), prefix + "proxy", limit=2048)
    if proxy is not None and not re.match(r"^(https?|socks5h?)://[^\s]+$", proxy):
        raise ContractValueError(
            "proxy must be an http://, https:// or socks5:// URL", field=prefix + "proxy"
        )
    try:
        fingerprint = _fingerprint(raw.get("fingerprint"))
    except ContractValueError as exc:
        raise ContractValueError(exc.message, field=prefix + (exc.field or "fingerprint")) from None
    cookies_raw = raw.get("cookies") or []
    if not isinstance(cookies_raw, list):
        raise ContractValueError("cookies must be a list", field=prefix + "cookies")
    cookies = tuple(check_cookie(c, f"{prefix}cookies.{i}") for i, c in enumerate(cookies_raw))
    account = raw.get("account")
    if account is not None and not isinstance(account, Mapping):
        raise ContractValueError("account must be an object", field=prefix + "account")
    made = Identity(
        id=identity_id,
        proxy=proxy,
        fingerprint=fingerprint,
        cookies=cookies[-MAX_COOKIES:],
        account=None if account is None else dict(account),
    )
    if len(json.dumps(made.doc())) > MAX_DOC_BYTES:
        raise ContractValueError(
            f"an identity's document is at most {MAX_DOC_BYTES} bytes", field=prefix + "cookies"
        )
    return made


# ---------------------------------------------------------------- rules


def state_at(
    *, retired: bool, cooling_until: float | None, leases: int, now: float
) -> IdentityState:
    """The state of an identity at ``now``: retired, else cooling while its cool-down
    lasts, else leased while a lease is live, else ready."""
    if retired:
        return "retired"
    if cooling_until is not None and cooling_until > now:
        return "cooling"
    return "leased" if leases > 0 else "ready"


def cookie_key(c: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(c.get("domain", "")), str(c.get("path", "/")), str(c.get("name", "")))


def merged_cookies(
    stored: Sequence[Mapping[str, Any]], released: Sequence[Mapping[str, Any]], now: float
) -> list[dict[str, Any]]:
    """The jar after a release: ``released`` over ``stored`` by (domain, path, name),
    expired cookies dropped, the newest :data:`MAX_COOKIES` kept (see the module)."""
    jar: dict[tuple[str, str, str], dict[str, Any]] = {}
    for c in [*stored, *released]:
        jar.pop(cookie_key(c), None)  # re-inserted last: the newest at the end
        jar[cookie_key(c)] = dict(c)
    alive = [c for c in jar.values() if not (0 <= float(c.get("expires", -1)) <= now)]
    return alive[-MAX_COOKIES:]


def after_block(
    stats: IdentityStats, reason: str | None, now: float, *, cooldown: float, retire_after: int
) -> tuple[IdentityStats, float | None, bool]:
    """A block's effect: the stats, the cool-down's end, and whether it retires the
    identity (``retire_after`` blocks in a row)."""
    in_row = stats.blocked_in_row + 1
    new = replace(stats, blocked=stats.blocked + 1, blocked_in_row=in_row, last_reason=reason)
    if in_row >= retire_after:
        return new, None, True
    return new, now + cooldown, False
