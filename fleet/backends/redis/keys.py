"""Every Redis key name Fleet uses, built in this one module (:class:`KeySpace`).

The names follow ``docs/redis-schema.md`` (the spec's schema plus the keys Fleet
adds). Keeping them here means a Redis Cluster layout (hash tags) can be
introduced by changing this file alone. Lua scripts never invent key names: they
receive full keys in ``KEYS`` or, for per-item keys only known inside a script
(pool claim keys, tag indexes), a prefix built here.
"""

from __future__ import annotations

from typing import Any

from fleet.backends.base import check_namespace
from fleet.core.capabilities.pools import tag_text

WORKER_PARTS = ("hardware", "config", "gen", "state", "stats")
#: Order of the keys every queue script receives in ``KEYS`` (see ``queue_keys``).
QUEUE_KEY_PARTS = (
    "",  # normal tier list (the spec's fleet:queue:<type>)
    ":high",  # high tier list
    ":low",  # low tier list
    ":processing",  # zset task_id -> lease deadline
    ":processing:body",  # hash task_id -> body JSON
    ":scheduled",  # zset body JSON -> ready_at
    ":dead",  # list of dead-lettered bodies, oldest death first
    ":tasks",  # hash task_id -> record of a running task, or a long one (else record_key's)
    ":counters",  # hash submitted|completed|failed|dead|expired|cancelled -> int
    ":done:",  # hash task_id -> finished record, one per hour (suffix added below)
    ":wake",  # list of wake-up tokens blocked reservers BLPOP on
    ":dead:info",  # hash task_id -> JSON state record at death
    ":done:",  # the previous hour's finished records
    ":processing:started",  # hash task_id -> "<token>/<time>" of the reservation marked started
    ":groups",  # hash group -> "running|tat|until|place|key tier" (flow control)
    ":groups:ready",  # zset group -> key tier * 2^50 + turn: the rotation
    ":groups:delayed",  # zset group -> time its rate or throttle lets it go
    ":groups:conf",  # hash group -> its own settings JSON
    ":groups:names",  # zset group -> 0: every group, for listing by name
    ":groups:meta",  # hash seq (turns), turn (plain|group), high|normal|low (grouped pending)
    ":g:",  # not a key: the prefix of the group lists <prefix><group>:<tier>
    ":finished",  # zset task_id -> when it finished or died (task record retention)
    ":rec:",  # not a key: the prefix of the task record keys <prefix><id>[:out]
)

#: The states with a browse index ``fleet:queue:<type>:browse:<state>`` (zset task_id
#: -> submitted time; ``IDX_SUFFIX`` in ``lua/queue_common.lua``, whose record state
#: letters are ``q``, ``s``, ``p`` and ``x`` for the DLQ).
BROWSE_INDEXES = ("pending", "scheduled", "processing", "dead")

#: How many buckets hold the short records of a type's live tasks (``record_key``).
RECORD_BUCKETS = 1024
#: Index in ``QUEUE_KEY_PARTS`` of ``:groups:meta`` (depths read it directly).
GROUPS_META = 19
#: Width of one finished-records bucket (seconds); a bucket expires as a whole.
DONE_BUCKET_SECONDS = 3600
#: Suffixes of the two keys of one proxy (``lua/proxies.lua`` lists by them).
PROXY_STATS = ":stats"
PROXY_PLACES = ":places"


def pool_tag_suffix(field: str, value: Any) -> str:
    """The part after :func:`pool_tag_prefix` for one tag (stored in each item)."""
    return f"{field}={tag_text(value)}"


def _hex_value(byte: int) -> int:
    return (byte % 39 - 9) % 16


def record_bucket(task_id: str) -> int:
    """The bucket of a live task's record, 0..1023: the id's last three bytes
    (UTF-8), each folded to a hex digit's value, ten bits of them (even over
    lowercase hex ids).

    The same rule as ``record_bucket`` in ``lua/queue_common.lua``. Up to 512
    records a bucket, Redis keeps a bucket as one listpack: ~75 bytes a record
    against ~130 in one big hash."""
    tail = task_id.encode("utf-8")[-3:].rjust(3, b"0")
    high = _hex_value(tail[0]) % 4
    return (high << 8) | (_hex_value(tail[1]) << 4) | _hex_value(tail[2])


