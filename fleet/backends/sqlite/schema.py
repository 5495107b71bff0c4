"""The SQLite backend's schema: tables, indexes and versioned migrations.

The file records its schema version in ``meta(key='schema_version')``. Opening
a file runs every migration above its version, in order, inside one
``BEGIN IMMEDIATE`` transaction, so several processes opening a new file at
once create the schema exactly once and nobody sees half of it. A file written
by a newer Fleet is refused with :class:`~fleet.core.errors.SchemaVersionError`
instead of being misread.

Layout (one row per thing; ``type`` is the automation type):

* ``tasks``: every queued, scheduled, processing and recently finished task;
  ``state`` says which. Partial indexes make each state its own ordered queue:
  queued by ``(tier, seq)``, scheduled by ``ready_at``, processing by
  ``deadline``. ``seq`` grows at the tail and shrinks at the head of a tier.
  ``attempt``/``max_attempts`` columns override the copies inside ``body``, so
  reserve and release change a task without re-encoding its JSON. ``started``
  is 1 once the current reservation was marked started (``refunds``, rarely
  changed, lives in ``body``). ``grp`` names a task's group: queued tasks
  without one wait in ``tasks_queued`` ``(tier, seq)``, those with one in
  ``tasks_grouped`` ``(grp, tier, seq)`` (a seq line per group and tier).
* ``task_groups``: each group's running count, rate and throttle state, settings
  and place in the rotation (ready line, delayed heap); ``group_turn``: whose turn
  it is per type, tasks without a group or the groups (see ``groups.py``).
* ``dead``: the DLQ, in death order (``pos``).
* ``signals``: one change counter per type, bumped whenever tasks become
  deliverable (or a held group's due time moved earlier); blocked reservers of
  every process watch it.
* ``events``: the cross-process event bus (autoincrement ``seq``, pruned by age).
* pools (``pool_items`` + the tag index ``pool_tags``), ``kv``, ``locks``,
  ``counters``, ``catalog``, ``workers``, ``config``, ``generations``,
  ``idempotency``, ``stream`` + ``stream_len``, ``task_counters``.
* ``limit_holders`` + ``limiters``: the limiters of ``ctx.limit`` (places held,
  rate state), pruned by expiry.
* ``proxies`` + ``proxy_places`` + ``proxy_sticky``: proxy health of ``ctx.proxy``
  (scores and cool-downs, places held, sticky choices), pruned by expiry.
* ``group_defaults``: per type, the fleet-wide fields of its config as of a config
  generation: its group limits and its proxy policy.
* ``task_records``: what a task reported beside its state (latest progress, the
  newest outputs as a JSON array, how many it emitted), only for tasks that
  reported any; pruned with their finished state (``records.py``).
* ``runs`` + ``run_keys``: runs, their counters, budgets and ``unique_key`` sets (per
  run and type); a task's run is ``tasks.run`` (``runs.py``); a task of a paused run
  waits as ``state = 'parked'`` once a reserve took it (``queue.py``).
* ``history`` + ``history_last``: per type, minute and hour buckets of counts and run
  times, and the totals of the last record (``history.py``).
* ``identities`` + ``identity_leases`` + ``identity_sticky``: identity pools
  (``identities.py``).
* ``domains``: per type and domain, the proxy tier and what decides it (``domains.py``).
* ``meters`` + ``meter_scopes`` + ``meter_hours``: sums per scope and meter, the listed
  scopes by name, the hour scopes with when they are gone (``meters.py``).
* ``error_groups`` + ``error_snapshots``: per type, failures grouped by their key (count,
  first and last seen, domains, a sample) and each group's newest snapshots (HTML, PNG),
  pruned by age (``errors.py``, docs/errors.md).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from fleet.core import clock
from fleet.core.errors import SchemaVersionError
from fleet.core.runs import run_idle_ttl

#: The version this code reads and writes.
SCHEMA_VERSION = 25

#: Version 1: every table and the hot-path indexes.
_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

CREATE TABLE tasks (
    type TEXT NOT NULL,
    id TEXT NOT NULL,
    state TEXT NOT NULL,
    tier INTEGER NOT NULL,
    seq INTEGER NOT NULL DEFAULT 0,
    body TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER,
    enqueued_at REAL NOT NULL,
    ready_at REAL,
    deadline REAL,
    token TEXT,
    cancel INTEGER NOT NULL DEFAULT 0,
    finished_at REAL,
    PRIMARY KEY (type, id)
);
CREATE INDEX tasks_queued ON tasks (type, tier, seq) WHERE state = 'queued';
CREATE INDEX tasks_scheduled ON tasks (type, ready_at) WHERE state = 'scheduled';
CREATE INDEX tasks_processing ON tasks (type, deadline) WHERE state = 'processing';

CREATE TABLE dead (
    pos INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    dead_at REAL NOT NULL
);
CREATE INDEX dead_by_type ON dead (type, pos);
CREATE INDEX dead_by_id ON dead (type, id);

CREATE TABLE task_counters (
    type TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL,
    PRIMARY KEY (type, name)
) WITHOUT ROWID;

CREATE TABLE idempotency (
    type TEXT NOT NULL, key TEXT NOT NULL, task_id TEXT NOT NULL, expires_at REAL NOT NULL,
    PRIMARY KEY (type, key)
) WITHOUT ROWID;

CREATE TABLE signals (type TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;

CREATE TABLE stream (
    type TEXT NOT NULL, id TEXT NOT NULL, ts REAL NOT NULL,
    worker_id TEXT NOT NULL, payload TEXT NOT NULL,
    PRIMARY KEY (type, id)
) WITHOUT ROWID;
CREATE TABLE stream_len (type TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;

CREATE TABLE pool_items (
    name TEXT NOT NULL, id TEXT NOT NULL, payload TEXT NOT NULL, tags TEXT NOT NULL,
    expires_at REAL, xs REAL NOT NULL, rnd REAL NOT NULL, created_at REAL NOT NULL,
    claim_token TEXT, claim_until REAL,
    PRIMARY KEY (name, id)
) WITHOUT ROWID;
CREATE INDEX pool_items_xs ON pool_items (name, xs);
CREATE INDEX pool_items_rnd ON pool_items (name, rnd);
CREATE TABLE pool_tags (
    name TEXT NOT NULL, item_id TEXT NOT NULL, k TEXT NOT NULL, v TEXT NOT NULL,
    xs REAL NOT NULL, rnd REAL NOT NULL,
    PRIMARY KEY (name, item_id, k)
) WITHOUT ROWID;
CREATE INDEX pool_tags_xs ON pool_tags (name, k, v, xs);
CREATE INDEX pool_tags_rnd ON pool_tags (name, k, v, rnd);
CREATE TRIGGER pool_items_delete AFTER DELETE ON pool_items BEGIN
    DELETE FROM pool_tags WHERE name = old.name AND item_id = old.id;
END;

CREATE TABLE kv (
    ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, expires_at REAL,
    PRIMARY KEY (ns, key)
) WITHOUT ROWID;
CREATE TABLE locks (name TEXT PRIMARY KEY, token TEXT NOT NULL, expires_at REAL NOT NULL)
    WITHOUT ROWID;
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE catalog (type TEXT PRIMARY KEY, entry TEXT NOT NULL) WITHOUT ROWID;

CREATE TABLE workers (
    type TEXT NOT NULL, id TEXT NOT NULL,
    registered INTEGER NOT NULL DEFAULT 0,
    hardware TEXT, config TEXT, gen INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT '{}', stats TEXT,
    PRIMARY KEY (type, id)
) WITHOUT ROWID;
CREATE TABLE config (
    type TEXT NOT NULL, worker_id TEXT NOT NULL, config TEXT NOT NULL,
    PRIMARY KEY (type, worker_id)
) WITHOUT ROWID;
CREATE TABLE generations (type TEXT PRIMARY KEY, gen INTEGER NOT NULL) WITHOUT ROWID;

CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL, message TEXT NOT NULL, ts REAL NOT NULL
);
"""

