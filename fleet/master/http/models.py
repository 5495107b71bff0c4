"""Request and response bodies of the REST API (they shape the OpenAPI document)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fleet.core.capabilities.browse import MAX_SELECTION
from fleet.core.flow import MAX_GROUP_LEN, check_group
from fleet.core.runs import MAX_UNIQUE_KEY_LEN
from fleet.core.submission import check_submitted_id

#: Wire names (types, pools) as ``fleet.core.contracts.check_name`` accepts them.
#: Checked at the door so that no glob character ever reaches a backend that
#: matches key patterns (a type named ``*`` must not purge every type).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
TypeName = Annotated[str, Path(pattern=NAME_PATTERN, description="An automation type.")]
PoolName = Annotated[str, Path(pattern=NAME_PATTERN, description="A pool name.")]

#: Most tasks one batch submit may carry (rest-api.md).
MAX_BATCH = 10_000
#: Longest delay accepted for a task (a year): beyond that it is surely a unit mistake.
MAX_DELAY_SECONDS = 366 * 86_400.0


class SubmitBody(BaseModel):
    """One task to submit; ``payload`` is validated against the type's ``TaskPayload``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    payload: Any = Field(description="The task payload (JSON), validated against TaskPayload.")
    task_id: str | None = Field(default=None, min_length=1, max_length=200)
    priority: int = Field(default=0, ge=-1_000_000, le=1_000_000)
    max_attempts: int | None = Field(default=None, ge=1, le=1_000)
    ttl_seconds: float | None = Field(default=None, gt=0, le=MAX_DELAY_SECONDS)
    delay_seconds: float | None = Field(default=None, ge=0, le=MAX_DELAY_SECONDS)
    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        le=MAX_DELAY_SECONDS,
        description="Time limit of one run_one of this task (seconds; wins over the "
        "config's timeout_seconds): past it the attempt fails with TaskTimeout.",
    )
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=500)
    group: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_GROUP_LEN,
        description="Flow-control group (a domain, an API key, a tenant): its limits apply.",
    )
    run: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The run the task joins (POST /api/v1/runs); it must be running.",
    )
    unique_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_UNIQUE_KEY_LEN,
        description="Within the run, a key submitted before makes this a duplicate that "
        "is not queued (duplicate: true). Needs run.",
    )

    @model_validator(mode="after")
    def _unique_needs_run(self) -> SubmitBody:
        if self.unique_key is not None and self.run is None:
            raise ValueError("unique_key needs a run")
        return self

    @field_validator("group")
    @classmethod
    def _group(cls, value: str | None) -> str | None:
        return None if value is None else check_group(value)

    @field_validator("timeout_seconds", mode="before")
    @classmethod
    def _timeout(cls, value: Any) -> Any:
        if isinstance(value, bool):  # JSON true would pass as 1 second
            raise ValueError("timeout_seconds must be a number of seconds, not a boolean")
        return value

    @field_validator("task_id")
    @classmethod
    def _task_id(cls, value: str | None) -> str | None:
        return None if value is None else check_submitted_id(value, field="task_id", max_len=200)

    @field_validator("idempotency_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return check_submitted_id(value, field="idempotency_key", max_len=500)


class SubmitResult(BaseModel):
    """The outcome of one submit."""

    task_id: str
    queued: bool
    duplicate: bool


class RunBody(BaseModel):
    """A run to create: an optional name, and the task submitted once when it ends done."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    on_complete: dict[str, Any] | None = Field(
        default=None,
        description="{'type': <automation type>, 'payload': {...}}: submitted once when the "
        "run ends done, with payload.run = {run_id, state, counters}.",
    )


class BatchBody(BaseModel):
    """Up to 10,000 tasks, each validated on its own."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[Any] = Field(max_length=MAX_BATCH, description="Objects shaped like SubmitBody.")


class BatchItemError(BaseModel):
    """Why one task of a batch was refused."""

    error: str
    detail: list[dict[str, Any]] = Field(default_factory=list)


class BatchResult(BaseModel):
    """One result per submitted task, in order."""

    results: list[SubmitResult | BatchItemError]


class ReplayBody(BaseModel):
    """Which dead tasks to replay: by id, else the ``n`` oldest (all if neither)."""

    model_config = ConfigDict(extra="forbid")

    n: int | None = Field(default=None, ge=1, le=1_000_000)
    task_ids: list[str] | None = Field(default=None, max_length=MAX_BATCH)


class PopBody(BaseModel):
    """How many stream entries to pop."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(default=1, ge=1, le=10_000)


class ErrorBody(BaseModel):
    """Every non-validation error: ``{"detail": "..."}``."""

    detail: str


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error codes a router's routes answer."""
    words = {
        400: "The body is not JSON text (e.g. not UTF-8)",
        401: "Missing or unknown token",
        403: "The token lacks the scope",
        404: "Unknown automation type, task, worker or pool",
        409: "The type has no task queue",
        413: "Request body too large",
        501: "Not supported here (a missing extra, an unsupported backend)",
        503: "The backend is unavailable",
    }
    return {code: {"model": ErrorBody, "description": words[code]} for code in codes}


# ------------------------------------------------------------ the task browser
# A page of a type's tasks by state, and a selection of dead letters to replay or delete.
class TaskItem(BaseModel):
    """One task of a page (``GET /automations/{type}/tasks``)."""

    id: str
    state: Literal["pending", "scheduled", "processing", "dead", "done"]
    priority: int
    tier: Literal["high", "normal", "low"]
    group: str | None = Field(description="Its flow-control group, if any.")
    run: str | None = Field(description="The run it belongs to, if any.")
    attempt: int = Field(description="Attempts charged so far.")
    enqueued_at: float = Field(description="When it was first submitted (Unix seconds).")
    ready_at: float | None = Field(description="When a scheduled task becomes pending.")
    deadline: float | None = Field(description="A processing task's lease deadline.")
    last_error: str | None = Field(description="The last failure (credentials masked).")
    failed_at: float | None = Field(description="When it last failed.")
    finished_at: float | None = Field(default=None, description="When a done task finished.")


class TaskPageBody(BaseModel):
    """A page, newest first; pass ``next`` as ``after`` for the next one."""

    items: list[TaskItem]
    next: str | None = Field(description="The ``after`` of the next page; None on the last.")
    next_cursor: str | None = Field(
        description="Deprecated: the same as ``next`` (the name before the API's one "
        "pagination style).",
        deprecated=True,
    )


class DeadSelectionBody(BaseModel):
    """The dead letters to act on, by task id (at most 1,000; duplicates count once)."""

    model_config = ConfigDict(extra="forbid")

    # Ids as a submit accepts them (1..200 characters).
    ids: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=MAX_SELECTION
    )
    action: Literal["replay", "delete"]


class DeadSelectionResult(BaseModel):
    """What a selection did, ids in the order given."""

    action: Literal["replay", "delete"]
    done: list[str] = Field(description="Replayed (queued again) or deleted.")
    skipped: list[str] = Field(
        description="Taken out of the DLQ but not queued (a live task of the id exists), "
        "or left in it (its stored body cannot be read); replay only."
    )
    unknown: list[str] = Field(description="Not in the DLQ.")
