"""The response bodies of the REST API, one model per answer, named in the OpenAPI
document (request bodies and the task browser's answers are in ``models.py``).

Every answer extends :class:`Answer`: the fields it declares are what the answer
promises; a field declared with a default is sent only when the service gave it
(the wire carries exactly the keys the service put in, nothing is filled in), and
keys not declared pass through (``additionalProperties``), so a service adding a
field never breaks the answer. Numbers that may be whole are ``int | float``: an
``int`` stays an ``int`` on the wire.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

Number = int | float


class Answer(BaseModel):
    """The base of every answer: declared fields typed, others passed through, and
    only the keys given written back."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    # No return annotation: pydantic would take it for the answer's schema (``Any``
    # would leave every answer unnamed in the OpenAPI document).
    @model_serializer(mode="wrap")
    def _given_keys(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data = handler(self)
        if not isinstance(data, dict):
            return data
        fields = type(self).model_fields
        given = {fields[n].alias or n for n in self.model_fields_set if n in fields}
        given |= set(self.__pydantic_extra__ or {})
        given |= self.model_fields_set  # a dump by field name
        return {k: v for k, v in data.items() if k in given}


# ------------------------------------------------------------------- health
class Health(Answer):
    """``GET /healthz``."""

    ok: bool


# ------------------------------------------------------------ catalog, types
class ChannelOut(Answer):
    """A batch type's task queue, or a type's output stream: its name and the JSON
    schema of what it carries (the plugin's)."""

    name: str
    payload: dict[str, Any] | None = None


class PoolDeclared(Answer):
    """A pool an automation declares: its fleet-wide name and its schemas (the plugin's)."""

    name: str
    payload: dict[str, Any] | None = None
    tags: dict[str, Any] | None = None


class BrowserNeedsOut(Answer):
    """An automation's ``BrowserNeeds`` declaration."""

    size: int | None = None
    max_uses: int | None = None
    engine: str | None = None
    headless: bool | None = None
    launch_args: list[str] | None = None


class CatalogEntryOut(Answer):
    """One automation's declared schemas (contracts.md); the schemas are the plugin's.
    One whose stored text cannot be read: ``{type, unreadable, raw}``."""

    type: str | None = None
    kind: str | None = None
    config: dict[str, Any] | None = None
    queue: ChannelOut | None = None
    stream: ChannelOut | None = None
    pools: dict[str, PoolDeclared] | None = None
    browser: BrowserNeedsOut | None = None
    unreadable: str | None = None
    raw: str | None = None


class DemandOut(Answer):
    """What a type needs of the fleet (docs/autoscaling.md): its queue, its rates as
    this master measured them between reads, and the workers that would keep up."""

    pending: int
    processing: int
    oldest_pending_age: Number | None = None
    arrival_rate: Number | None = None
    completion_rate: Number | None = None
    slot_rate: Number | None = None
    workers: int
    slots: int
    desired_workers: int


class TypeRow(Answer):
    """One row of ``GET /automations``: kind, worker counts, queue depths."""

    type: str
    kind: str | None
    catalogued: bool
    has_queue: bool
    has_stream: bool
    workers: dict[str, int] | None = None
    queue: dict[str, Any] | None = None
    demand: DemandOut | None = None
    unreadable: str | None = None


class TypeDeleted(Answer):
    """``DELETE /automations/{type}``."""

    deleted: str


# ------------------------------------------------------------------- tasks
class AttemptOut(Answer):
    """One attempt of a task: where and when it ran and how it ended."""

    attempt: int
    worker: str | None = None
    started_at: Number | None = None
    ended_at: Number | None = None
    outcome: str = Field(description="running, done, failed, dead, lost or cancelled.")
    error: str | None = None


class TaskRecord(Answer):
    """A task's record (``GET …/tasks/{id}``): its state and what it did."""

    task_id: str
    state: str
    attempt: int | None = None
    max_attempts: int | None = None
    priority: int | None = None
    last_error: str | None = None
    traceback: str | None = None
    deadline: Number | None = None
    ready_at: Number | None = None
    finished_at: Number | None = None
    submitted_at: Number | None = None
    started_at: Number | None = None
    progress: Any = None
    attempts: list[AttemptOut] | None = Field(
        default=None,
        description="Oldest first: the newest ten that failed, died or were lost, and the "
        "one running or that finished the task.",
    )
    outputs: list[Any] | None = None
    outputs_total: int | None = None
    outputs_truncated: bool | None = None
    trace_id: str | None = None
    payload: Any = None
    group: str | None = None
    run: str | None = None


class TaskCancelled(Answer):
    """``DELETE …/tasks/{id}``: ``cancelled``, or ``cancelling`` for a processing one."""

    task_id: str
    outcome: str


class QueueDepths(Answer):
    """``GET …/queue``: depths per tier, processing, scheduled, dead, counters."""

    type: str
    pending: dict[str, int]
    pending_total: int
    processing: int
    scheduled: int
    dead: int
    oldest_pending_age: Number | None
    counters: dict[str, int]


class DeadLetter(Answer):
    """One dead task: its body, last error and attempts (one whose stored text cannot
    be read: ``unreadable`` says why, ``raw`` holds the text, cut)."""

    id: str
    payload: Any = None
    priority: int | None = None
    attempt: int | None = None
    max_attempts: int | None = None
    enqueued_at: Number | None = None
    ttl_seconds: Number | None = None
    last_error: str | None = None
    traceback: str | None = None
    failed_at: Number | None = None
    refunds: int | None = None
    group: str | None = None
    timeout_seconds: Number | None = None
    traceparent: str | None = None
    run: str | None = None
    unreadable: str | None = None
    raw: str | None = None


class Replayed(Answer):
    """``POST …/dead/replay``."""

    replayed: int


class Drained(Answer):
    """``DELETE …/dead``."""

    drained: int


class OutputEntry(Answer):
    """One entry of a type's output stream; ``payload`` is the automation's."""

    id: str
    ts: Number
    worker_id: str | None = None
    task_id: str | None = None
    attempt: int | None = None
    payload: Any = None


# -------------------------------------------------------------------- runs
class RunCreated(Answer):
    """``POST /runs``."""

    run_id: str


class MonitorOut(Answer):
    """One monitor of a run: ``ok``, ``firing`` or ``resolved`` (it fired, and no
    longer does), the value that decided it, its threshold, since when."""

    monitor: str
    state: str
    value: Number | None
    threshold: Number
    since: Number


class RunOut(Answer):
    """A run: its state, counters and counts by type."""

    run_id: str
    state: str
    name: str | None
    on_complete: dict[str, Any] | None
    types: list[str] | None
    max_delay_seconds: Number
    created_at: Number
    finished_at: Number | None
    counters: dict[str, int]
    by_type: dict[str, dict[str, int]]
    meters: dict[str, float] | None = Field(
        default=None,
        description="What its tasks spent: requests, bytes (by tier), solves, seconds, "
        "the plugin's own units and `spend` (GET /runs/{id} only)",
    )
    budget: dict[str, float] | None = Field(default=None, description="Caps by meter.")
    budget_left: dict[str, float] | None = Field(
        default=None, description="What is left of each cap (GET /runs/{id} only)"
    )
    paused_reason: str | None = Field(default=None, description="Why it is paused.")
    paused_at: Number | None = None
    monitors: list[MonitorOut] | None = Field(
        default=None, description="Its monitors and their states (GET /runs/{id} only)"
    )


class RunPage(Answer):
    """``GET /runs``: newest first; ``next`` is the ``after`` of the next page."""

    runs: list[RunOut]
    next: str | None


# ------------------------------------------------------------------ groups
class GroupOut(Answer):
    """One flow-control group: counts, effective limits, its own settings."""

    group: str
    pending: int
    running: int
    concurrency: int | None
    rate: str | None
    paused: bool
    throttled_until: Number | None
    settings: dict[str, Any] | None


class GroupLimits(Answer):
    """A type's group limits."""

    concurrency: int | None
    rate: str | None


class GroupPage(Answer):
    """``GET …/groups``: a page by name; ``next`` is the ``after`` of the next page."""

    groups: list[GroupOut]
    next: str | None
    defaults: GroupLimits


# --------------------------------------------------------------- schedules
class ScheduleOut(Answer):
    """One schedule: its definition, ``next_run``, ``last_run``, ``last_task_id``
    (one whose record cannot be read: ``{id, unreadable, raw, error}``)."""

    id: str
    cron: str | None = None
    every_seconds: Number | None = None
    timezone: str | None = None
    payload: Any = None
    priority: int | None = None
    group: str | None = None
    max_attempts: int | None = None
    enabled: bool | None = None
    misfire: str | None = None
    jitter_seconds: Number | None = None
    declared: bool | None = None
    next_run: Number | None = None
    last_run: Number | None = None
    last_task_id: str | None = None
    last_error: str | None = None
    created_at: Number | None = None
    updated_at: Number | None = None
    unreadable: bool | None = None
    raw: str | None = None
    error: str | None = None


class SchedulePage(Answer):
    """``GET …/schedules``: by id; ``next`` is the ``after`` of the next page."""

    schedules: list[ScheduleOut]
    next: str | None
    note: str | None = None


class ScheduleDeleted(Answer):
    """``DELETE …/schedules/{id}``."""

    deleted: bool


class ScheduleRun(Answer):
    """``POST …/schedules/{id}/run``: the task it enqueued."""

    task_id: str


# ------------------------------------------------------------------ config
class ConfigOut(Answer):
    """``GET …/config``: stored, defaults, effective, missing fields and the schema
    (the automation's ``Config``)."""

    type: str
    config: dict[str, Any]
    defaults: dict[str, Any]
    effective: dict[str, Any]
    missing: list[str]
    schema_: dict[str, Any] = Field(alias="schema")


class ConfigWritten(Answer):
    """A config patch: what is stored now, its generation, the workers told."""

    config: dict[str, Any]
    gen: int
    workers: list[str]
    missing: list[str]


# ----------------------------------------------------------------- workers
class WorkerSlots(Answer):
    """A worker's slots: ``running`` (its heartbeat's count), ``busy`` and ``total``
    (its stats frame's)."""

    running: int
    busy: int
    total: int


class WorkerGen(Answer):
    """A worker's config generations: the one it should run, the one it merged."""

    desired: int
    applied: int


class WorkerTasks(Answer):
    """A worker's task counters since it started (its stats frame; empty before the
    first frame)."""

    completed: int | None = None
    failed: int | None = None
    dead: int | None = None
    retried: int | None = None
    throttled: int | None = None
    zombies_cancelled: int | None = None
    timed_out: int | None = None
    slots_abandoned: int | None = None
    per_second: Number | None = None


class BrowserPoolStats(Answer):
    """One browser pool of a worker (``BrowserPool.stats()``, in its stats frame)."""

    engine: str | None = None
    size: int | None = None
    max_uses: int | None = None
    warm: int | None = None
    idle: int | None = None
    in_use: int | None = None
    acquired: int | None = None
    launched: int | None = None
    retired: int | None = None
    crashed: int | None = None
    launch_failures: int | None = None
    launch_seconds_last: Number | None = None
    launch_seconds_avg: Number | None = None
    error: str | None = None


class AutoSlotsOut(Answer):
    """A worker's adaptive slots of one type (``slots: "auto"``, docs/autoscaling.md):
    the count it chose and the signal that held it there, with the window's signals."""

    slots: int | None = None
    min_slots: int | None = None
    max_slots: int | None = None
    limit: str | None = None
    loop_lag: Number | None = None
    cpu_percent: Number | None = None
    rss_bytes: int | None = None
    free_memory_percent: Number | None = None
    queued: int | None = None
    troubled_rate: Number | None = None
    efficiency: Number | None = None


class WorkerConfig(Answer):
    """One worker's config layers (secrets masked; the values are the automation's)
    and the generation of its desired config."""

    type_wide: dict[str, Any]
    override: dict[str, Any]
    merged: dict[str, Any]
    desired: dict[str, Any] | None
    desired_gen: int


class WorkerOut(Answer):
    """One worker's view: state, heartbeat, slots, config generations, hardware; one
    worker's (``GET …/workers/{id}``) adds its ``config`` and last ``stats`` frame."""

    type: str
    worker_id: str
    state: str
    up: bool
    reported_state: str | None = None
    last_seen: Number | None = None
    seen_ago: Number | None = None
    slots: WorkerSlots
    gen: WorkerGen
    lagging: bool | None = None
    hardware: dict[str, Any] | None = None
    last_error: str | None = None
    host: str | None = None
    pid: int | None = None
    started_at: str | None = None  # the heartbeat's text, as the worker wrote it
    version: str | None = None
    tasks: WorkerTasks | None = None
    browser_pools: list[BrowserPoolStats] | None = None
    autoslots: AutoSlotsOut | None = None
    unreadable: list[str] | None = None
    draining_requested: bool | None = None
    config: WorkerConfig | None = None
    stats: dict[str, Any] | None = None


class WorkerAction(Answer):
    """``POST …/workers/{id}/drain`` and ``/resume``."""

    worker_id: str
    action: str


class WorkerForgotten(Answer):
    """``DELETE …/workers/{id}``."""

    worker_id: str
    forgotten: bool


# ------------------------------------------------------------ pools, proxies
class PoolOut(Answer):
    """A pool's sizes."""

    name: str
    total: int
    available: int
    claimed: int
    expiring_soon: int


class PoolDetail(PoolOut):
    """A pool and its items (payloads shown to the admin only)."""

    items: list[dict[str, Any]]


class PoolDropped(Answer):
    """``DELETE /pools/{name}``: how many items went."""

    dropped: int


class ProxyOut(Answer):
    """One proxy's health, by key (no credentials; the reason masked)."""

    proxy: str
    uses: int
    oks: int
    failures: int
    score: int
    cooling: bool
    cooling_until: Number | None
    in_use: int
    last_reason: str | None
    last_bad_at: Number | None


class ProxiesOut(Answer):
    """``GET /proxies``: each proxy's health, and totals."""

    proxies: list[ProxyOut]
    cooling: int
    in_use: int


# --------------------------------------------------------------- identities
class FingerprintOut(Answer):
    """What an identity's browser says of itself (docs/identities.md)."""

    user_agent: str
    headers: list[list[str]] = Field(description="[name, value] in the browser's order.")
    locale: str | None
    timezone: str | None
    viewport: dict[str, int] | None
    platform: str | None


class IdentityStatsOut(Answer):
    """What happened to an identity: leases, their outcomes, the last block's reason."""

    uses: int
    ok: int
    blocked: int
    blocked_in_row: int
    last_used_at: Number | None
    last_reason: str | None


class IdentityOut(Answer):
    """One identity; its proxy's password, cookies' values and account's secrets masked
    unless the admin asks with ``reveal=true``."""

    id: str
    proxy: str | None
    fingerprint: FingerprintOut | None
    cookies: list[dict[str, Any]] = Field(description="Playwright storage_state cookies.")
    account: dict[str, Any] | None
    state: str = Field(description="ready, leased, cooling or retired.")
    leases: int
    cooling_until: Number | None
    stats: IdentityStatsOut
    created_at: Number


class IdentityCounts(Answer):
    """A pool's identities by state."""

    ready: int
    leased: int
    cooling: int
    retired: int


class IdentityPoolOut(Answer):
    """One identity pool and its counts by state."""

    pool: str
    total: int
    counts: IdentityCounts


class IdentityPools(Answer):
    """``GET /identities``: every pool that holds an identity, by name."""

    pools: list[IdentityPoolOut]


class IdentityPage(Answer):
    """``GET /identities/{pool}``: a page by id; ``next`` is the ``after`` of the next
    page; ``counts`` over the whole pool."""

    pool: str
    items: list[IdentityOut]
    next: str | None
    counts: IdentityCounts


class IdentitiesCreated(Answer):
    """``POST /identities/{pool}``: how many were new, how many replaced, their ids."""

    pool: str
    created: int
    replaced: int
    ids: list[str]


class DomainOut(Answer):
    """One domain of a type: the proxy tier its requests go through and its verdicts."""

    domain: str
    tier: str | None = Field(description="The tier's name (None: the type has no proxy_tiers).")
    tier_index: int
    since: float = Field(description="When it moved to its tier (epoch seconds).")
    ok: int
    blocked: dict[str, int] = Field(description="Verdicts other than ok, by kind.")
    by_tier: dict[str, dict[str, int]] = Field(description="Verdicts by tier name and kind.")
    last_verdict: str | None
    last_vendor: str | None
    last_at: float | None
    probe_streak: int
    window_blocks: int
    changes: int


class DomainPage(Answer):
    """``GET /automations/{type}/domains``: a page by name; ``next`` is the ``after`` of
    the next page; ``tiers`` the type's tier names, cheap first."""

    type: str
    tiers: list[str]
    items: list[DomainOut]
    next: str | None


class CostsHour(Answer):
    """One hour of a type's meters (``start``: the hour's Unix time)."""

    start: int
    meters: dict[str, float]


class CostsDomain(Answer):
    """A domain's meters."""

    domain: str
    meters: dict[str, float]


class CostsHeld(Answer):
    """A type held by its ``daily_budget``."""

    until: Number
    reason: str


class CostsOut(Answer):
    """``GET /automations/{type}/costs``: meters in all, by hour, by domain (a page)."""

    type: str
    window: str
    meters: dict[str, float]
    hours: list[CostsHour]
    domains: list[CostsDomain]
    next: str | None
    today: dict[str, float] = Field(
        default_factory=dict, description="Its meters over the current UTC day."
    )
    held: CostsHeld | None = Field(
        default=None,
        description="Set while its daily_budget holds its dispatch: until when, and why.",
    )


class DomainForgotten(Answer):
    """``DELETE /automations/{type}/domains/{domain}``."""

    type: str
    domain: str
    forgotten: bool


class IdentityDeleted(Answer):
    """``DELETE /identities/{pool}/{id}``."""

    pool: str
    id: str
    deleted: bool


class ErrorSnapshotOut(Answer):
    """A snapshot of an error group: its bodies are read at ``.../snapshots/{id}/html``
    and ``.../screenshot``."""

    id: str
    taken_at: float
    label: str = Field(description="ctx.snapshot's label; empty for one taken at a failure.")
    task_id: str
    url: str = Field(description="The page's or the last response's URL.")
    html_bytes: int = Field(description="Bytes of HTML kept (0: none).")
    truncated: bool = Field(description="The HTML was cut at 256 KiB.")
    png_bytes: int = Field(description="Bytes of the screenshot (0: none).")


class ErrorGroupOut(Answer):
    """A type's failures of one kind: class, normalised message and location."""

    group: str = Field(description="The group's id (16 hex digits).")
    exception: str = Field(description="The exception's qualified class.")
    message: str = Field(description="The normalised message (URLs, ids, numbers masked).")
    location: str = Field(description="file.py:function of the innermost frame in plugin code.")
    count: int = Field(description="Failed attempts (retried ones count).")
    first_seen: float
    last_seen: float
    domains: list[str]
    sample_task_id: str | None
    sample_message: str
    traceback: str | None = Field(None, description="The sample's traceback (one group only).")
    snapshots: list[ErrorSnapshotOut] | None = Field(None, description="One group only.")


class ErrorGroupPage(Answer):
    """``GET /automations/{type}/errors``: newest last seen first; ``cursor`` of the next
    page (None: the last)."""

    type: str
    items: list[ErrorGroupOut]
    cursor: str | None