#: Version 2: indexes for the retention pruning that sweeps and publishes do
#: (finished task states, idempotency keys, KV expiry, old events).
_V2 = """
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE state IN ('done', 'cancelled');
CREATE INDEX idempotency_expiry ON idempotency (expires_at);
CREATE INDEX kv_expiry ON kv (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX events_ts ON events (ts);
"""

#: Version 3: ``tasks.started``, set by ``mark_started`` while the current
#: reservation runs (reserve clears it), so a sweep can tell a task that died
#: running from one that died unstarted with its worker (and refund its attempt).
_V3 = """
ALTER TABLE tasks ADD COLUMN started INTEGER NOT NULL DEFAULT 0;
"""

#: Version 4: task groups (flow control). ``tasks.grp`` is a task's group; queued
#: tasks without one keep an index of their own (the batch reserve walks it alone),
#: those with one are ordered by group; ``task_groups`` holds each group's state and
#: place in the rotation, ``group_turn`` whose turn it is in a tier.
_V4 = """
ALTER TABLE tasks ADD COLUMN grp TEXT;
DROP INDEX tasks_queued;
CREATE INDEX tasks_queued ON tasks (type, tier, seq) WHERE state = 'queued' AND grp IS NULL;
CREATE INDEX tasks_grouped ON tasks (type, grp, tier, seq)
    WHERE state = 'queued' AND grp IS NOT NULL;

CREATE TABLE task_groups (
    type TEXT NOT NULL,
    name TEXT NOT NULL,
    running INTEGER NOT NULL DEFAULT 0,
    tat REAL NOT NULL DEFAULT 0,
    until REAL NOT NULL DEFAULT 0,
    place TEXT NOT NULL DEFAULT '',
    key_tier INTEGER NOT NULL DEFAULT 0,
    turn INTEGER NOT NULL DEFAULT 0,
    due REAL NOT NULL DEFAULT 0,
    settings TEXT,
    PRIMARY KEY (type, name)
) WITHOUT ROWID;
CREATE INDEX task_groups_ready ON task_groups (type, key_tier, turn) WHERE place = 'R';
CREATE INDEX task_groups_due ON task_groups (type, due) WHERE place = 'D';

CREATE TABLE group_turn (type TEXT PRIMARY KEY, plain INTEGER NOT NULL) WITHOUT ROWID;
"""

