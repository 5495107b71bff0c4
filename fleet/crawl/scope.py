"""Which links a crawl follows: one pure rule (:func:`Scope.verdict`).

A link is followed when its host is one of the crawl's hosts (the seeds' hosts; the
page's own host when the crawl names none), it matches an ``include`` pattern (if
any are given), it matches no ``exclude`` pattern, and it is no deeper than
``max_depth``. Patterns are RE2 (linear time: a page's links cannot hang a worker)
searched anywhere in the canonical URL.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import re2  # type: ignore[import-untyped]

from fleet.core.errors import ContractValueError
from fleet.crawl.urls import host_of

Verdict = Literal["follow", "other_site", "excluded", "too_deep"]


@functools.lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...]) -> tuple[Any, ...]:
    out = []
    for p in patterns:
        try:
            out.append(re2.compile(p))
        except re2.error as e:
            raise ContractValueError(
                f"crawl pattern {p!r} does not compile: {e}", field="include"
            ) from None
    return tuple(out)


def check_patterns(patterns: Iterable[str], *, field: str) -> tuple[str, ...]:
    """The patterns as a tuple, each compiled once to refuse a bad one early.

    Raises:
        ContractValueError: naming ``field``.
    """
    if isinstance(patterns, str):
        raise ContractValueError(f"{field} must be a list of patterns, not a string", field=field)
    found = tuple(patterns)
    for p in found:
        if not isinstance(p, str) or not p:
            raise ContractValueError(f"{field} holds {p!r}: each must be a pattern", field=field)
    try:
        _compiled(found)
    except ContractValueError as e:
        raise ContractValueError(str(e), field=field) from None
    return found


@dataclass(frozen=True)
class Scope:
    """A crawl's scope.

    Attributes:
        hosts: The ``host:port`` of the pages followed (empty: the linking page's own).
        include: Patterns one of which a followed URL must match (empty: any).
        exclude: Patterns no followed URL may match.
        max_depth: The deepest page followed (a seed is depth 0; None: no limit).
    """

    hosts: frozenset[str] = frozenset()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_depth: int | None = None

    def verdict(self, url: str, depth: int, *, page_host: str) -> Verdict:
        """Whether to follow the canonical ``url`` found ``depth`` links from a seed
        on a page of ``page_host``."""
        host = host_of(url)
        if host not in self.hosts if self.hosts else host != page_host:
            return "other_site"
        if self.max_depth is not None and depth > self.max_depth:
            return "too_deep"
        if self.include and not _any(self.include, url):
            return "excluded"
        if self.exclude and _any(self.exclude, url):
            return "excluded"
        return "follow"


def _any(patterns: Sequence[str], url: str) -> bool:
    return any(r.search(url) for r in _compiled(tuple(patterns)))
