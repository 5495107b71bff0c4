"""JSON-schema ``pattern`` and ``patternProperties`` checked with RE2, in linear time.

Catalog schemas are written by any worker host, so the master never runs their
regular expressions on Python's backtracking engine: ``^(a+)+$`` against 27 bytes
would hold the event loop for seconds. RE2 (google-re2) matches in time linear in
the input. A pattern RE2 cannot compile (back-references, look-arounds) is not
checked by the master — the worker still validates every payload with the plugin's
own model before ``run_one``, so nothing unchecked runs — and is logged once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from typing import Any

import re2  # type: ignore[import-untyped]
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

log = logging.getLogger("fleet.master")

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any | None:
    """The RE2 program of ``pattern``, or None if RE2 cannot compile it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except (re2.error, TypeError, ValueError) as exc:
        log.warning(
            "schema pattern %r is not checked by the master (RE2 cannot compile it: %s); "
            "workers still validate payloads",
            pattern[:200],
            exc,
        )
        return None


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not isinstance(instance, str) or not isinstance(pattern, str):
        return
    program = compiled(pattern)
    if program is not None and program.search(instance) is None:
        yield ValidationError(f"{instance[:100]!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not isinstance(instance, dict) or not isinstance(patterns, dict):
        return
    for pattern, subschema in patterns.items():
        program = compiled(pattern) if isinstance(pattern, str) else None
        if program is None:
            continue
        for key, value in instance.items():
            if isinstance(key, str) and program.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


#: Draft 2020-12 with the two regex keywords on RE2.
SafeValidator: Any = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties}
)