#: Version 5: the limiters of ``ctx.limit`` (``fleet/backends/sqlite/limits.py``):
#: one row per place held (until its hold expires) and one per rate limiter (its
#: ``tat``, forgotten at ``forget_at``); the expiry indexes let writes prune them.
#: Version 6: schedules (``fleet/backends/sqlite/schedules.py``): a row per schedule,
#: its record and the time it is due (NULL when disabled), indexed for the firer.
_V6 = """
CREATE TABLE schedules (
    type TEXT NOT NULL, id TEXT NOT NULL, raw TEXT NOT NULL, due REAL,
    PRIMARY KEY (type, id)
) WITHOUT ROWID;
CREATE INDEX schedules_due ON schedules (due) WHERE due IS NOT NULL;
"""

_V5 = """
CREATE TABLE limit_holders (
    key TEXT NOT NULL, token TEXT NOT NULL, until REAL NOT NULL,
    PRIMARY KEY (key, token)
) WITHOUT ROWID;
CREATE INDEX limit_holders_until ON limit_holders (until);
CREATE TABLE limiters (key TEXT PRIMARY KEY, tat REAL NOT NULL, forget_at REAL NOT NULL)
    WITHOUT ROWID;
CREATE INDEX limiters_forget ON limiters (forget_at);
"""

