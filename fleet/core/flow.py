"""Flow control: rates, group settings and the admission rule every backend applies.

Pure functions and plain records, no I/O: the memory and SQLite backends call
:func:`admit` inside their reserve step, the Redis backend's ``lua/groups.lua``
implements the same rule (the conformance suite holds all three to it), and the
limiter behind ``ctx.limit`` uses :func:`next_tat` for its rate.

A rate is smooth: ``"5/s"`` lets one start through every 0.2 s rather than five at
the top of each second. It is a GCRA (generic cell rate algorithm) with a burst of
one: each group keeps a *theoretical arrival time* (``tat``), the earliest moment its
next start is allowed; a start at ``now >= tat`` moves it one interval on.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

from fleet.core.errors import ContractValueError

#: The longest group name (the same rule as task ids).
MAX_GROUP_LEN = 200
#: The longest period of a rate (a year), and the most starts in one: a rate
#: beyond them limits nothing anyone means, and its times would overflow.
MAX_RATE_PERIOD = 366 * 86400.0
MAX_RATE_COUNT = 1_000_000_000

_RATE_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*$")
_UNIT_SECONDS = {
    "s": 1.0, "sec": 1.0, "second": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0,
    "h": 3600.0, "hour": 3600.0,
    "d": 86400.0, "day": 86400.0,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` starts per ``per`` seconds, evenly spaced."""

    count: int
    per: float
    text: str

    @property
    def interval(self) -> float:
        """Seconds between two starts."""
        return self.per / self.count

    def __str__(self) -> str:
        return self.text


def parse_rate(text: str) -> Rate:
    """Parse ``"5/s"``, ``"100/m"``, ``"1000/h"``, ``"20/d"`` or ``"3/10s"``.

    Raises:
        ContractValueError: (a ``ValueError``) saying what a rate looks like.
    """
    m = _RATE_RE.match(text) if isinstance(text, str) else None
    if m is None:
        raise ContractValueError(
            f"rate {text!r} is not of the form N/s, N/m, N/h or N/d (e.g. '5/s', '100/m')",
            field="rate",
        )
    count = int(m.group(1))
    mult = int(m.group(2)) if m.group(2) else 1
    if count < 1 or mult < 1:
        raise ContractValueError(f"rate {text!r} must allow at least 1 per period", field="rate")
    per = mult * _UNIT_SECONDS[m.group(3)]
    if per > MAX_RATE_PERIOD:
        raise ContractValueError(
            f"rate {text!r}: its period must be at most 366 days", field="rate"
        )
    if count > MAX_RATE_COUNT:
        raise ContractValueError(
            f"rate {text!r}: at most {MAX_RATE_COUNT:,} per period", field="rate"
        )
    unit = m.group(3)[0]
    return Rate(count, per, f"{count}/{mult if mult > 1 else ''}{unit}")


def check_plain(value: Any, *, field: str, max_len: int) -> str:
    """An id as stored and logged: a non-empty string of at most ``max_len``
    characters without control characters (C0, DEL, C1: no forged log lines) or
    surrogates (nothing that cannot be encoded).

    Raises:
        ContractValueError: naming ``field``.
    """
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise ContractValueError(
            f"{field} must be a non-empty string of at most {max_len} characters", field=field
        )
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
        raise ContractValueError(f"{field} must not contain control characters", field=field)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise ContractValueError(f"{field} must not contain unpaired surrogates", field=field)
    if any(unicodedata.category(c) in _INVISIBLE for c in value if ord(c) >= 0x80):
        # Format characters (U+202E reverses what follows, U+200B hides) and line or
        # paragraph separators (U+2028) make one name look like another in a log,
        # a table or the dashboard.
        raise ContractValueError(
            f"{field} must not contain format characters or line separators", field=field
        )
    return value


_INVISIBLE = frozenset({"Cf", "Zl", "Zp"})


def check_group(group: Any, *, field: str = "group") -> str:
    """A group name as stored: the rule task ids follow (:func:`check_plain`, at most
    200 characters).

    Raises:
        ContractValueError: naming ``field``.
    """
    check_plain(group, field=field, max_len=MAX_GROUP_LEN)
    if group in (".", ".."):
        # A URL normalises them away: the dashboard and the CLI could never reach it.
        raise ContractValueError(f"{field} must not be '.' or '..'", field=field)
    return str(group)


def check_concurrency(value: Any, *, field: str = "concurrency") -> int | None:
    """None, or an integer >= 1 (a cap of 0 would be a pause: use ``paused``)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ContractValueError(f"{field} must be an integer >= 1 (or null)", field=field)
    return value


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """One group's overrides, stored in the backend. ``None`` means "the type's
    value" (``group_concurrency`` / ``group_rate`` of its config)."""

    concurrency: int | None = None
    rate: str | None = None
    paused: bool = False

    def __post_init__(self) -> None:
        check_concurrency(self.concurrency)
        if self.rate is not None:
            parse_rate(self.rate)

    @property
    def interval(self) -> float | None:
        return None if self.rate is None else _interval_of(self.rate)

    @property
    def empty(self) -> bool:
        """True if it overrides nothing (the same as having no settings)."""
        return self.concurrency is None and self.rate is None and not self.paused

    def to_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "rate": self.rate, "paused": self.paused}

    def stored(self) -> dict[str, Any]:
        """The stored form: also carries the rate's interval, so a backend script
        never parses rate text."""
        return {**self.to_dict(), "interval": self.interval}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GroupSettings:
        rate = d.get("rate")
        return cls(
            concurrency=d.get("concurrency"),
            rate=None if rate is None else parse_rate(str(rate)).text,
            paused=bool(d.get("paused", False)),
        )


