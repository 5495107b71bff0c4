"""Monitors: is a run's data any good? (docs/monitors.md)

A monitor is a threshold on a figure of a run: its items (what its tasks emitted),
its error and duplicate rates, how many of its items validate against their
``Output`` model, how often a field of them is null, how long it has run, how long
since it last emitted. Declared per type (config ``monitors``) or per run
(``monitors`` on create); one pure rule (:func:`evaluate`) decides each one's state,
``ok``, ``firing`` or ``resolved`` (it fired, and no longer does), with the numbers
that decided it.

- Rates are checked live once their sample is :data:`MIN_SAMPLE` (and at the end
  whatever it is): three bad items of the first three are no trend yet.
- ``min_items`` is checked when the run has ended and its workers' last meters have
  landed: a running run may still emit.
- ``max_duration_seconds`` and ``no_output_for_seconds`` are checked while it runs.

The figures come from the run's counters and from meters every worker adds as its
tasks emit (``outputs``, ``outputs_valid``, ``nulls:<field>``: fleet/core/metering.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: Items (or ended tasks, or submits) a rate needs before it is checked live.
MIN_SAMPLE = 20

State = Literal["ok", "firing", "resolved"]
#: A share, 0 to 1.
Rate = Annotated[float, Field(ge=0, le=1)]


class Monitors(BaseModel):
    """The monitors of a type or a run; a field left None checks nothing.

    Args:
        min_items: At least this many items when the run ends.
        max_error_rate: At most this share of its ended tasks dead (0..1).
        max_duplicate_rate: At most this share of its submits refused as duplicates.
        min_schema_valid_rate: At least this share of its items validating against
            their type's ``Output`` model.
        max_null_rate: Per field of the items: at most this share null.
        max_duration_seconds: The run takes at most this long.
        no_output_for_seconds: A running run emits something at least this often.
    """

    model_config = ConfigDict(extra="forbid")

    min_items: int | None = Field(default=None, ge=0)
    max_error_rate: float | None = Field(default=None, ge=0, le=1)
    max_duplicate_rate: float | None = Field(default=None, ge=0, le=1)
    min_schema_valid_rate: float | None = Field(default=None, ge=0, le=1)
    max_null_rate: dict[Annotated[str, Field(min_length=1, max_length=200)], Rate] = Field(
        default_factory=dict, max_length=100
    )
    max_duration_seconds: float | None = Field(default=None, gt=0, le=366 * 86400)
    no_output_for_seconds: float | None = Field(default=None, gt=0, le=366 * 86400)

    def names(self) -> list[str]:
        """The monitors it declares: ``min_items``, ``max_null_rate:price``..."""
        out = [
            name
            for name in (
                "min_items",
                "max_error_rate",
                "max_duplicate_rate",
                "min_schema_valid_rate",
                "max_duration_seconds",
                "no_output_for_seconds",
            )
            if getattr(self, name) is not None
        ]
        return out + [f"max_null_rate:{f}" for f in sorted(self.max_null_rate)]

    @property
    def empty(self) -> bool:
        return not self.names()


@dataclass(frozen=True)
class Figures:
    """What the monitors of one run read, at one moment."""

    counters: Mapping[str, int]
    meters: Mapping[str, float]
    created_at: float
    finished_at: float | None
    ended: bool
    #: When the run's ``outputs`` last grew (its creation before any).
    output_at: float
    #: The run ended and its workers' last meters have landed (what ``min_items``
    #: waits for: an item counted a second late must not make it fire).
    settled: bool = False


@dataclass(frozen=True)
class MonitorState:
    """One monitor's verdict: its state, the value that decided it, the threshold,
    and since when it is in that state."""

    name: str
    state: State
    value: float | None
    threshold: float
    since: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "monitor": self.name,
            "state": self.state,
            "value": self.value,
            "threshold": self.threshold,
            "since": self.since,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MonitorState:
        state = d.get("state")
        value = d.get("value")
        return cls(
            name=str(d.get("monitor", "")),
            state=state if state in ("ok", "firing", "resolved") else "ok",
            value=None if value is None else float(value),
            threshold=float(d.get("threshold", 0.0)),
            since=float(d.get("since", 0.0)),
        )


def _rate(part: float, whole: float, ended: bool) -> float | None:
    """``part / whole``, or None while ``whole`` is under the sample a live check needs."""
    if whole <= 0 or (not ended and whole < MIN_SAMPLE):
        return None
    return part / whole


def measure(name: str, spec: Monitors, f: Figures, now: float) -> tuple[float | None, float, bool]:
    """One monitor's value, its threshold, and whether it fires (a None value: not
    measurable yet, so it does not fire)."""
    c, m = f.counters, f.meters
    outputs = float(m.get("outputs", 0))
    if name == "min_items":
        threshold = float(spec.min_items or 0)
        return outputs, threshold, f.settled and outputs < threshold
    if name == "max_error_rate":
        dead = float(c.get("dead", 0))
        value = _rate(dead, dead + c.get("done", 0), f.ended)
        return _above(value, spec.max_error_rate)
    if name == "max_duplicate_rate":
        dups = float(c.get("duplicates", 0))
        value = _rate(dups, dups + c.get("submitted", 0), f.ended)
        return _above(value, spec.max_duplicate_rate)
    if name == "min_schema_valid_rate":
        value = _rate(float(m.get("outputs_valid", 0)), outputs, f.ended)
        threshold = float(spec.min_schema_valid_rate or 0)
        return value, threshold, value is not None and value < threshold
    if name.startswith("max_null_rate:"):
        field = name.split(":", 1)[1]
        value = _rate(float(m.get(f"nulls:{field}", 0)), outputs, f.ended)
        return _above(value, spec.max_null_rate.get(field))
    if name == "max_duration_seconds":
        value = (f.finished_at if f.finished_at is not None else now) - f.created_at
        return _above(value, spec.max_duration_seconds)
    if name == "no_output_for_seconds":
        threshold = float(spec.no_output_for_seconds or 0)
        if f.ended:
            return None, threshold, False
        value = now - f.output_at
        return value, threshold, value > threshold
    raise ValueError(f"unknown monitor {name!r}")


def _above(value: float | None, threshold: float | None) -> tuple[float | None, float, bool]:
    limit = float(threshold or 0)
    return value, limit, value is not None and value > limit


def evaluate(
    spec: Monitors, figures: Figures, now: float, before: Mapping[str, MonitorState]
) -> list[MonitorState]:
    """Each monitor's state now, from the figures and its state before: one that
    fires is ``firing`` (since it started firing); one that fired and no longer does
    is ``resolved`` (since then), and stays so; else ``ok``."""
    out = []
    for name in spec.names():
        value, threshold, fires = measure(name, spec, figures, now)
        prev = before.get(name)
        prev_state = prev.state if prev is not None else "ok"
        if fires:
            state: State = "firing"
        elif prev_state in ("firing", "resolved"):
            state = "resolved"
        else:
            state = "ok"
        since = prev.since if prev is not None and prev_state == state else now
        out.append(MonitorState(name, state, value, threshold, since))
    return out


def merged(specs: list[Monitors]) -> Monitors:
    """One spec of several (a run's own and its types'): for each monitor the
    strictest threshold."""
    out: dict[str, Any] = {}
    nulls: dict[str, float] = {}
    for spec in specs:
        for name in ("min_items", "min_schema_valid_rate"):
            value = getattr(spec, name)
            if value is not None:
                out[name] = max(value, out.get(name, value))
        for name in (
            "max_error_rate",
            "max_duplicate_rate",
            "max_duration_seconds",
            "no_output_for_seconds",
        ):
            value = getattr(spec, name)
            if value is not None:
                out[name] = min(value, out.get(name, value))
        for field, rate in spec.max_null_rate.items():
            nulls[field] = min(rate, nulls.get(field, rate))
    return Monitors(**out, max_null_rate=nulls)