#: Version 7: proxy health (``fleet/backends/sqlite/proxies.py``): a row per proxy
#: (counters, score, cool-down; forgotten at ``forget_at``), one per place a slot holds
#: on a proxy (until its hold expires), one per sticky choice (until ``expires_at``).
_V7 = """
CREATE TABLE proxies (
    key TEXT PRIMARY KEY,
    uses INTEGER NOT NULL DEFAULT 0,
    oks INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    score INTEGER NOT NULL DEFAULT 0,
    cooling_until REAL NOT NULL DEFAULT 0,
    reason TEXT,
    bad_at REAL,
    forget_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX proxies_forget ON proxies (forget_at);
CREATE TABLE proxy_places (
    key TEXT NOT NULL, token TEXT NOT NULL, until REAL NOT NULL,
    PRIMARY KEY (key, token)
) WITHOUT ROWID;
CREATE INDEX proxy_places_until ON proxy_places (until);
CREATE TABLE proxy_sticky (name TEXT PRIMARY KEY, key TEXT NOT NULL, expires_at REAL NOT NULL)
    WITHOUT ROWID;
CREATE INDEX proxy_sticky_expiry ON proxy_sticky (expires_at);
"""


#: Version 8: the type's limits for groups without settings of their own
#: (``group_concurrency``/``group_rate`` of its config), read by reserve in its
#: transaction: one value for the fleet; ``gen`` is the config generation they came
#: with (an older one never overwrites a newer one).
_V8 = """
CREATE TABLE group_defaults (
    type TEXT PRIMARY KEY,
    concurrency INTEGER,
    interval REAL,
    rate TEXT,
    gen INTEGER NOT NULL
) WITHOUT ROWID;
"""


#: Version 9: a stream entry names the task and attempt that emitted it (NULL for a
#: continuous automation's emits), so a consumer can tell a redelivery's outputs apart.
_V9 = """
ALTER TABLE stream ADD COLUMN task_id TEXT;
ALTER TABLE stream ADD COLUMN attempt INTEGER;
"""


#: Version 10: the type's proxy policy (``proxy_bad_threshold``,
#: ``proxy_cooldown_seconds``, ``proxy_max_concurrency``) in the same row as its group
#: limits and under the same ``gen``, read by the proxy operations in their
#: transaction (``proxies.py``). ``proxy_threshold`` NULL: no policy stored.
_V10 = """
ALTER TABLE group_defaults ADD COLUMN proxy_threshold INTEGER;
ALTER TABLE group_defaults ADD COLUMN proxy_cooldown REAL;
ALTER TABLE group_defaults ADD COLUMN proxy_cap INTEGER;
"""

#: Version 11: the generation each partial config (type-wide or an override) was
#: stored at, so a PATCH is one write whatever the number of workers.
_V11 = """
ALTER TABLE config ADD COLUMN gen INTEGER NOT NULL DEFAULT 0;
"""


#: Version 12: task records. ``tasks.started_at``: when the current (or last)
#: attempt was marked started; ``task_records``: progress and outputs of the tasks
#: that reported any (``records.py``).
_V12 = """
ALTER TABLE tasks ADD COLUMN started_at REAL;
CREATE TABLE task_records (
    type TEXT NOT NULL,
    id TEXT NOT NULL,
    progress TEXT,
    outputs TEXT NOT NULL DEFAULT '[]',
    total INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    PRIMARY KEY (type, id)
);
CREATE INDEX task_records_updated ON task_records (updated_at);
"""


#: Version 13: runs (``runs.py``). ``tasks.run``: the run of a task (NULL for most,
#: so the partial index costs tasks without a run nothing); ``runs``: one row per
#: run, its counters as JSON; ``run_keys``: the ``unique_key`` set of each live run.
_V13 = """
ALTER TABLE tasks ADD COLUMN run TEXT;
CREATE INDEX tasks_run ON tasks (run) WHERE run IS NOT NULL;
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    name TEXT,
    on_complete TEXT,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    finished_at REAL,
    counters TEXT NOT NULL
);
CREATE INDEX runs_seq ON runs (seq);
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;
CREATE TABLE run_keys (run TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (run, key))
    WITHOUT ROWID;
"""


