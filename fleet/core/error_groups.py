"""Error groups: the rules every backend and the worker follow (docs/errors.md).

A failed attempt belongs to one group per automation type, named by its **key**: the
exception's qualified class, its message normalised (:func:`normalise`: URLs, e-mail
addresses, UUIDs, quoted strings, hex ids and numbers masked) and its **location** (the
innermost frame in the plugin's own code, ``file.py:function``, no line number, so an
edit above the failing line does not split the group). :func:`group_id` hashes the key
to 16 hex digits.

The backend keeps per group its count (failed attempts), first and last seen, up to
:data:`MAX_DOMAINS` domains and the newest sample (:func:`merged` is the one rule), and
its newest :data:`SNAPSHOTS_PER_GROUP` snapshots within :data:`SNAPSHOT_BUDGET` bytes per
type (:func:`evicted`). Groups and snapshots are gone :data:`TTL_SECONDS` after they
were last seen (taken). ``sqlite/errors.py`` runs these functions; ``lua/errors.lua`` is
their only other copy, checked against them by ``tests/conformance/
test_differential_errors.py``.
"""

from __future__ import annotations

import hashlib
import os
import re
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from urllib.parse import urlsplit

from fleet.core.errors import ContractValueError

#: Groups and snapshots are kept this long after they were last seen / taken (7 days).
TTL_SECONDS = 7 * 86400.0
#: Snapshots a group keeps (its newest); a worker takes at most this many per group.
SNAPSHOTS_PER_GROUP = 3
#: Bytes of snapshots (HTML + PNG) a type keeps; the oldest go first (32 MiB).
SNAPSHOT_BUDGET = 32 * 1024 * 1024
#: A snapshot's HTML is cut at this many bytes (and marked truncated).
HTML_CAP = 256 * 1024
#: A screenshot larger than this is not kept (a viewport PNG is far smaller).
PNG_CAP = 2 * 1024 * 1024
#: Domains a group keeps (the first seen).
MAX_DOMAINS = 20
#: A sample's traceback keeps its last this many characters (the innermost frames).
TRACEBACK_CAP = 8192
#: A sample's message and a group's normalised message keep this many characters.
MESSAGE_CAP = 500
#: Groups a page lists at most.
MAX_PAGE = 200
#: Expired groups (and snapshots) deleted per write, oldest first.
PRUNE_PER_WRITE = 100

_GROUP_ID = re.compile(r"[0-9a-f]{16}")
_SNAPSHOT_ID = re.compile(r"[0-9a-f]{1,32}")

# Order matters: a URL holds numbers and may hold an e-mail-like userinfo; quoted text
# may hold anything. Each pattern replaces what the ones before it left.
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>]+"), "<url>"),
    (re.compile(r"\b[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+\b"), "<email>"),
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<uuid>",
    ),
    (re.compile(r"'[^'\n]*'|\"[^\"\n]*\""), "<str>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b"), "<id>"),
    (re.compile(r"[-+]?\d+(?:[.,]\d+)*"), "<n>"),
)
_SPACES = re.compile(r"\s+")


def normalise(message: str) -> str:
    """``message`` with what differs between two failures of one kind masked: URLs
    (``<url>``), e-mail addresses (``<email>``), UUIDs (``<uuid>``), quoted strings
    (``<str>``), hex ids (``0x…`` or 8+ hex digits holding a digit: ``<id>``) and
    numbers (``<n>``); runs of white space made one space, cut at :data:`MESSAGE_CAP`."""
    out = message
    for pattern, mask in _MASKS:
        out = pattern.sub(mask, out)
    return _SPACES.sub(" ", out).strip()[:MESSAGE_CAP]


def class_name(exc: BaseException) -> str:
    """The exception's qualified class name (builtins without their module)."""
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _not_user_roots() -> tuple[str, ...]:
    """Where code that is not the plugin's lives: Fleet, the standard library and
    installed packages."""
    roots = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(name)
        if path:
            roots.add(os.path.abspath(path))
    return tuple(sorted(r + os.sep for r in roots))


_NOT_USER = _not_user_roots()


def is_user_file(filename: str) -> bool:
    """True if ``filename`` is the plugin's code (not Fleet, the standard library or an
    installed package; ``<frozen …>`` and ``<string>`` are not files of anyone's)."""
    if filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    return not any(path.startswith(root) for root in _NOT_USER)