def record_key(tasks_key: str, task_id: str) -> str:
    """The bucket of a live task's record: where it is kept while the task waits
    and both id and record are at most 64 bytes (``rec_place`` in
    ``lua/queue_common.lua``); ``tasks_key`` itself holds the others."""
    return f"{tasks_key}:{record_bucket(task_id)}"


def _glob_escape(text: str) -> str:
    """Escape SCAN MATCH metacharacters so a type name matches literally."""
    out = []
    for ch in text:
        if ch in "*?[]\\":
            out.append("\\")
        out.append(ch)
    return "".join(out)


class KeySpace:
    """Every key and channel name of one fleet (see the module docstring).

    Args:
        namespace: Prepended, with a ``:``, to every key and pub/sub channel
            (``acme`` → ``acme:fleet:queue:<type>``, ``acme:wkr:...``,
            ``acme:event:...``), so two fleets on one Redis never see each other's
            queues, workers, config, catalog, pools or events. ``""`` (the
            default): the spec's names exactly.

    Raises:
        ConfigError: The namespace is not 1-64 of ``A-Z a-z 0-9 _ . -``.
    """

    def __init__(self, namespace: str = "", *, cluster: bool = False) -> None:
        self.namespace = check_namespace(namespace)
        #: Redis Cluster: every key of a type carries the hash tag ``{<type>}`` (one
        #: slot per type), every key of the pools the tag ``{pools}``.
        self.cluster = cluster
        #: What every name starts with: ``"<namespace>:"``, or nothing.
        self.prefix = prefix = f"{namespace}:" if namespace else ""
        self._pool_root = prefix + ("fleet:pool:{pools}:" if cluster else "fleet:pool:")
        self._queue_key_cache: dict[tuple[str, int], tuple[str, ...]] = {}
        self.WORKERS_ALL = prefix + "wkrs:all"
        self.EVENT_PREFIX = prefix + "event:"
        self.CATALOG = prefix + "fleet:catalog"
        self.POOL_NAMES = prefix + ("fleet:pools:{pools}" if cluster else "fleet:pools")
        #: zset ``[type, id]`` (JSON) -> next run of every enabled schedule, fleet-wide.
        sched = "fleet:schedules:{schedules}:" if cluster else "fleet:schedules:"
        self.SCHEDULES_DUE = prefix + sched + "due"
        #: The prefix of the per-type schedule hashes.
        self.SCHEDULES_PREFIX = prefix + sched
        #: zset proxy key -> the time its state is forgotten: every proxy of ``ctx.proxy``.
        self.PROXIES = prefix + "fleet:proxies"
        #: Prefix and suffixes of the two keys of one proxy (``lua/proxies.lua`` lists by them).
        self.PROXY_PREFIX = prefix + "fleet:proxy:"
        #: Prefix of a run's keys: ``fleet:run:<id>`` (hash), ``:live`` (set), ``:keys:<n>``.
        self.RUN_PREFIX = prefix + "fleet:run:"
        #: Sorted set run id -> creation time: the listing of runs, newest first.
        self.RUN_INDEX = prefix + "fleet:runs"
        #: String: the event channel prefix of this database (``event_prefix``), where the
        #: script that ends a run publishes it (a script cannot tell its database).
        self.RUN_CHANNEL = prefix + "fleet:runs:channel"
        #: Meters (``lua/meters.lua``): one slot for all of them on Redis Cluster
        #: (tag ``{meters}``), so a batch of many scopes is still one script.
        meters = "{meters}:" if cluster else ""
        #: Prefix of the hash of one scope, ``fleet:meters:<scope>`` (meter -> sum).
        self.METER_PREFIX = prefix + "fleet:meters:" + meters
        #: zset scope -> 0: the scopes listed by name (every one but the hour scopes).
        self.METER_SCOPES = prefix + (
            "fleet:meter-scopes:{meters}" if cluster else "fleet:meter-scopes"
        )
        #: zset hour scope -> when it is gone (unix seconds).
        self.METER_HOURS = prefix + (
            "fleet:meter-hours:{meters}" if cluster else "fleet:meter-hours"
        )

    def _tag(self, name: str) -> str:
        """``name`` as a hash tag (``{name}``) on Redis Cluster, else as it is."""
        return f"{{{name}}}" if self.cluster else name

    # ------------------------------------------------------------------ workers

    def worker_key(self, automation_type: str, worker_id: str, part: str) -> str:
        """``wkr:<type>:<id>:<part>`` with part in hardware|config|gen|state|stats."""
        return f"{self.prefix}wkr:{self._tag(automation_type)}:{worker_id}:{part}"

    def workers_index(self, automation_type: str) -> str:
        """``wkrs:<type>``: set of every worker id of the type."""
        return f"{self.prefix}wkrs:{self._tag(automation_type)}"

    def workers_all_member(self, automation_type: str, worker_id: str) -> str:
        """The ``wkrs:all`` member of one worker: ``<type>|<id>``."""
        return f"{automation_type}|{worker_id}"

    # ------------------------------------------------------------------ streams, events, catalog

    def stream(self, automation_type: str) -> str:
        """``stream:<type>``: zset score = emit time, member = JSON envelope."""
        return f"{self.prefix}stream:{self._tag(automation_type)}"

    def event_prefix(self, db: int = 0) -> str:
        """The prefix of every event channel of database ``db``: ``event:`` for db 0
        (the spec's names), ``event:db<N>:`` for any other.

        Redis pub/sub ignores the database number (a message published from db 1
        reaches subscribers connected to db 0), so the channel name itself carries
        it; fleets on two databases of one server then never hear each other.
        """
        return self.EVENT_PREFIX if db == 0 else f"{self.EVENT_PREFIX}db{db}:"

    def event_channel(self, topic: str, db: int = 0) -> str:
        """``event:<topic>`` (db 0) or ``event:db<N>:<topic>``: the pub/sub channel
        of a topic in database ``db``."""
        return self.event_prefix(db) + topic

    # ------------------------------------------------------------------ queues

    def queue(self, automation_type: str) -> str:
        """``fleet:queue:<type>``: the normal tier list (also the prefix of every queue key)."""
        return f"{self.prefix}fleet:queue:{self._tag(automation_type)}"

    def groups_meta(self, automation_type: str) -> str:
        """``fleet:queue:<type>:groups:meta``: besides the queue's group state, the type's
        fleet-wide limits (``lua/groups.lua`` ``defaults``), read by reserve and, for its
        proxy policy, by ``lua/proxies.lua``."""
        return self.queue(automation_type) + QUEUE_KEY_PARTS[GROUPS_META]

    def group_lists_pattern(self, automation_type: str) -> str:
        """SCAN pattern of every group list of a type (``fleet:queue:<type>:g:<group>:<tier>``)."""
        return f"{_glob_escape(self.queue(automation_type))}:g:*"

    def done_bucket(self, automation_type: str, bucket: int) -> str:
        """``fleet:queue:<type>:done:<hour>``: finished (done/cancelled) task records
        of one hour (``hour = int(unix_time // 3600)``), expiring as a whole."""
        return f"{self.queue(automation_type)}:done:{bucket}"

    def task_record(self, automation_type: str, task_id: str) -> str:
        """``fleet:queue:<type>:rec:<id>``: hash of a task's record beside its state
        (``p`` latest progress JSON, ``n`` outputs emitted); ``<that>:out`` is the list
        of its newest output envelopes. Only tasks that reported any have them."""
        return f"{self.queue(automation_type)}:rec:{task_id}"

    def record_buckets_pattern(self, automation_type: str) -> str:
        """SCAN pattern of every bucket of a type's live task records (``record_key``)."""
        return f"{_glob_escape(self.queue(automation_type))}:tasks:*"

    def task_record_pattern(self, automation_type: str) -> str:
        """SCAN pattern of every task record key of a type."""
        return f"{_glob_escape(self.queue(automation_type))}:rec:*"

    def done_pattern(self, automation_type: str) -> str:
        """SCAN pattern of every finished-records bucket of a type."""
        return f"{_glob_escape(self.queue(automation_type))}:done:*"

    def queue_keys(self, automation_type: str, at: float) -> list[str]:
        """The fixed ``KEYS`` of every queue script at time ``at``, in
        ``QUEUE_KEY_PARTS`` order (the two ``:done:`` buckets depend on the time)."""
        return list(self._queue_keys(automation_type, int(at // DONE_BUCKET_SECONDS)))

    def browse_indexes(self, automation_type: str) -> list[str]:
        """The task browser's keys of a type: ``fleet:queue:<type>:browse`` (set once
        the records a Fleet before the indexes stored were indexed) and the zsets
        ``:browse:<state>`` (task_id -> submitted time), ``BROWSE_INDEXES`` order."""
        base = self.queue(automation_type) + ":browse"
        return [base, *(f"{base}:{state}" for state in BROWSE_INDEXES)]

    def queue_wake(self, automation_type: str) -> str:
        """``fleet:queue:<type>:wake``: the list blocked reservers wait on."""
        return self.queue(automation_type) + ":wake"

    def idempotency(self, automation_type: str, key: str) -> str:
        """``fleet:queue:<type>:idem:<key>``: string task_id with the key's TTL."""
        return f"{self.queue(automation_type)}:idem:{key}"

    def idempotency_pattern(self, automation_type: str) -> str:
        """SCAN pattern of every idempotency key of a type."""
        return f"{_glob_escape(self.queue(automation_type))}:idem:*"

    # ------------------------------------------------------------------ identities

    #: The parts of an identity pool's keys, in ``lua/identities.lua``'s KEYS order.
    IDENTITY_PARTS = ("docs", "meta", "ids", "ready", "leases", "owner", "sticky")

    def identity_keys(self, pool: str) -> list[str]:
        """``fleet:identity:<pool>:<part>`` for each of :attr:`IDENTITY_PARTS` (one hash
        tag per pool on Redis Cluster)."""
        base = f"{self.prefix}fleet:identity:{self._tag(pool)}"
        return [f"{base}:{part}" for part in self.IDENTITY_PARTS]

    @property
    def identity_pools(self) -> str:
        """``fleet:identity-pools``: the set of pool names."""
        return f"{self.prefix}fleet:identity-pools"

    # ------------------------------------------------------------------ domains

    def domain_keys(self, automation_type: str) -> list[str]:
        """The keys of ``lua/domains.lua``, in its KEYS order: ``fleet:domains:<type>``
        (hash domain -> state JSON), ``fleet:domains:<type>:names`` (zset domain -> 0: the
        domains by name) and the type-wide config ``fleet:config:<type>`` (read). On
        Redis Cluster the three carry the same hash tag, ``{<type>}``."""
        base = f"{self.prefix}fleet:domains:{self._tag(automation_type)}"
        return [base, f"{base}:names", self.config(automation_type)]

    # ------------------------------------------------------------------ errors

    def error_keys(self, automation_type: str) -> list[str]:
        """The keys of ``lua/errors.lua``, in its KEYS order: ``fleet:errors:<type>``
        (zset group -> last seen), ``:g`` (hash group -> JSON), ``:s`` (zset snapshot ->
        taken at), ``:m`` (hash snapshot -> description), ``:b`` (hash of the bodies).
        On Redis Cluster the five carry the type's hash tag, ``{<type>}``."""
        base = f"{self.prefix}fleet:errors:{self._tag(automation_type)}"
        return [base, f"{base}:g", f"{base}:s", f"{base}:m", f"{base}:b"]

    # ------------------------------------------------------------------ meters

    def meter_keys(self, scopes: list[str]) -> list[str]:
        """The keys of ``lua/meters.lua``, in its KEYS order: ``fleet:meter-scopes``,
        ``fleet:meter-hours``, then the hash ``fleet:meters:<scope>`` of each of
        ``scopes``. On Redis Cluster all carry the hash tag ``{meters}``."""
        return [self.METER_SCOPES, self.METER_HOURS, *(self.METER_PREFIX + s for s in scopes)]

    # ------------------------------------------------------------------ pools

    def pool(self, name: str) -> str:
        """``fleet:pool:<name>``: hash item_id -> JSON ``{p, t, x, c, i}``."""
        return self._pool_root + name

    def pool_claim_prefix(self, name: str) -> str:
        """Prefix of ``fleet:pool:<name>:claim:<item_id>`` (value: the claim token)."""
        return f"{self._pool_root}{name}:claim:"

    def pool_claim(self, name: str, item_id: str) -> str:
        """``fleet:pool:<name>:claim:<item_id>``: the claim lease of one item."""
        return self.pool_claim_prefix(name) + item_id

    def pool_tag_prefix(self, name: str) -> str:
        """Prefix of ``fleet:pool:<name>:idx:tag:<field>=<json value>`` tag indexes."""
        return f"{self._pool_root}{name}:idx:tag:"

    def pool_keys(self, name: str) -> list[str]:
        """Fixed ``KEYS`` of every pool script: hash, available index (zset id ->
        expires_at, +inf if never), claimed index (zset id -> lease end), expiry index
        (zset id -> expires_at), and the set of pool names."""
        return [
            self.pool(name),
            f"{self._pool_root}{name}:idx:avail",
            f"{self._pool_root}{name}:idx:claimed",
            f"{self._pool_root}{name}:idx:expiry",
            self.POOL_NAMES,
        ]

    # ------------------------------------------------------------------ primitives

    def lock(self, name: str) -> str:
        """``fleet:lock:<name>``: string token with TTL."""
        return f"{self.prefix}fleet:lock:{name}"

    def counter(self, name: str) -> str:
        """``fleet:counter:<name>``: integer string."""
        return f"{self.prefix}fleet:counter:{name}"

    def schedules(self, automation_type: str) -> str:
        """``fleet:schedules:<type>``: hash schedule id -> record JSON."""
        return self.SCHEDULES_PREFIX + automation_type

    def limit_keys(self, key: str) -> list[str]:
        """The two keys of limiter ``key`` (``ctx.limit``), in the order ``lua/limits.lua``
        takes them: ``fleet:limit:<key>:holders`` (zset token -> hold end) and
        ``fleet:limit:<key>:tat`` (string: the rate's next allowed start). Both carry a
        TTL refreshed by every change; the two suffixes keep any two limiters apart."""
        limit = f"{self.prefix}fleet:limit:{self._tag(key)}"
        return [f"{limit}:holders", f"{limit}:tat"]

    def proxy_keys(self, key: str) -> list[str]:
        """The two keys of proxy ``key`` (``ctx.proxy``), in the order ``lua/proxies.lua``
        takes them: ``fleet:proxy:<key>:stats`` (hash: counters, score, cool-down) and
        ``fleet:proxy:<key>:places`` (zset token -> hold end). The two suffixes keep any two
        proxies apart, as the limiters' do."""
        return [self.PROXY_PREFIX + key + PROXY_STATS, self.PROXY_PREFIX + key + PROXY_PLACES]

    def proxy_sticky(self, name: str) -> str:
        """``fleet:proxy-sticky:<name>``: the proxy key chosen for a sticky name, with a TTL
        (the ``-`` keeps it apart from every ``fleet:proxy:`` key)."""
        return f"{self.prefix}fleet:proxy-sticky:{name}"

    def kv(self, ns: str, key: str) -> str:
        """``fleet:kv:<ns>:<key>``: string value, optional TTL.

        ``%`` and ``:`` inside the namespace are percent-encoded so that namespace
        ``a:b`` key ``c`` and namespace ``a`` key ``b:c`` stay two keys; namespaces
        without those characters appear verbatim.
        """
        return f"{self.prefix}fleet:kv:{ns.replace('%', '%25').replace(':', '%3A')}:{key}"

    # ------------------------------------------------------------------ config

    def config(self, automation_type: str) -> str:
        """``fleet:config:<type>``: the type-wide partial config (JSON)."""
        return f"{self.prefix}fleet:config:{self._tag(automation_type)}"

    def config_override(self, automation_type: str, worker_id: str) -> str:
        """``fleet:config:<type>:w:<worker_id>``: one worker's override (JSON)."""
        return f"{self.config(automation_type)}:w:{worker_id}"

    def config_generation(self, automation_type: str) -> str:
        """``fleet:config:<type>:gen``: the type's generation counter."""
        return f"{self.config(automation_type)}:gen"

    def config_generations(self, automation_type: str) -> str:
        """``fleet:config:<type>:gens``: hash of the generation each partial config was
        stored at (field ``""``: the type-wide config; a worker id: its override)."""
        return f"{self.config(automation_type)}:gens"

    def config_override_pattern(self, automation_type: str) -> str:
        """SCAN pattern of every per-worker override of a type."""
        return f"{_glob_escape(self.config(automation_type))}:w:*"

    # ------------------------------------------------------------------ runs
    # The queue scripts build the same names from the fixed prefix (lua/run_common.lua).

    def run(self, run_id: str) -> str:
        """``fleet:run:<id>``: a run's hash (state, name, oc, times, c:/t: counters)."""
        return self.RUN_PREFIX + run_id

    # ------------------------------------------------------------------ history

    def history_keys(self, automation_type: str) -> list[str]:
        """The keys of ``lua/history_record.lua``: the type's queue counters
        (``fleet:queue:<type>:counters``, read), ``fleet:history:<type>:buckets`` (hash:
        ``last`` the totals of the last record, ``m:<start>`` / ``h:<start>`` a minute / an
        hour bucket) and ``fleet:history:<type>:expiry`` (zset bucket field -> when it
        expires). The two suffixes keep any two types apart."""
        return [
            self.queue(automation_type) + ":counters",
            f"{self.prefix}fleet:history:{self._tag(automation_type)}:buckets",
            f"{self.prefix}fleet:history:{self._tag(automation_type)}:expiry",
        ]

    # ------------------------------------------------------------------ webhooks

    @property
    def webhooks(self) -> str:
        """``fleet:webhooks``: hash subscription id -> its JSON (hash tag ``{webhooks}``
        on Redis Cluster, shared by every key of the webhooks)."""
        return f"{self.prefix}fleet:{self._tag('webhooks')}"

    def webhook_keys(self, hook_id: str) -> list[str]:
        """The keys of ``lua/webhooks.lua``: :attr:`webhooks`, then
        ``fleet:webhooks:<id>:log`` (hash event id -> delivery JSON) and
        ``fleet:webhooks:<id>:order`` (zset event id -> when it was queued)."""
        base = f"{self.webhooks}:{hook_id}"
        return [self.webhooks, f"{base}:log", f"{base}:order"]

    def _queue_keys(self, automation_type: str, hour: int) -> tuple[str, ...]:
        # every script call needs these; built once per type and hour
        found = self._queue_key_cache.get((automation_type, hour))
        if found is None:
            if len(self._queue_key_cache) > 1024:
                self._queue_key_cache.clear()
            base = self.queue(automation_type)
            out = [base + part for part in QUEUE_KEY_PARTS]
            out[9] = self.done_bucket(automation_type, hour)
            out[12] = self.done_bucket(automation_type, hour - 1)
            found = self._queue_key_cache[(automation_type, hour)] = tuple(out)
        return found


#: The spec's names (no namespace): what the module-level names below answer.
DEFAULT = KeySpace()


def __getattr__(name: str) -> Any:
    # ``keys.queue("t")``, ``keys.CATALOG``: the spec's names, for tests and tools.
    # The backend itself always asks its own KeySpace (it may have a namespace).
    try:
        return getattr(DEFAULT, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