#: Version 14: per-type history (``history.py``). ``history``: a row per bucket (``res``
#: 60 or 3600 seconds, ``start`` its start, ``vals`` the vector as decimal text);
#: ``history_last``: per type, the totals the next record subtracts.
_V14 = """
CREATE TABLE history (
    type TEXT NOT NULL,
    res INTEGER NOT NULL,
    start INTEGER NOT NULL,
    vals TEXT NOT NULL,
    PRIMARY KEY (type, res, start)
) WITHOUT ROWID;
CREATE TABLE history_last (type TEXT PRIMARY KEY, vals TEXT NOT NULL) WITHOUT ROWID;
"""


#: Version 15: runs keep their types apart and expire when idle (``runs.py``).
#: ``runs.types``: the types a scoped token may submit into it (JSON list, NULL for
#: none named); ``runs.max_delay``: the longest delay of a task of it;
#: ``runs.idle_until``: when a running run expires if nothing of it moves.
#: ``run_keys`` gains the task type: a ``unique_key`` belongs to a (run, type) pair.
#: A key of a live run is kept for every type the run has counted (its counters'
#: keys), so no task that was a duplicate before the upgrade is queued after it.
_V15 = """
ALTER TABLE runs ADD COLUMN types TEXT;
ALTER TABLE runs ADD COLUMN max_delay REAL NOT NULL DEFAULT 86400;
ALTER TABLE runs ADD COLUMN idle_until REAL;
CREATE INDEX runs_idle ON runs (idle_until) WHERE finished_at IS NULL;
CREATE TABLE run_keys_typed (
    run TEXT NOT NULL,
    type TEXT NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (run, type, key)
) WITHOUT ROWID;
INSERT OR IGNORE INTO run_keys_typed (run, type, key)
    SELECT k.run, j.key, k.key FROM run_keys AS k JOIN runs AS r ON r.id = k.run,
    json_each(r.counters) AS j WHERE j.key != '*';
DROP TABLE run_keys;
ALTER TABLE run_keys_typed RENAME TO run_keys;
"""


#: Version 16: the task browser's orders, so a page reads a page (``browse.py``).
#: One partial index per live state on ``(type, enqueued_at, id)``: a page of a state
#: is a range of one index, newest first, from the cursor on; finished rows are in
#: none of them, so finishing a task removes it from one and adds it to nothing. The
#: DLQ's order key is read from the body (``enqueued_at``); the expression index
#: holds it, NULL for a body that is not JSON.
_V16 = """
CREATE INDEX tasks_browse_queued ON tasks (type, enqueued_at, id) WHERE state = 'queued';
CREATE INDEX tasks_browse_scheduled ON tasks (type, enqueued_at, id) WHERE state = 'scheduled';
CREATE INDEX tasks_browse_processing ON tasks (type, enqueued_at, id)
    WHERE state = 'processing';
CREATE INDEX dead_browse ON dead (
    type, (CASE WHEN json_valid(body) THEN json_extract(body, '$.enqueued_at') END), id
);
"""


#: Version 17: the done state and the run filter of the task browser. Done rows by
#: finish time; every state by run (live rows carry ``run``, dead letters in their body).
_V17 = """
CREATE INDEX tasks_browse_done ON tasks (type, finished_at, id) WHERE state = 'done';
CREATE INDEX tasks_browse_run ON tasks (type, run, state, enqueued_at, id)
    WHERE run IS NOT NULL;
CREATE INDEX tasks_browse_done_run ON tasks (type, run, finished_at, id)
    WHERE state = 'done' AND run IS NOT NULL;
CREATE INDEX dead_browse_run ON dead (
    type,
    (CASE WHEN json_valid(body) THEN json_extract(body, '$.run') END),
    (CASE WHEN json_valid(body) THEN json_extract(body, '$.enqueued_at') END),
    id
);
"""


#: Version 18: the worker of a task's latest attempt (its start mark, then its ack).
_V18 = """
ALTER TABLE tasks ADD COLUMN worker TEXT;
"""