def location(tb: TracebackType | None) -> str:
    """``file.py:function`` of the innermost frame of ``tb`` in the plugin's code (else
    of the innermost frame at all; ``?`` without a traceback). No line number: an edit
    above the failing line must not split its group."""
    inner: tuple[str, str] | None = None
    user: tuple[str, str] | None = None
    while tb is not None:
        code = tb.tb_frame.f_code
        here = (code.co_filename, code.co_name)
        inner = here
        if is_user_file(code.co_filename):
            user = here
        tb = tb.tb_next
    chosen = user or inner
    if chosen is None:
        return "?"
    return f"{os.path.basename(chosen[0])}:{chosen[1]}"


_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)', re.M)


def location_in(stack: str | None) -> str:
    """:func:`location` of a formatted stack or traceback (a timed-out run's, where it
    was when its limit struck): ``file.py:function`` of its innermost frame in the
    plugin's code, else of its innermost frame; ``?`` if it names none."""
    frames = _FRAME.findall(stack or "")
    if not frames:
        return "?"
    user = [f for f in frames if is_user_file(f[0])]
    path, name = (user or frames)[-1]
    return f"{os.path.basename(path)}:{name}"


@dataclass(frozen=True, slots=True)
class GroupKey:
    """What names a group: the type, the class, the normalised message, the location."""

    automation_type: str
    exc: str
    message: str
    location: str

    @property
    def id(self) -> str:
        """The group's id: :func:`group_id` of the key."""
        return group_id(self)


def group_id(key: GroupKey) -> str:
    """16 hex digits of SHA-256 over the key's four parts (stable across processes,
    Python versions and restarts)."""
    raw = "\0".join((key.automation_type, key.exc, key.message, key.location))
    return hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:16]


def key_of(automation_type: str, exc: BaseException) -> GroupKey:
    """The group key of ``exc`` raised by a task of ``automation_type``."""
    return GroupKey(
        automation_type, class_name(exc), normalise(str(exc)), location(exc.__traceback__)
    )


def domain_of(url: str | None) -> str | None:
    """The lower-cased host of ``url`` (None if it has none)."""
    if not url:
        return None
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host.lower() if host else None


@dataclass(frozen=True, slots=True)
class Sample:
    """One failure of a group, kept as its example: the task, the raw message (cut at
    :data:`MESSAGE_CAP`, credentials masked) and the traceback (its last
    :data:`TRACEBACK_CAP` characters, credentials masked)."""

    task_id: str = ""
    message: str = ""
    traceback: str = ""


