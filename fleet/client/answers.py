"""What :class:`fleet.client.http.FleetClient` returns: the master's answers as
``TypedDict``s, one per response model of the OpenAPI document, under the same name
(``fleet/master/http/answers.py``; ``tests/master/test_contract.py`` holds the two
to each other). Plain JSON at run time: the client needs neither FastAPI nor the
master's extra, and a caller indexes them as before, checked by mypy.
"""

from typing import Any, NotRequired, TypedDict

Number = int | float


class SubmitResult(TypedDict):
    task_id: str
    queued: bool
    duplicate: bool


class BatchItemError(TypedDict):
    error: str
    detail: NotRequired[list[dict[str, Any]]]


class AttemptOut(TypedDict):
    attempt: int
    worker: NotRequired[str | None]
    started_at: NotRequired[Number | None]
    ended_at: NotRequired[Number | None]
    outcome: str
    error: NotRequired[str | None]


class TaskRecord(TypedDict):
    task_id: str
    state: str
    attempt: NotRequired[int | None]
    max_attempts: NotRequired[int | None]
    priority: NotRequired[int | None]
    last_error: NotRequired[str | None]
    traceback: NotRequired[str | None]
    deadline: NotRequired[Number | None]
    ready_at: NotRequired[Number | None]
    finished_at: NotRequired[Number | None]
    submitted_at: NotRequired[Number | None]
    started_at: NotRequired[Number | None]
    progress: NotRequired[Any]
    attempts: NotRequired[list[AttemptOut] | None]
    outputs: NotRequired[list[Any] | None]
    outputs_total: NotRequired[int | None]
    outputs_truncated: NotRequired[bool | None]
    trace_id: NotRequired[str | None]
    payload: NotRequired[Any]
    group: NotRequired[str | None]
    run: NotRequired[str | None]


class TaskCancelled(TypedDict):
    task_id: str
    outcome: str


class QueueDepths(TypedDict):
    type: str
    pending: dict[str, int]
    pending_total: int
    processing: int
    scheduled: int
    dead: int
    oldest_pending_age: Number | None
    counters: dict[str, int]


class DeadLetter(TypedDict):
    id: str
    payload: NotRequired[Any]
    priority: NotRequired[int | None]
    attempt: NotRequired[int | None]
    max_attempts: NotRequired[int | None]
    enqueued_at: NotRequired[Number | None]
    ttl_seconds: NotRequired[Number | None]
    last_error: NotRequired[str | None]
    traceback: NotRequired[str | None]
    failed_at: NotRequired[Number | None]
    refunds: NotRequired[int | None]
    group: NotRequired[str | None]
    timeout_seconds: NotRequired[Number | None]
    traceparent: NotRequired[str | None]
    run: NotRequired[str | None]
    unreadable: NotRequired[str | None]
    raw: NotRequired[str | None]


class OutputEntry(TypedDict):
    id: str
    ts: Number
    worker_id: NotRequired[str | None]
    task_id: NotRequired[str | None]
    attempt: NotRequired[int | None]
    payload: NotRequired[Any]


class MonitorOut(TypedDict):
    monitor: str
    state: str
    value: Number | None
    threshold: Number
    since: Number


class RunOut(TypedDict):
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
    meters: NotRequired[dict[str, float] | None]
    budget: NotRequired[dict[str, float] | None]
    budget_left: NotRequired[dict[str, float] | None]
    paused_reason: NotRequired[str | None]
    paused_at: NotRequired[Number | None]
    monitors: NotRequired[list[MonitorOut] | None]


class TaskItem(TypedDict):
    id: str
    state: str
    priority: int
    tier: str
    group: str | None
    run: str | None
    attempt: int
    enqueued_at: float
    ready_at: float | None
    deadline: float | None
    last_error: str | None
    failed_at: float | None
    finished_at: NotRequired[float | None]


class TaskPageBody(TypedDict):
    items: list[TaskItem]
    next: str | None
    next_cursor: str | None


class RunPage(TypedDict):
    runs: list[RunOut]
    next: str | None


class QuantileOut(TypedDict):
    value: float
    lower: float
    upper: float | None
    exact: bool


class HistorySummaryOut(TypedDict):
    counts: dict[str, int]
    attempts: int
    failure_rate: float | None
    p50: QuantileOut | None
    p95: QuantileOut | None
    runs: int


class HistoryOut(TypedDict):
    type: str
    window: str
    step_seconds: int
    points: list[dict[str, Any]]
    summary: NotRequired[HistorySummaryOut | None]


class GroupOut(TypedDict):
    group: str
    pending: int
    running: int
    concurrency: int | None
    rate: str | None
    paused: bool
    throttled_until: Number | None
    settings: dict[str, Any] | None


