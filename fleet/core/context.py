"""``Context``: what a slot's ``run_one``/``run_slot`` receives."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from fleet.core import tracing
from fleet.core.access.router import Access
from fleet.core.capabilities import TaskCapabilities
from fleet.core.config import BaseConfig
from fleet.core.contracts import Pool, Queue, Stream, ensure_instance
from fleet.core.error_book import CURRENT, Recorder
from fleet.core.error_groups import GroupKey, normalise
from fleet.core.errors import ContractTypeError, ContractValueError
from fleet.core.handles import KV, Counter, Events, Lock, PoolHandle, StreamHandle
from fleet.core.limit import Limit
from fleet.core.metering import TaskMeter
from fleet.core.meters import check_amount, check_meter_name
from fleet.core.metrics import Metrics
from fleet.core.progress import ProgressReporter
from fleet.core.proxy import ProxyHandle
from fleet.core.records import PushRequest
from fleet.core.results import check_progress
from fleet.core.submission import make_push_request

if TYPE_CHECKING:
    import httpx

    from fleet.core.access.solvers import Solution
    from fleet.core.blocks.verdicts import Challenge, Verdict
    from fleet.core.identity import IdentityHandle

ConfigT = TypeVar("ConfigT", bound=BaseConfig)
P = TypeVar("P", bound=BaseModel)
T = TypeVar("T", bound=BaseModel)


class Context(Generic[ConfigT]):
    """The lifecycle and primitives of one slot.

    Args:
        backend: The backend every primitive goes through.
        automation_type: The slot's automation type.
        config: A callable returning the current validated config (so
            ``ctx.config`` is always the live desired config).
        slot_id: 0..N-1 within this worker.
        worker_id: This worker's id.
        output: The automation's ``Output`` model (None: ``emit`` refuses).
        shutdown: Set when the slot is being torn down.
        proxy: The slot's proxy handle.
        browser: The browser resource, if the automation declared one.
        logger: Defaults to ``logging.getLogger("<type>.slot.<n>")``.
    """

    def __init__(
        self,
        *,
        backend: TaskCapabilities,
        automation_type: str,
        config: Callable[[], ConfigT],
        slot_id: int = 0,
        worker_id: str = "local",
        output: type[BaseModel] | None = None,
        shutdown: asyncio.Event | None = None,
        proxy: ProxyHandle | None = None,
        browser: Any = None,
        logger: logging.Logger | None = None,
        metrics: Metrics | None = None,
        access: Access | None = None,
    ) -> None:
        self._backend = backend
        self._config = config
        self._output = output
        self.automation_type = automation_type
        self.slot_id = slot_id
        self.worker_id = worker_id
        self.shutdown = shutdown or asyncio.Event()
        self.proxy = proxy or ProxyHandle()
        self.browser = browser
        self.logger = logger or logging.getLogger(f"{automation_type}.slot.{slot_id}")
        self.metrics = metrics or Metrics()
        self.events = Events(backend.events)
        #: The task attempt running in this slot now (None between tasks and in a
        #: continuous slot): what its emits carry.
        self._task: tuple[str, int] | None = None
        self._run: str | None = None
        self._progress = ProgressReporter(backend.streams, automation_type)
        #: The type's tier routing and verdict counts (shared by a worker's slots).
        self.access = access or Access(backend, automation_type, config)
        self._identity: IdentityHandle | None = None
        #: The identities the running task holds through proxy tiers, by pool.
        self._tier_identities: dict[str, IdentityHandle] = {}
        #: What the running attempt spends (docs/costs.md).
        self.metering = TaskMeter(self.access.book)
        #: What a failure (or ``ctx.snapshot``) snapshots: the last response, the page.
        self.recorder = Recorder(self.access.errors)

    @property
    def identity(self) -> IdentityHandle | None:
        """The identity the running task holds (``identity_pool`` set), else None."""
        return self._identity

    @identity.setter
    def identity(self, handle: IdentityHandle | None) -> None:
        # Its clients route and classify as this type's (a handle made by hand too).
        if handle is not None:
            if handle.access is None:
                handle.access = self.access
            handle.metering = self.metering
            self.metering.pool(handle.pool)
        self._identity = handle

    def bind_task(self, task_id: str | None, attempt: int = 0, *, run: str | None = None) -> None:
        """The worker's: the task attempt ``run_one`` now runs (None once it ended)
        and its run. A progress report still pending for the previous attempt is sent."""
        if self._task is not None:
            self._progress.flush()
            self.metering.end()
        self._task = None if task_id is None else (task_id, attempt)
        self._run = None if task_id is None else run
        self.recorder.reset(task_id)
        # The slot's asyncio task (and the tasks it starts) find the recorder here.
        CURRENT.set(None if task_id is None else self.recorder)
        if task_id is not None:
            self.metering.start(run)
            if self._identity is not None:
                self.metering.pool(self._identity.pool)

    @property
    def capabilities(self) -> TaskCapabilities:
        """The backend's capabilities this slot reaches (what Fleet's own kinds, such
        as :class:`fleet.crawl.Crawler`, build on; a plugin uses ``ctx``'s methods)."""
        return self._backend

    @property
    def run_id(self) -> str | None:
        """The run of the task running in this slot now (None: no run, or no task).
        Tasks ``ctx.submit`` submits while it runs join this run."""
        return self._run

    async def progress(self, fraction: float | None = None, message: str | None = None) -> None:
        """Report how far the running task is: a ``fraction`` in 0..1, a short
        ``message`` (at most 200 characters), or both. Kept in the task's record
        (``GET .../tasks/{id}``, ``fleet task``) and published as the event
        ``<type>.progress``. Cheap to call often: the slot writes at most twice a
        second (the latest report wins) and sends the last one when the task ends.

        Raises:
            ValueError: neither given, a fraction outside 0..1, or a longer message.
            ContractTypeError: (a ``TypeError``) called outside a batch task.
        """
        fraction, message = check_progress(fraction, message)
        running = self._task
        if running is None:
            raise ContractTypeError(
                "ctx.progress reports on a batch task: call it inside run_one",
                automation_type=self.automation_type,
            )
        await self._progress.report((running[0], running[1], fraction, message))

    @property
    def config(self) -> ConfigT:
        """The current validated config (reflects the latest applied generation)."""
        return self._config()

    @property
    def proxy_url(self) -> str | None:
        """The slot's current proxy URL (same as ``ctx.proxy.url``): a healthy one, as
        the worker calls ``ctx.proxy.ensure()`` before every task (see docs/primitives.md)."""
        return self.proxy.url

    @contextlib.asynccontextmanager
    async def use_identity(self, key: str | None = None) -> AsyncIterator[IdentityHandle]:
        """Lease an identity of the type's ``identity_pool`` for the block (a continuous
        automation's round; a batch task gets one without asking): ``ctx.identity``
        while it lasts, released at its end (``ok`` if the block ended without an
        exception, unless it said otherwise); ``key``: the identity kept for it. The
        identities its requests leased through proxy tiers are released with it.

        Raises:
            ContractValueError: the type's config names no ``identity_pool``.
            NoIdentity: none became usable within ``identity_wait_seconds``.
        """
        from fleet.core.identity import leased_handle, policy_of

        policy = policy_of(self.config)
        if policy is None:
            raise ContractValueError(
                "ctx.use_identity needs identity_pool in the type's config",
                field="identity_pool",
                automation_type=self.automation_type,
            )
        handle = await leased_handle(
            self._backend,
            policy,
            proxy=self.proxy,
            browser=self.browser,
            key=key,
            access=self.access,
        )
        outer, self.identity = self.identity, handle
        ended_well = False
        try:
            yield handle
            ended_well = True
        finally:
            self.identity = outer
            await handle.finish(ended_well)
            await self.release_tier_identities(ended_well)

    def http(
        self, *, impersonate: str | None = None, classify: bool = True, **options: Any
    ) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` for this task: the identity's (proxy, headers,
        cookies saved back, see ``ctx.identity.http``) when the type leases identities,
        else through the slot's proxy; through the domain's proxy tier instead when the
        type has ``proxy_tiers``. Every response is classified: a block raises
        :class:`~fleet.core.blocks.Blocked` (``classify=False``: none is; one request:
        ``extensions={"fleet_classify": False}``). ``impersonate="chrome"``: sent by
        curl_cffi with a browser's TLS and HTTP/2 handshake (docs/blocks.md).
        ``options`` go to ``httpx.AsyncClient``."""
        if self.identity is not None:
            return self.identity.http(impersonate=impersonate, classify=classify, **options)
        from fleet.core.access.clients import build_client

        return build_client(
            self.access,
            proxy=self.proxy_url,
            impersonate=impersonate,
            classify=classify,
            identities=self._tier_identity,
            metering=self.metering,
            options=options,
        )

    async def snapshot(self, label: str | None = None) -> bool:
        """Take a snapshot now, as a failure would: the browser page the task holds
        (HTML and screenshot) or else the last response of its ``ctx.http()`` clients
        (HTML), kept under the error group ``snapshot`` / ``label`` / the calling
        function (counted there: docs/errors.md). True if one was taken; False if
        there was nothing to take or the group has its snapshots already (this process
        takes at most 3 per group).

        Raises:
            ContractValueError: ``label`` is not a string of at most 200 characters.
        """
        if label is not None and (not isinstance(label, str) or len(label) > 200):
            raise ContractValueError(
                "ctx.snapshot label must be a string of at most 200 characters", field="label"
            )
        caller = sys._getframe(1).f_code
        where = f"{os.path.basename(caller.co_filename)}:{caller.co_name}"
        key = GroupKey(self.automation_type, "snapshot", normalise(label or ""), where)
        rec = self.recorder
        group = rec.book.failed(
            key, task_id=rec.task_id, message=label or "", traceback="", domains=rec.domains()
        )
        if not rec.book.wants(group):
            return False
        snap = await rec.take_page(rec.page, label or "") if rec.page is not None else None
        snap = snap or rec.take_response(label or "")
        if snap is None:
            return False
        rec.book.snapshot(group, snap)
        return True

    async def meter(self, name: str, amount: float = 1) -> None:
        """Add ``amount`` to the plugin's own meter ``name`` (``api_credits``): summed
        like Fleet's own per run, type and hour, priced by the type's
        ``costs.per_unit`` (docs/costs.md).

        Raises:
            ContractValueError: a name that is not 1-40 of a-z, 0-9, ``_`` (or is one of
                Fleet's own meters), or an amount that is not a finite number >= 0.
        """
        self.metering.units(check_meter_name(name), check_amount(amount))

    async def _tier_identity(self, pool: str) -> IdentityHandle:
        """The task's identity of ``pool`` (a proxy tier's), leased at its first use
        with the type's ``identity_*`` settings and kept until the task ends.

        Raises:
            NoIdentity: none became usable within ``identity_wait_seconds``.
        """
        got = self._tier_identities.get(pool)
        if got is None:
            from fleet.core.identity import IdentityPolicy, leased_handle

            c = self.config
            policy = IdentityPolicy(
                pool=pool,
                max_concurrency=c.identity_max_concurrency,
                cooldown_seconds=c.identity_cooldown_seconds,
                retire_after=c.identity_retire_after,
                lease_seconds=c.identity_lease_seconds,
                wait_seconds=c.identity_wait_seconds,
            )
            got = await leased_handle(self._backend, policy, proxy=self.proxy, access=self.access)
            got.metering = self.metering
            self.metering.pool(pool)
            self._tier_identities[pool] = got
        return got

    @property
    def holds_tier_identities(self) -> bool:
        """True while the running task holds identities leased through proxy tiers."""
        return bool(self._tier_identities)

    async def release_tier_identities(self, ok: bool) -> None:
        """Release the identities the task leased through proxy tiers (the worker's,
        when the task ends): ``ok`` unless one was marked blocked."""
        held, self._tier_identities = self._tier_identities, {}
        for handle in held.values():
            await handle.finish(ok)

    async def solve(self, challenge: Challenge, *, solver: str | None = None) -> Solution:
        """Get past ``challenge`` (``Blocked.challenge``) with the type's ``solver`` (or
        the one named): its cookies go into ``ctx.identity`` (kept at release) and its
        open clients; the solve is counted per solver, fleet-wide.

        Raises:
            ConfigError: no solver is named, or none is installed under that name.
            SolveFailed: the solver did not get past it.
        """
        from fleet.core.access.solving import solve

        return await solve(
            self.access, self._backend.counters, self.identity, challenge, solver, self.metering
        )

    async def check(self, response: Any) -> Verdict:
        """Classify a response met outside ``ctx.http()``: a Playwright ``Response``
        (``await page.goto(...)``'s answer) or an ``httpx.Response``. Returns the ``ok``
        verdict, else counts it and raises :class:`~fleet.core.blocks.Blocked`."""
        from fleet.core.access.solving import check

        return await check(self.access, response)

    async def emit(self, payload: BaseModel) -> str:
        """Append ``payload`` to this automation's stream; returns the entry id.

        Raises:
            ContractTypeError: (a ``TypeError``) if the automation declares no
                ``Output`` or ``payload`` is not an instance of it.
        """
        if self._output is None:
            raise ContractTypeError(
                f"{self.automation_type} declares no Output; set `Output = SomeModel` to emit",
                automation_type=self.automation_type,
            )
        ensure_instance(payload, self._output, f"{self.automation_type} emit payload")
        if tracing.ACTIVE:
            with tracing.emit_span(self.automation_type):
                return await self._push_output(payload)
        return await self._push_output(payload)

    async def _push_output(self, payload: BaseModel) -> str:
        running = self._task
        data = payload.model_dump(mode="json")
        self.metering.output(
            _validates(type(payload), data), [k for k, v in data.items() if v is None]
        )
        entry = await self._backend.streams.push(
            self.automation_type,
            data,
            worker_id=self.worker_id,
            task_id=None if running is None else running[0],
            attempt=None if running is None else running[1],
        )
        return entry.id

    def stream(self, ref: Stream[P]) -> StreamHandle[P]:
        """A typed reader of another automation's stream."""
        if not isinstance(ref, Stream):
            raise ContractTypeError(f"ctx.stream needs a Stream reference, got {ref!r}")
        return StreamHandle(self._backend.streams, ref)

    def pool(self, ref: Pool[P, T]) -> PoolHandle[P, T]:
        """A typed handle of a pool."""
        if not isinstance(ref, Pool):
            raise ContractTypeError(f"ctx.pool needs a Pool reference, got {ref!r}")
        return PoolHandle(self._backend.pools, ref)

    async def submit(
        self,
        ref: Queue[P],
        payload: P,
        *,
        priority: int = 0,
        task_id: str | None = None,
        max_attempts: int | None = None,
        ttl_seconds: float | None = None,
        delay_seconds: float | None = None,
        idempotency_key: str | None = None,
        group: str | None = None,
        timeout_seconds: float | None = None,
        unique_key: str | None = None,
    ) -> str:
        """Enqueue a task for another batch automation; returns the task id (the
        original one if ``idempotency_key`` matched an earlier submit).

        ``group`` (a domain, an API key, a tenant) puts the task under its group's
        fleet-wide limits (``group_concurrency``, ``group_rate``, per-group
        settings) and into the fair round robin across groups.
        ``timeout_seconds`` limits each ``run_one`` of the task (it wins over the
        receiver's ``Config.timeout_seconds``).
        A task submitted while a task of a run runs joins that run (``ctx.run_id``);
        ``unique_key`` (a URL) then makes a second submit of the same key within
        the run a duplicate that is not queued (counted in the run's
        ``duplicates``); without a run it is refused. A task of a run may not be
        delayed past the run's ``max_delay_seconds``; a ``task_id`` may not start
        with ``run-`` (the runs' callbacks) or ``schedule:`` (schedule ticks).

        Raises:
            ContractTypeError: (a ``TypeError``) if ``payload`` is not the queue's model.
            ContractValueError: (a ``ValueError``) for an invalid option, or a
                ``delay_seconds`` past the run's ``max_delay_seconds`` (the task is
                not queued).
        """
        if not isinstance(ref, Queue):
            raise ContractTypeError(f"ctx.submit needs a Queue reference, got {ref!r}")
        ensure_instance(payload, ref.payload, f"submit payload for {ref.name!r}")

        def request(traceparent: str | None) -> PushRequest:
            return make_push_request(
                payload.model_dump(mode="json"),
                task_id=task_id,
                priority=priority,
                max_attempts=max_attempts,
                ttl_seconds=ttl_seconds,
                delay_seconds=delay_seconds,
                idempotency_key=idempotency_key,
                group=group,
                timeout_seconds=timeout_seconds,
                traceparent=traceparent,
                run=self._run,
                unique_key=unique_key,
            )

        if not tracing.ACTIVE:
            result = await self._backend.queues.push_one(ref.name, request(None))
        else:
            with tracing.submit_span(ref.name) as traceparent:  # a child of this run's span
                result = await self._backend.queues.push_one(ref.name, request(traceparent))
        if result.refused == "delay":
            raise ContractValueError(
                f"delay_seconds {delay_seconds:g} is past the max_delay_seconds of run "
                f"{self._run}: the task was not queued",
                field="delay_seconds",
            )
        return result.task_id

    def kv(self, namespace: str) -> KV:
        """A namespaced key/value store."""
        return KV(self._backend.kv, namespace)

    def lock(self, name: str, hold_seconds: float = 30.0, wait_seconds: float = 10.0) -> Lock:
        """A fleet-wide mutex; use as ``async with ctx.lock(...) as acquired``."""
        return Lock(self._backend.locks, name, hold_seconds=hold_seconds, wait_seconds=wait_seconds)

    def limit(
        self,
        key: str,
        *,
        rate: str | None = None,
        concurrency: int | None = None,
        timeout: float = 30.0,
        hold_seconds: float = 60.0,
    ) -> Limit:
        """A place in the fleet-wide limiter ``key``, for one call::

            async with ctx.limit("api-key:alpha", rate="10/s", concurrency=4, timeout=5):
                await call_the_api()

        The limiter is shared by every worker of every automation type that uses
        ``key``: at most ``concurrency`` blocks run at once and at most ``rate``
        start (``"10/s"``, ``"100/m"``, ``"3/10s"``; evenly spaced), fleet-wide.
        Give ``rate``, ``concurrency`` or both, the same wherever ``key`` is used.
        Entering waits up to ``timeout`` seconds (0: try once) for a place; the
        place is renewed while the block runs (every ``hold_seconds / 3``), freed
        when it ends, and frees itself ``hold_seconds`` after its worker died.

        Raises:
            ContractValueError: (a ``ValueError``) for an invalid argument, or
                neither ``rate`` nor ``concurrency``.
            Throttled: From ``async with``, when no place came within ``timeout``
                (``retry_after``: when one is expected).
        """
        return Limit(
            self._backend.limits,
            key,
            rate=rate,
            concurrency=concurrency,
            timeout=timeout,
            hold_seconds=hold_seconds,
        )

    def counter(self, name: str) -> Counter:
        """An atomic fleet-wide counter."""
        return Counter(self._backend.counters, name)


def _validates(model: type[BaseModel], data: dict[str, Any]) -> bool:
    """Whether an emitted item, as it goes out, validates against its model again: an
    instance made without validation (``model_construct``) or changed after it may
    not (the ``min_schema_valid_rate`` monitor counts them)."""
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True