@dataclass(frozen=True, slots=True)
class GroupDelta:
    """What one worker saw of a group since its last send: ``count`` failures between
    ``first_seen`` and ``last_seen``, the domains they touched, the newest sample."""

    group: str
    exc: str
    message: str
    location: str
    count: int
    first_seen: float
    last_seen: float
    domains: tuple[str, ...] = ()
    sample: Sample = field(default_factory=Sample)


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    """A snapshot's description (its bodies are read one at a time).

    Attributes:
        id: Its id within the group (hex).
        taken_at: When it was taken.
        label: ``ctx.snapshot(label)``'s label; ``""`` for one taken at a failure.
        task_id: The task that was running.
        url: The page's or the last response's URL.
        html_bytes: Bytes of HTML kept (0: none).
        truncated: The HTML was cut at :data:`HTML_CAP`.
        png_bytes: Bytes of the screenshot (0: none).
    """

    id: str
    taken_at: float
    label: str = ""
    task_id: str = ""
    url: str = ""
    html_bytes: int = 0
    truncated: bool = False
    png_bytes: int = 0

    @property
    def bytes(self) -> int:
        """What the snapshot weighs against the type's budget."""
        return self.html_bytes + self.png_bytes


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot with its bodies (what a worker puts, what a reader fetches)."""

    meta: SnapshotMeta
    html: bytes | None = None
    png: bytes | None = None


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    """A group as the backend keeps it (``snapshots``: newest first, filled by
    ``errors.get``; a page leaves them empty)."""

    group: str
    exc: str
    message: str
    location: str
    count: int
    first_seen: float
    last_seen: float
    domains: tuple[str, ...] = ()
    sample: Sample = field(default_factory=Sample)
    snapshots: tuple[SnapshotMeta, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupPage:
    """A page of a type's groups, newest ``last_seen`` first; ``cursor``: pass it for
    the next page (None: this was the last)."""

    items: tuple[ErrorGroup, ...]
    cursor: str | None = None


def merged(old: ErrorGroup | None, delta: GroupDelta) -> ErrorGroup:
    """The group after ``delta`` lands: counts added, the earliest first and the latest
    last seen, domains appended in order up to :data:`MAX_DOMAINS` (the first seen
    stay), the sample replaced unless the stored one is newer. The one rule of
    ``errors.record``."""
    if old is None:
        return ErrorGroup(
            delta.group,
            delta.exc,
            delta.message,
            delta.location,
            delta.count,
            delta.first_seen,
            delta.last_seen,
            _domains((), delta.domains),
            delta.sample,
        )
    newer = delta.last_seen >= old.last_seen
    return replace(
        old,
        count=old.count + delta.count,
        first_seen=min(old.first_seen, delta.first_seen),
        last_seen=max(old.last_seen, delta.last_seen),
        domains=_domains(old.domains, delta.domains),
        sample=delta.sample if newer else old.sample,
    )


def _domains(old: Sequence[str], new: Iterable[str]) -> tuple[str, ...]:
    out = list(old)
    for d in new:
        if len(out) >= MAX_DOMAINS:
            break
        if d not in out:
            out.append(d)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Held:
    """A stored snapshot as the budget rule sees it."""

    group: str
    id: str
    taken_at: float
    bytes: int


def evicted(
    held: Sequence[Held],
    new: Held,
    *,
    per_group: int = SNAPSHOTS_PER_GROUP,
    budget: int = SNAPSHOT_BUDGET,
) -> tuple[bool, list[tuple[str, str]]]:
    """Whether a type keeps ``new`` and which held snapshots (group, id) go to make room:
    the group's oldest while it would hold more than ``per_group``, then the type's
    oldest while all would weigh more than ``budget``. ``new`` heavier than the
    whole budget is refused (nothing goes). Oldest = smallest ``(taken_at, group, id)``.
    The one rule of ``errors.put``."""
    if new.bytes > budget:
        return False, []
    order = sorted(held, key=lambda h: (h.taken_at, h.group, h.id))
    gone: list[tuple[str, str]] = []
    mine = [h for h in order if h.group == new.group]
    while len(mine) + 1 > per_group:
        h = mine.pop(0)
        gone.append((h.group, h.id))
    left = [h for h in order if (h.group, h.id) not in set(gone)]
    total = sum(h.bytes for h in left) + new.bytes
    while total > budget and left:
        h = left.pop(0)
        gone.append((h.group, h.id))
        total -= h.bytes
    return True, gone


def check_group(group: str) -> str:
    """``group`` if it is a group id (16 lower-case hex digits).

    Raises:
        ContractValueError: It is not.
    """
    if not isinstance(group, str) or not _GROUP_ID.fullmatch(group):
        raise ContractValueError(
            f"group must be 16 lower-case hex digits, got {group!r}", field="group"
        )
    return group


def check_snapshot_id(snapshot_id: str) -> str:
    """``snapshot_id`` if it is a snapshot id (1..32 lower-case hex digits).

    Raises:
        ContractValueError: It is not.
    """
    if not isinstance(snapshot_id, str) or not _SNAPSHOT_ID.fullmatch(snapshot_id):
        raise ContractValueError(
            f"snapshot must be 1..32 lower-case hex digits, got {snapshot_id!r}",
            field="snapshot",
        )
    return snapshot_id


def check_limit(limit: int) -> int:
    """``limit`` if it is 1..:data:`MAX_PAGE`.

    Raises:
        ContractValueError: It is not.
    """
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
        raise ContractValueError(f"limit must be 1..{MAX_PAGE}, got {limit!r}", field="limit")
    return limit


def cursor_of(item: ErrorGroup) -> str:
    """The cursor after ``item``: its last seen (``repr``, read back exactly) and id."""
    return f"{item.last_seen!r}:{item.group}"


def parse_cursor(cursor: str | None) -> tuple[float, str] | None:
    """``(last_seen, group)`` of a cursor (None: from the start).

    Raises:
        ContractValueError: It is not a cursor of :func:`cursor_of`.
    """
    if cursor is None or cursor == "":
        return None
    seen, _, group = str(cursor).rpartition(":")
    try:
        at = float(seen)
    except ValueError:
        at = float("nan")
    if at != at or not _GROUP_ID.fullmatch(group):
        raise ContractValueError(f"cursor {cursor!r} is not a cursor of this list", field="cursor")
    return at, group


def expired(seen: float, at: float) -> bool:
    """True if what was last seen (taken) at ``seen`` is gone at ``at``."""
    return seen + TTL_SECONDS <= at