class GroupLimits(TypedDict):
    concurrency: int | None
    rate: str | None


class GroupPage(TypedDict):
    groups: list[GroupOut]
    next: str | None
    defaults: GroupLimits


class ScheduleOut(TypedDict):
    id: str
    cron: NotRequired[str | None]
    every_seconds: NotRequired[Number | None]
    timezone: NotRequired[str | None]
    payload: NotRequired[Any]
    priority: NotRequired[int | None]
    group: NotRequired[str | None]
    max_attempts: NotRequired[int | None]
    enabled: NotRequired[bool | None]
    misfire: NotRequired[str | None]
    jitter_seconds: NotRequired[Number | None]
    declared: NotRequired[bool | None]
    next_run: NotRequired[Number | None]
    last_run: NotRequired[Number | None]
    last_task_id: NotRequired[str | None]
    last_error: NotRequired[str | None]
    created_at: NotRequired[Number | None]
    updated_at: NotRequired[Number | None]
    unreadable: NotRequired[bool | None]
    raw: NotRequired[str | None]
    error: NotRequired[str | None]


class SchedulePage(TypedDict):
    schedules: list[ScheduleOut]
    next: str | None
    note: NotRequired[str | None]


class ScheduleDeleted(TypedDict):
    deleted: bool


class ConfigOut(TypedDict):
    type: str
    config: dict[str, Any]
    defaults: dict[str, Any]
    effective: dict[str, Any]
    missing: list[str]
    schema: dict[str, Any]


class ConfigWritten(TypedDict):
    config: dict[str, Any]
    gen: int
    workers: list[str]
    missing: list[str]


class WorkerSlots(TypedDict):
    running: int
    busy: int
    total: int


class WorkerGen(TypedDict):
    desired: int
    applied: int


class WorkerTasks(TypedDict):
    completed: NotRequired[int | None]
    failed: NotRequired[int | None]
    dead: NotRequired[int | None]
    retried: NotRequired[int | None]
    throttled: NotRequired[int | None]
    zombies_cancelled: NotRequired[int | None]
    timed_out: NotRequired[int | None]
    slots_abandoned: NotRequired[int | None]
    per_second: NotRequired[Number | None]


class BrowserPoolStats(TypedDict):
    engine: NotRequired[str | None]
    size: NotRequired[int | None]
    max_uses: NotRequired[int | None]
    warm: NotRequired[int | None]
    idle: NotRequired[int | None]
    in_use: NotRequired[int | None]
    acquired: NotRequired[int | None]
    launched: NotRequired[int | None]
    retired: NotRequired[int | None]
    crashed: NotRequired[int | None]
    launch_failures: NotRequired[int | None]
    launch_seconds_last: NotRequired[Number | None]
    launch_seconds_avg: NotRequired[Number | None]
    error: NotRequired[str | None]


class AutoSlotsOut(TypedDict):
    slots: NotRequired[int | None]
    min_slots: NotRequired[int | None]
    max_slots: NotRequired[int | None]
    limit: NotRequired[str | None]
    loop_lag: NotRequired[Number | None]
    cpu_percent: NotRequired[Number | None]
    rss_bytes: NotRequired[int | None]
    free_memory_percent: NotRequired[Number | None]
    queued: NotRequired[int | None]
    troubled_rate: NotRequired[Number | None]
    efficiency: NotRequired[Number | None]


class WorkerConfig(TypedDict):
    type_wide: dict[str, Any]
    override: dict[str, Any]
    merged: dict[str, Any]
    desired: dict[str, Any] | None
    desired_gen: int


class WorkerOut(TypedDict):
    type: str
    worker_id: str
    state: str
    up: bool
    reported_state: NotRequired[str | None]
    last_seen: NotRequired[Number | None]
    seen_ago: NotRequired[Number | None]
    slots: WorkerSlots
    gen: WorkerGen
    lagging: NotRequired[bool | None]
    hardware: NotRequired[dict[str, Any] | None]
    last_error: NotRequired[str | None]
    host: NotRequired[str | None]
    pid: NotRequired[int | None]
    started_at: NotRequired[str | None]
    version: NotRequired[str | None]
    tasks: NotRequired[WorkerTasks | None]
    browser_pools: NotRequired[list[BrowserPoolStats] | None]
    autoslots: NotRequired[AutoSlotsOut | None]
    unreadable: NotRequired[list[str] | None]
    draining_requested: NotRequired[bool | None]
    config: NotRequired[WorkerConfig | None]
    stats: NotRequired[dict[str, Any] | None]


class WorkerAction(TypedDict):
    worker_id: str
    action: str


class WorkerForgotten(TypedDict):
    worker_id: str
    forgotten: bool


