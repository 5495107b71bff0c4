"""What a detector reads of one response: :class:`Seen`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

#: How much of a body detectors read: block and challenge pages are small, and every
#: vendor's markers sit in the first kilobytes; a big page is never scanned whole.
MAX_BODY: Final = 64 * 1024


_NONE: Final[frozenset[str]] = frozenset()


class _MultiItems(Protocol):
    def multi_items(self) -> list[tuple[str, str]]: ...


#: What :meth:`Seen.of` takes as headers: a mapping, an ``httpx.Headers`` (every value
#: of a repeated header), or (name, value) pairs.
HeadersLike = Mapping[str, str] | _MultiItems | Iterable[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Seen:
    """One response as the detectors read it.

    Attributes:
        status: The HTTP status.
        headers: Lower-case names; a repeated header's values joined with ``", "``.
        cookies: The names of the cookies the response's ``set-cookie`` headers set.
        body: The first :data:`MAX_BODY` characters of the body.
        url: The response's URL (``""``: unknown).
    """

    status: int
    headers: Mapping[str, str]
    cookies: frozenset[str]
    body: str
    url: str = ""

    @classmethod
    def of(
        cls, status: int, headers: HeadersLike | None, body: str | bytes | None, url: str = ""
    ) -> Seen:
        """A :class:`Seen` of a response's parts; ``body`` may be bytes (only its first
        :data:`MAX_BODY` bytes are decoded, as UTF-8, an undecodable byte replaced)."""
        merged: dict[str, str] = {}
        set_cookies: list[str] = []
        for name, value in _pairs(headers):
            key = name.lower()
            if key == "set-cookie":
                set_cookies.append(value)
            if key in merged:
                merged[key] += ", " + value
            else:
                merged[key] = value
        cookies = (
            frozenset(n for sc in set_cookies for n in cookie_names(sc)) if set_cookies else _NONE
        )
        return cls(status, merged, cookies, _text(body), url)

    def header(self, name: str) -> str:
        """The value of the (lower-case) header ``name``, ``""`` when absent."""
        return self.headers.get(name, "")


def cookie_names(set_cookie: str) -> list[str]:
    """The cookie names one ``set-cookie`` value sets. Several cookies joined with ``,``
    (as some clients fold them) are all found; the comma inside an ``Expires`` date is
    not mistaken for one, because a date's next piece has no ``=`` before ``;``."""
    names = []
    for piece in set_cookie.split(","):
        head = piece.split(";", 1)[0]
        name, eq, _ = head.partition("=")
        name = name.strip()
        if eq and name and " " not in name:
            names.append(name)
    return names


def _pairs(headers: Any) -> Iterable[tuple[str, str]]:
    if headers is None:
        return ()
    multi = getattr(headers, "multi_items", None)
    if multi is not None:  # httpx.Headers: several set-cookie headers stay apart
        return multi()  # type: ignore[no-any-return]
    if isinstance(headers, Mapping):
        return headers.items()
    return headers  # type: ignore[no-any-return]


def _text(body: str | bytes | bytearray | memoryview | None) -> str:
    if body is None:
        return ""
    if isinstance(body, str):
        return body[:MAX_BODY]
    return bytes(body[:MAX_BODY]).decode("utf-8", "replace")
