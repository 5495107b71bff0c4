"""What both engines of the ``meters`` capability share beside the rule itself
(:func:`fleet.core.meters.added`): the checks of the arguments, when an hour scope is
gone, how a stored value reads (``lua/meters.lua`` reads it the same way) and the
bounds of a prefix's range of names.

- A batch is checked whole before anything is written: scopes are 1-1024 printable
  characters (an ``hour:`` scope ends in its hour start, :func:`~fleet.core.meters.hour_of`),
  meter names 1-256 printable characters, amounts finite numbers 0..1e15
  (:func:`~fleet.core.meters.check_amount`). A scope whose row is empty is left out
  (nothing is added to it, so it is not created).
- An hour scope is kept until its hour start plus
  :data:`~fleet.core.meters.HOUR_KEEP_SECONDS` (the backend's now): from then on a read
  leaves it out, an add to it is dropped, and each add deletes up to
  :data:`PRUNE_PER_ADD` of those gone.
- A stored value that is not a finite number reads as 0 (so it never fails a read, and
  the next add to it starts over from the amount).
"""

from __future__ import annotations

import math
from typing import Final

from fleet.core.errors import ContractValueError
from fleet.core.meters import HOUR_KEEP_SECONDS, MeterBatch, check_amount, hour_of

#: Largest page of :meth:`Meters.scopes`.
MAX_PAGE: Final = 1000
#: Most hour scopes gone past their keep that one add deletes (bounded work per add).
PRUNE_PER_ADD: Final = 20
MAX_SCOPE_CHARS: Final = 1024
MAX_METER_CHARS: Final = 256


def _text(value: object, field: str, longest: int, what: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= longest or not value.isprintable():
        raise ContractValueError(
            f"{what} is 1-{longest} printable characters; got {value!r}"[:300], field=field
        )
    return value


def check_scope(scope: object) -> str:
    """A scope's name: 1-1024 printable characters; ``hour:`` ones end in their hour.

    Raises:
        ContractValueError: naming ``scope``.
    """
    name = _text(scope, "scope", MAX_SCOPE_CHARS, "a scope")
    if name.startswith("hour:") and hour_of(name) is None:
        raise ContractValueError(
            f"an hour scope is hour:<type>:<hour start>; got {name!r}"[:300], field="scope"
        )
    return name


def check_meter(meter: object) -> str:
    """A stored meter's name (any of Fleet's or a plugin's): 1-256 printable characters."""
    return _text(meter, "meter", MAX_METER_CHARS, "a meter name")


def check_batch(batch: object) -> dict[str, list[tuple[str, float]]]:
    """A batch's sums, checked: by scope, its meters sorted by name (the order
    :func:`~fleet.core.meters.added` takes them in); empty rows left out.

    Raises:
        ContractValueError: not a :class:`MeterBatch`, or a scope, meter or amount that
            is not one.
    """
    if not isinstance(batch, MeterBatch) or not isinstance(batch.sums, dict):
        raise ContractValueError("meters are added as a MeterBatch", field="batch")
    out: dict[str, list[tuple[str, float]]] = {}
    for scope, row in batch.sums.items():
        name = check_scope(scope)
        if not isinstance(row, dict):
            raise ContractValueError(f"the sums of {name!r} are meter -> amount", field="batch")
        items = sorted((check_meter(m), check_amount(a)) for m, a in row.items())
        if items:
            out[name] = items
    return out


def expires(scope: str) -> float | None:
    """When an hour scope is gone (None: not an hour scope, it is kept)."""
    start = hour_of(scope)
    return None if start is None else float(start + HOUR_KEEP_SECONDS)


def gone(scope: str, now: float) -> bool:
    """An hour scope past its keep at ``now``."""
    end = expires(scope)
    return end is not None and end <= now


def check_scopes(scopes: object) -> list[str]:
    """The scopes of a get: a sequence of names (not one string), each checked."""
    if isinstance(scopes, str | bytes) or not isinstance(scopes, list | tuple):
        raise ContractValueError("get takes a sequence of scopes", field="scopes")
    return list(dict.fromkeys(check_scope(s) for s in scopes))


def check_page(prefix: object, after: object, limit: object) -> tuple[str, str, int]:
    """The arguments of :meth:`Meters.scopes`: the prefix, ``after`` ('' for none) and
    the limit (1..:data:`MAX_PAGE`)."""
    if not isinstance(prefix, str):
        raise ContractValueError(f"a prefix is text; got {prefix!r}", field="prefix")
    if after is not None and not isinstance(after, str):
        raise ContractValueError(f"after is a scope or None; got {after!r}", field="after")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ContractValueError(f"a page holds 1..{MAX_PAGE} scopes; got {limit!r}", field="limit")
    return prefix, after or "", limit


def check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str):
        raise ContractValueError(f"a prefix is text; got {prefix!r}", field="prefix")
    return prefix


def prefix_end(prefix: str) -> str | None:
    """The first name past every name starting with ``prefix`` (None: no end, the
    prefix is empty or all U+10FFFF). Names compare by code point, as SQLite compares
    UTF-8 text and Redis compares bytes."""
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < 0x10FFFF:
            following = last + 1
            if 0xD800 <= following <= 0xDFFF:  # not encodable: past the surrogates
                following = 0xE000
            return "".join(chars) + chr(following)
    return None


def stored_value(value: object) -> float:
    """A stored meter's value: a finite number, else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    try:
        x = float(value)
    except OverflowError:
        return 0.0
    return x if math.isfinite(x) else 0.0