class ChannelOut(TypedDict):
    name: str
    payload: NotRequired[dict[str, Any] | None]


class PoolDeclared(TypedDict):
    name: str
    payload: NotRequired[dict[str, Any] | None]
    tags: NotRequired[dict[str, Any] | None]


class BrowserNeedsOut(TypedDict):
    size: NotRequired[int | None]
    max_uses: NotRequired[int | None]
    engine: NotRequired[str | None]
    headless: NotRequired[bool | None]
    launch_args: NotRequired[list[str] | None]


class CatalogEntryOut(TypedDict):
    type: NotRequired[str | None]
    kind: NotRequired[str | None]
    config: NotRequired[dict[str, Any] | None]
    queue: NotRequired[ChannelOut | None]
    stream: NotRequired[ChannelOut | None]
    pools: NotRequired[dict[str, PoolDeclared] | None]
    browser: NotRequired[BrowserNeedsOut | None]
    unreadable: NotRequired[str | None]
    raw: NotRequired[str | None]


class DemandOut(TypedDict):
    pending: int
    processing: int
    oldest_pending_age: NotRequired[Number | None]
    arrival_rate: NotRequired[Number | None]
    completion_rate: NotRequired[Number | None]
    slot_rate: NotRequired[Number | None]
    workers: int
    slots: int
    desired_workers: int


class TypeRow(TypedDict):
    type: str
    kind: str | None
    catalogued: bool
    has_queue: bool
    has_stream: bool
    workers: NotRequired[dict[str, int] | None]
    queue: NotRequired[dict[str, Any] | None]
    demand: NotRequired[DemandOut | None]
    unreadable: NotRequired[str | None]


class FingerprintOut(TypedDict):
    user_agent: str
    headers: list[list[str]]
    locale: str | None
    timezone: str | None
    viewport: dict[str, int] | None
    platform: str | None


class IdentityStatsOut(TypedDict):
    uses: int
    ok: int
    blocked: int
    blocked_in_row: int
    last_used_at: Number | None
    last_reason: str | None


class IdentityOut(TypedDict):
    id: str
    proxy: str | None
    fingerprint: FingerprintOut | None
    cookies: list[dict[str, Any]]
    account: dict[str, Any] | None
    state: str
    leases: int
    cooling_until: Number | None
    stats: IdentityStatsOut
    created_at: Number


class IdentityCounts(TypedDict):
    ready: int
    leased: int
    cooling: int
    retired: int


class IdentityPoolOut(TypedDict):
    pool: str
    total: int
    counts: IdentityCounts


class IdentityPools(TypedDict):
    pools: list[IdentityPoolOut]


class IdentityPage(TypedDict):
    pool: str
    items: list[IdentityOut]
    next: str | None
    counts: IdentityCounts


class IdentitiesCreated(TypedDict):
    pool: str
    created: int
    replaced: int
    ids: list[str]


class CostsHour(TypedDict):
    start: int
    meters: dict[str, float]


class CostsDomain(TypedDict):
    domain: str
    meters: dict[str, float]


class CostsHeld(TypedDict):
    until: Number
    reason: str


class CostsOut(TypedDict):
    type: str
    window: str
    meters: dict[str, float]
    today: NotRequired[dict[str, float]]
    held: NotRequired[CostsHeld | None]
    hours: list[CostsHour]
    domains: list[CostsDomain]
    next: str | None


class DomainOut(TypedDict):
    domain: str
    tier: str | None
    tier_index: int
    since: Number
    ok: int
    blocked: dict[str, int]
    by_tier: dict[str, dict[str, int]]
    last_verdict: str | None
    last_vendor: str | None
    last_at: Number | None
    probe_streak: int
    window_blocks: int
    changes: int


class DomainPage(TypedDict):
    type: str
    tiers: list[str]
    items: list[DomainOut]
    next: str | None


class ErrorSnapshotOut(TypedDict):
    id: str
    taken_at: Number
    label: str
    task_id: str
    url: str
    html_bytes: int
    truncated: bool
    png_bytes: int


class ErrorGroupOut(TypedDict):
    group: str
    exception: str
    message: str
    location: str
    count: int
    first_seen: Number
    last_seen: Number
    domains: list[str]
    sample_task_id: str | None
    sample_message: str
    traceback: NotRequired[str | None]
    snapshots: NotRequired[list[ErrorSnapshotOut] | None]


class ErrorGroupPage(TypedDict):
    type: str
    items: list[ErrorGroupOut]
    cursor: str | None


class DomainForgotten(TypedDict):
    type: str
    domain: str
    forgotten: bool


class IdentityDeleted(TypedDict):
    pool: str
    id: str
    deleted: bool