#: Version 19: identity pools (``identities.py``): each identity's document and state,
#: the live leases by deadline, the identity kept for each sticky key.
_V19 = """
CREATE TABLE identities (
    pool TEXT NOT NULL,
    id TEXT NOT NULL,
    doc TEXT NOT NULL,
    retired INTEGER NOT NULL DEFAULT 0,
    cooling_until REAL,
    leases INTEGER NOT NULL DEFAULT 0,
    uses INTEGER NOT NULL DEFAULT 0,
    ok INTEGER NOT NULL DEFAULT 0,
    blocked INTEGER NOT NULL DEFAULT 0,
    in_row INTEGER NOT NULL DEFAULT 0,
    last_used_at REAL NOT NULL DEFAULT 0,
    last_reason TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (pool, id)
) WITHOUT ROWID;
CREATE INDEX identities_order ON identities (pool, last_used_at, id) WHERE retired = 0;
CREATE TABLE identity_leases (
    pool TEXT NOT NULL,
    token TEXT NOT NULL,
    id TEXT NOT NULL,
    deadline REAL NOT NULL,
    PRIMARY KEY (pool, token)
) WITHOUT ROWID;
CREATE INDEX identity_leases_deadline ON identity_leases (pool, deadline);
CREATE INDEX identity_leases_id ON identity_leases (pool, id);
CREATE TABLE identity_sticky (
    pool TEXT NOT NULL,
    key TEXT NOT NULL,
    id TEXT NOT NULL,
    PRIMARY KEY (pool, key)
) WITHOUT ROWID;
CREATE INDEX identity_sticky_id ON identity_sticky (pool, id);
"""


#: Version 20: proxy tiers per domain (``domains.py``): per type and domain, the tier
#: requests go through, its window of blocks, probe streak and verdict counts (JSON).
_V20 = """
CREATE TABLE domains (
    type TEXT NOT NULL,
    domain TEXT NOT NULL,
    tier INTEGER NOT NULL DEFAULT 0,
    since REAL NOT NULL DEFAULT 0,
    window_start REAL NOT NULL DEFAULT 0,
    window_blocks INTEGER NOT NULL DEFAULT 0,
    probe_streak INTEGER NOT NULL DEFAULT 0,
    counts TEXT NOT NULL DEFAULT '{}',
    last_kind TEXT,
    last_vendor TEXT,
    last_at REAL NOT NULL DEFAULT 0,
    changes INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (type, domain)
) WITHOUT ROWID;
"""


#: Version 21: meters (``meters.py``): a sum per scope and meter; the scopes listed by
#: name (every one but the hour scopes); the hour scopes by when they are gone.
_V21 = """
CREATE TABLE meters (
    scope TEXT NOT NULL,
    meter TEXT NOT NULL,
    value REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, meter)
) WITHOUT ROWID;
CREATE TABLE meter_scopes (scope TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE meter_hours (scope TEXT PRIMARY KEY, expires REAL NOT NULL) WITHOUT ROWID;
CREATE INDEX meter_hours_expires ON meter_hours (expires, scope);
"""

#: Version 22: budgets and pauses (docs/costs.md): a run's ``budget`` (JSON caps), why
#: and when it paused; a task of a paused run taken at reserve waits as ``parked``
#: (found again by ``tasks_run`` at resume); ``type_pauses``: a type past its
#: ``daily_budget``, not dispatched until ``until`` (the next UTC day).
_V22 = """
ALTER TABLE runs ADD COLUMN budget TEXT;
ALTER TABLE runs ADD COLUMN paused_reason TEXT;
ALTER TABLE runs ADD COLUMN paused_at REAL;
CREATE TABLE type_pauses (
    type TEXT PRIMARY KEY, until REAL NOT NULL, reason TEXT NOT NULL
) WITHOUT ROWID;
"""