@dataclass(frozen=True, slots=True)
class GroupLimits:
    """The limits a reserve applies to a group without settings of its own: the
    type's ``group_concurrency`` and ``group_rate`` (as an interval in seconds, and
    the rate's text for display).

    They are stored in the backend (:meth:`TaskGroups.set_defaults`) and read
    by every reserve inside its atomic step: one value for the fleet.
    """

    concurrency: int | None = None
    interval: float | None = None
    rate: str | None = None

    @classmethod
    def of(cls, concurrency: int | None, rate: str | None) -> GroupLimits:
        """The limits of a type's ``group_concurrency`` and ``group_rate``."""
        return _limits_of(concurrency, rate)

    @classmethod
    def of_config(cls, config: dict[str, Any]) -> GroupLimits:
        """The limits of a type's effective config (stored values over the schema's
        defaults); a value this Fleet cannot read limits nothing (it was validated
        when it was written)."""
        # A crawler's groups are its hosts, limited by its per_host_* fields.
        per_host = "per_host_concurrency" in config or "per_host_rate" in config
        concurrency = config.get("per_host_concurrency" if per_host else "group_concurrency")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            concurrency = None
        rate = config.get("per_host_rate" if per_host else "group_rate")
        try:
            return _limits_of(concurrency, None if rate is None else parse_rate(str(rate)).text)
        except ValueError:
            return _limits_of(concurrency, None)

    @property
    def any(self) -> bool:
        return self.concurrency is not None or self.interval is not None


@functools.lru_cache(maxsize=1024)
def _interval_of(rate: str) -> float:
    # Asked at every group turn of a reserve: parse each rate text once.
    return parse_rate(rate).interval


@functools.lru_cache(maxsize=256)
def _limits_of(concurrency: int | None, rate: str | None) -> GroupLimits:
    # Workers ask once per reserve call: parse each config's rate once.
    if rate is None:
        return GroupLimits(concurrency)
    parsed = parse_rate(rate)
    return GroupLimits(concurrency, parsed.interval, parsed.text)


_NO_SETTINGS = GroupSettings()

Verdict = Literal["serve", "saturated", "delayed", "paused"]


def next_tat(tat: float, now: float, interval: float) -> float:
    """The theoretical arrival time after a start at ``now`` (allowed: ``now >= tat``).

    A start that comes late by less than one interval keeps the schedule (the next
    one may come that much sooner), so the wake-up latency of reservers does not
    drag the rate below its value; a later one starts a new schedule from ``now``.
    The most that can start within any one interval is therefore two.
    """
    base = tat if now - tat < interval else now
    return base + interval


def admit(
    settings: GroupSettings | None,
    limits: GroupLimits,
    *,
    running: int,
    tat: float,
    throttled_until: float,
    now: float,
) -> tuple[Verdict, float]:
    """Whether a group may start one more task now, under its own ``settings`` (a
    field left None takes the type's ``limits``).

    Returns ``("serve", new_tat)``, ``("saturated", 0)`` (``running`` is at the cap:
    it waits for one of its tasks to end), ``("delayed", until)`` (throttled, or its
    rate allows the next start only at ``until``) or ``("paused", 0)``.
    """
    own = settings or _NO_SETTINGS
    concurrency = own.concurrency if own.concurrency is not None else limits.concurrency
    interval = own.interval if own.rate is not None else limits.interval
    if own.paused:
        return "paused", 0.0
    if throttled_until > now:
        return "delayed", throttled_until
    if concurrency is not None and running >= concurrency:
        return "saturated", 0.0
    if interval:
        if tat > now:
            return "delayed", tat
        return "serve", next_tat(tat, now, interval)
    return "serve", tat


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """What a backend knows of one group: its counts, its state and its own
    settings (``settings`` None: it has none, the type's values apply)."""

    name: str
    pending: int
    running: int
    settings: GroupSettings | None
    throttled_until: float | None  #: set while a ``Throttled`` or its rate holds it

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.name,
            "pending": self.pending,
            "running": self.running,
            "settings": None if self.settings is None else self.settings.to_dict(),
            "throttled_until": self.throttled_until,
        }


@dataclass(frozen=True, slots=True)
class GroupPage:
    """One page of a type's groups, by name; ``next`` is the cursor of the next page
    (the last name on this one) or None at the end."""

    groups: list[GroupInfo]
    next: str | None
