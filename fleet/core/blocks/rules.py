"""A type's own block rules (``block_rules`` in its config): :class:`BlockRule`.

A rule names what it matches (a status, a header, a body pattern: every condition given
must match) and the verdict it gives. Rules are tried before every other detector, so a
site's quirks win: a 403 that means "log in" marked ``ok``, a 200 page that says "come
back later" marked ``throttled``. Patterns are RE2 (linear time on any body: a config
pattern never hangs a worker) and are compiled when the rule is validated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from fleet.core.blocks.detectors.captchas import sitekey
from fleet.core.blocks.detectors.common import parse_retry_after
from fleet.core.blocks.seen import Seen
from fleet.core.blocks.verdicts import OK, Verdict, VerdictKind

_Status = Annotated[int, Field(ge=100, le=599)]


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> Any:
    """The RE2 program of ``pattern`` (cached: validation and the rule share it)."""
    import re2  # type: ignore[import-untyped]  # only a worker or master with rules needs it

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except (re2.error, TypeError, ValueError) as exc:
        raise ValueError(f"not an RE2 pattern: {exc}") from None


class BlockRule(BaseModel):
    """One block rule of a type's config.

    Attributes:
        kind: The verdict's kind; ``ok`` marks a matching response ordinary.
        vendor: The verdict's vendor.
        status: The statuses it matches (None: any).
        header: A header (any case) the response must carry.
        header_pattern: An RE2 pattern searched in that header's value.
        body: An RE2 pattern searched in the body's first 64 KiB.
        detail: The verdict's detail (default: names the rule's conditions).
        retry_after: ``throttled``: the seconds to wait (default: the ``Retry-After``
            header's).
    """

    model_config = ConfigDict(extra="forbid")

    kind: VerdictKind
    vendor: str = Field("generic", min_length=1, max_length=40)
    status: list[_Status] | None = None
    header: str | None = Field(None, min_length=1, max_length=200)
    header_pattern: str | None = None
    body: str | None = None
    detail: str | None = Field(None, max_length=200)
    retry_after: float | None = Field(None, ge=0)

    _header_re: Any = PrivateAttr(None)
    _body_re: Any = PrivateAttr(None)

    @field_validator("header")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return value.strip().lower() if value is not None else None

    @field_validator("header_pattern", "body")
    @classmethod
    def _re2(cls, value: str | None) -> str | None:
        if value is not None:
            _compile(value)
        return value

    @model_validator(mode="after")
    def _conditions(self) -> BlockRule:
        if self.status is None and self.header is None and self.body is None:
            raise ValueError("a block rule needs at least one of status, header, body")
        if self.header_pattern is not None and self.header is None:
            raise ValueError("header_pattern needs header (the header it is searched in)")
        self._header_re = _compile(self.header_pattern) if self.header_pattern else None
        self._body_re = _compile(self.body) if self.body is not None else None
        return self

    def matches(self, seen: Seen) -> bool:
        """Whether every condition of the rule holds for ``seen`` (cheap ones first)."""
        if self.status is not None and seen.status not in self.status:
            return False
        if self.header is not None:
            value = seen.headers.get(self.header)
            if value is None:
                return False
            if self._header_re is not None and self._header_re.search(value) is None:
                return False
        return self._body_re is None or self._body_re.search(seen.body) is not None

    def verdict(self, seen: Seen) -> Verdict:
        """The verdict this rule gives ``seen`` (which it matches)."""
        if self.kind == "ok":
            return Verdict("ok", None, self.detail) if self.detail else OK
        retry = self.retry_after
        if self.kind == "throttled" and retry is None:
            retry = parse_retry_after(seen.headers.get("retry-after"))
        key = sitekey(seen.body) if self.kind in ("captcha", "challenge") else None
        return Verdict(self.kind, self.vendor, self.detail or self._describe(), retry, key)

    def _describe(self) -> str:
        said = []
        if self.status is not None:
            said.append("status " + "/".join(map(str, self.status)))
        if self.header is not None:
            pattern = f" ~ /{self.header_pattern}/" if self.header_pattern else ""
            said.append(f"header {self.header}{pattern}")
        if self.body is not None:
            said.append(f"body ~ /{self.body}/")
        return "block rule: " + ", ".join(said)


def rule_detector(rule: BlockRule) -> Callable[[Seen], Verdict | None]:
    """A detector of one rule: its verdict when the rule matches, else None."""

    def detect(seen: Seen) -> Verdict | None:
        return rule.verdict(seen) if rule.matches(seen) else None

    detect.__qualname__ = detect.__name__ = f"rule:{rule._describe()}"
    return detect


def rules_detector(rules: Sequence[BlockRule]) -> Callable[[Seen], Verdict | None]:
    """One detector of a rule list: the first matching rule's verdict, else None."""
    ordered = tuple(rules)

    def detect(seen: Seen) -> Verdict | None:
        for rule in ordered:
            if rule.matches(seen):
                return rule.verdict(seen)
        return None

    detect.__qualname__ = detect.__name__ = f"block_rules[{len(ordered)}]"
    return detect