#: Version 23: error groups (docs/errors.md, ``errors.py``): per type and group key, the
#: count, first and last seen, the bounded domain list and the newest sample (JSON); a
#: group's snapshots (metadata as JSON, the HTML and PNG bodies, their size), a rowid
#: table because the bodies are large.
_V23 = """
CREATE TABLE error_groups (
    type TEXT NOT NULL,
    grp TEXT NOT NULL,
    exc TEXT NOT NULL,
    message TEXT NOT NULL,
    location TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 0,
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    domains TEXT NOT NULL DEFAULT '[]',
    sample TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (type, grp)
) WITHOUT ROWID;
CREATE INDEX error_groups_recent ON error_groups (type, last_seen, grp);
CREATE INDEX error_groups_expiry ON error_groups (last_seen);
CREATE TABLE error_snapshots (
    type TEXT NOT NULL,
    grp TEXT NOT NULL,
    id TEXT NOT NULL,
    taken_at REAL NOT NULL,
    bytes INTEGER NOT NULL,
    meta TEXT NOT NULL,
    html BLOB,
    png BLOB,
    UNIQUE (type, grp, id)
);
CREATE INDEX error_snapshots_age ON error_snapshots (type, taken_at);
CREATE INDEX error_snapshots_expiry ON error_snapshots (taken_at);
"""


def _v15(conn: sqlite3.Connection) -> None:
    _script(_V15)(conn)
    # Running runs start their idle time at the upgrade.
    conn.execute(
        "UPDATE runs SET idle_until = ? WHERE finished_at IS NULL",
        (clock.now() + run_idle_ttl(),),
    )


#: Version 24: webhook subscriptions and their delivery logs (fleet.core.webhooks).
_V24 = """
CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    body TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE webhook_deliveries (
    hook TEXT NOT NULL,
    event TEXT NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (hook, event)
) WITHOUT ROWID;
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (hook, created_at, event);
"""

#: Version 25: the paused runs, found without a scan of every run (the task browser's
#: pending page lists the tasks their reserves parked).
_V25 = """
CREATE INDEX runs_paused ON runs (id) WHERE state = 'paused';
"""


def _script(sql: str) -> Callable[[sqlite3.Connection], None]:
    def apply(conn: sqlite3.Connection) -> None:
        # executescript would COMMIT our transaction; run statement by statement.
        for statement in split_statements(sql):
            conn.execute(statement)

    return apply


#: ``MIGRATIONS[n]`` upgrades a file from version ``n - 1`` to ``n``. Version 0
#: is an empty file. Append new steps; never edit a released one.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _script(_V1),
    2: _script(_V2),
    3: _script(_V3),
    4: _script(_V4),
    5: _script(_V5),
    6: _script(_V6),
    7: _script(_V7),
    8: _script(_V8),
    9: _script(_V9),
    10: _script(_V10),
    11: _script(_V11),
    12: _script(_V12),
    13: _script(_V13),
    14: _script(_V14),
    15: _v15,
    16: _script(_V16),
    17: _script(_V17),
    18: _script(_V18),
    19: _script(_V19),
    20: _script(_V20),
    21: _script(_V21),
    22: _script(_V22),
    23: _script(_V23),
    24: _script(_V24),
    25: _script(_V25),
}


def split_statements(sql: str) -> list[str]:
    """Split a DDL script into complete statements (triggers stay whole).

    Args:
        sql: Statements separated by ``;``.

    Returns:
        Each complete statement, stripped, in order.
    """
    out: list[str] = []
    pending = ""
    for piece in sql.split(";"):
        pending += piece + ";"
        if pending.strip() != ";" and sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    return out


def read_version(conn: sqlite3.Connection) -> int:
    """The file's schema version: 0 for a file without the ``meta`` table."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if row is None:
        return 0
    found = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(found[0]) if found is not None else 0


def migrate(conn: sqlite3.Connection, path: str, target: int = SCHEMA_VERSION) -> int:
    """Bring the file to ``target`` inside the caller's write transaction.

    Args:
        conn: A connection inside ``BEGIN IMMEDIATE``.
        path: The file name, for error messages.
        target: The version to reach (tests build older layouts with it).

    Returns:
        The version the file had before.

    Raises:
        SchemaVersionError: The file is newer than this Fleet understands.
    """
    found = read_version(conn)
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"SQLite file {path} has schema version {found}, but this Fleet only "
            f"understands up to version {SCHEMA_VERSION}; upgrade Fleet "
            "(pip install -U fleet) or point FLEET_BACKEND_URL at another file"
        )
    for version in range(found + 1, target + 1):
        MIGRATIONS[version](conn)
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(version),),
        )
    return found
