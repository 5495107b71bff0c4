"""What a JSON body may hold before anything parses it for a route: at most
``MAX_DEPTH`` levels of nesting, and no unpaired UTF-16 surrogate escape (``"\\ud800"``
is valid JSON text but no valid string: it cannot be stored, encoded or logged).

Pure functions over the raw bytes, linear in their size, called by the body-limit
middleware on every body it buffers: a refused body is never parsed by a route, never
stored, and so never breaks a later read.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

#: The deepest nesting a body may have (arrays and objects count alike).
MAX_DEPTH = 64

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
# '[' and '{' -> 2, ']' and '}' -> 0 (then minus one: +1 / -1).
_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")

Loc = list[str | int]


def depth_of(body: bytes) -> int:
    """The deepest nesting of the JSON text ``body`` (0 for a scalar)."""
    skeleton = _STRING.sub(b"", body).translate(None, _BRACKETS)
    if not skeleton:
        return 0
    return max(accumulate(b - 1 for b in skeleton.translate(_STEP)))


def _find_surrogate(value: Any, loc: Loc) -> Loc | None:
    stack: list[tuple[Any, Loc]] = [(value, loc)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return where
        elif isinstance(item, dict):
            for k, v in item.items():
                try:
                    k.encode("utf-8")
                except UnicodeEncodeError:
                    return where
                stack.append((v, [*where, k]))
        elif isinstance(item, list):
            stack.extend((v, [*where, i]) for i, v in enumerate(item))
    return None


def json_problem(body: bytes, max_depth: int = MAX_DEPTH) -> tuple[Loc, str] | None:
    """Why ``body`` must be refused (where, and a message), or None. Text that is
    not JSON at all is left to the route (its own 422)."""
    if not body or body.lstrip()[:1] not in (b"{", b"["):
        return None
    depth = depth_of(body)
    if depth > max_depth:
        return ["body"], f"JSON nested {depth} levels deep; at most {max_depth} are accepted"
    if _SURROGATE.search(body) is None:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    where = _find_surrogate(value, ["body"])
    if where is None:
        return None
    return where, "text with an unpaired UTF-16 surrogate (such as \\ud800) is not accepted"
