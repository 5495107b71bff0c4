"""The route over a type's history (services/history.py): counts and run times by
minute or hour, the same whichever master answers."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from fleet.backends.base import Backend
from fleet.master.http.auth import type_read_access
from fleet.master.http.models import TypeName, error_responses
from fleet.master.services import history
from fleet.master.state import backend_dependency

router = APIRouter(tags=["history"], responses=error_responses(401, 403, 404, 503))


class HistoryPointOut(BaseModel):
    """What happened to a type's tasks from ``t`` for ``step_seconds``."""

    t: int = Field(description="The point's start (Unix seconds).")
    submitted: int
    completed: int
    failed: int = Field(description="Failed attempts that were retried.")
    dead: int = Field(description="Tasks moved to the dead letters.")
    expired: int = Field(description="Tasks dropped at reserve because their ttl passed.")
    throttled: int
    cancelled: int
    timed_out: int = Field(description="Attempts cancelled past their timeout_seconds.")
    p50: float | None = Field(description="Median run time (seconds); null without runs.")
    p95: float | None = Field(description="95th percentile run time (seconds).")


class QuantileOut(BaseModel):
    """A run-time percentile: an estimate inside the histogram bucket that holds it."""

    value: float = Field(description="Interpolated inside the bucket (seconds).")
    lower: float = Field(description="The bucket's lower bound: the true value is above.")
    upper: float | None = Field(description="Its upper bound (null: the open last bucket).")
    exact: bool = Field(description="False: an estimate from the bucket.")


class HistorySummaryOut(BaseModel):
    """The whole window: every counter summed, and the figures read off it."""

    counts: dict[str, int]
    attempts: int = Field(description="completed + failed + dead: each attempt once.")
    failure_rate: float | None = Field(description="(failed + dead) / attempts.")
    p50: QuantileOut | None
    p95: QuantileOut | None
    runs: int = Field(description="Run times the window's histogram holds.")


class HistoryOut(BaseModel):
    """A window of a type's history, oldest point first, the last one still running;
    ``summary`` the window whole (the same data gives the same summary in any window)."""

    type: str
    window: str
    step_seconds: int
    points: list[HistoryPointOut]
    summary: HistorySummaryOut | None = None


@router.get(
    "/automations/{automation_type}/history",
    summary="A type's history",
    response_model=HistoryOut,
)
async def type_history(
    automation_type: TypeName,
    window: Literal["1h", "24h", "30d"] = Query(
        "1h", description="1h: by minute; 24h: by 15 minutes; 30d: by hour."
    ),
    _: Any = Depends(type_read_access),
    backend: Backend = Depends(backend_dependency),
) -> HistoryOut:
    """Counts (submitted, completed, failed, dead, expired, throttled, cancelled, timed
    out) and run-time p50/p95 of every point of the window, kept in the backend."""
    series = await history.read(backend, automation_type, window)
    return HistoryOut(
        type=series.automation_type,
        window=series.window,
        step_seconds=series.step_seconds,
        points=[HistoryPointOut(**asdict(p)) for p in series.points],
        summary=None if series.summary is None else HistorySummaryOut(**asdict(series.summary)),
    )
