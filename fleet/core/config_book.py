"""What a worker's desired config is made of (docs/protocol.md "Config and
generations"): the type-wide partial config and each worker's override, each
stored with the generation it was set at.

The master stores a PATCH once, at the type's next generation, whatever the
number of workers; each worker merges the two layers itself and writes its own
desired config (``wkr:<type>:<id>:config``/``gen``). The rules of that merge are
here, as pure functions both sides share.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet.core.config import merge_config


@dataclass(frozen=True, slots=True)
class ConfigBook:
    """The stored partial configs of one type, with their generations.

    Attributes:
        type_wide: The type-wide partial config (``{}`` when none).
        type_gen: The generation it was stored at (0: never through a PATCH).
        overrides: Per worker asked for, its override and the generation it was
            stored at; a worker without one is absent.
    """

    type_wide: dict[str, Any] = field(default_factory=dict)
    type_gen: int = 0
    overrides: Mapping[str, tuple[dict[str, Any], int]] = field(default_factory=dict)

    def override(self, worker_id: str) -> dict[str, Any]:
        """The worker's override (``{}`` when it has none)."""
        found = self.overrides.get(worker_id)
        return {} if found is None else found[0]

    def gen(self, worker_id: str) -> int:
        """The generation of the worker's desired config: the newer of its two layers."""
        found = self.overrides.get(worker_id)
        return max(self.type_gen, 0 if found is None else found[1])

    def merged(self, worker_id: str) -> dict[str, Any]:
        """The worker's desired config: type-wide, then its override on top."""
        return merge_config(self.type_wide, self.override(worker_id))

    def distinct(self, worker_ids: list[str]) -> dict[str, dict[str, Any]]:
        """One worker per distinct merged config (the first in ``worker_ids``):
        1,000 workers without overrides are one config to validate, not 1,000."""
        seen: dict[str, str] = {}
        out: dict[str, dict[str, Any]] = {}
        for wid in worker_ids:
            merged = self.merged(wid)
            key = json.dumps(merged, sort_keys=True, default=repr)
            if key not in seen:
                seen[key] = wid
                out[wid] = merged
        return out


def desired_of(
    book: ConfigBook, worker_id: str, stored: dict[str, Any] | None, stored_gen: int
) -> tuple[dict[str, Any] | None, int]:
    """The desired config of a worker and its generation, as the API shows it: what the
    worker wrote (``stored``, ``stored_gen``) unless the book holds a newer layer it has
    not merged yet (the master shows the change at once, the worker catches up)."""
    gen = book.gen(worker_id)
    if gen > stored_gen:
        return book.merged(worker_id), gen
    return stored, stored_gen
