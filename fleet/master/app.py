"""``create_app(settings)``: the master's FastAPI application and its lifespan.

The lifespan opens the backend, writes the catalog entries of the plugins this
process has, and starts the sweeper and the history recorder; all state lives on
``app.state.fleet``.

Dashboard hook: if the directory ``fleet/master/dashboard/static`` exists, it
is served at ``/`` (``index.html`` for the root); the API keeps precedence.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles

import fleet
from fleet.backends import open_backend, redact_url
from fleet.backends.base import Backend
from fleet.core import tracing
from fleet.core.automation import registered
from fleet.core.cancelling import cancel_and_wait
from fleet.core.errors import BackendError, ConfigError
from fleet.master.http.auth import TokenTable
from fleet.master.http.errors import install_error_handlers
from fleet.master.http.gate import AuthGate, FailedAuth
from fleet.master.http.headers import SecurityHeaders
from fleet.master.http.limits import BodyLimitMiddleware, limit_for_paths
from fleet.master.http.tokens_policy import weak_tokens
from fleet.master.routes import browse as browse_routes
from fleet.master.routes import catalog as catalog_routes
from fleet.master.routes import config as config_routes
from fleet.master.routes import costs as cost_routes
from fleet.master.routes import domains as domain_routes
from fleet.master.routes import errors as error_routes
from fleet.master.routes import events as event_routes
from fleet.master.routes import groups as group_routes
from fleet.master.routes import health as health_routes
from fleet.master.routes import history as history_routes
from fleet.master.routes import identities as identity_routes
from fleet.master.routes import pools as pool_routes
from fleet.master.routes import proxies as proxy_routes
from fleet.master.routes import queue as queue_routes
from fleet.master.routes import runs as run_routes
from fleet.master.routes import schedules as schedule_routes
from fleet.master.routes import tasks as task_routes
from fleet.master.routes import webhooks as webhook_routes
from fleet.master.routes import workers as worker_routes
from fleet.master.services.catalog import keep_local_entries, load_plugins, publish_local_entries
from fleet.master.services.event_hub import EventHub
from fleet.master.services.history import HistoryRecorder
from fleet.master.services.metrics import MasterMetrics
from fleet.master.services.outage import ApiOutage
from fleet.master.services.readiness import Readiness
from fleet.master.services.schedule_check import catalog_check
from fleet.master.services.shared_views import SharedWorkerViews
from fleet.master.services.sweeper import Sweeper
from fleet.master.services.waits import Waits
from fleet.master.services.webhook_dispatch import WebhookService
from fleet.master.state import MasterState, master_state
from fleet.scheduler import ScheduleFirer, sync_declared
from fleet.settings import Settings

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"
DASHBOARD_DIR = Path(__file__).parent / "dashboard" / "static"
#: How often a master checks that its own plugins' catalog entries still exist.
CATALOG_CHECK_SECONDS = 2.0


async def _cancel(task: asyncio.Task[None]) -> None:
    await cancel_and_wait(task)


def create_app(
    settings: Settings | None = None,
    *,
    backend: Backend | None = None,
    sweeper: bool = True,
    plugins: bool = True,
    plugin_specs: Sequence[str] = (),
    catalog_check_seconds: float = CATALOG_CHECK_SECONDS,
    close_backend: bool = False,
) -> FastAPI:
    """Build a master application.

    Args:
        settings: Settings (default: from the environment).
        backend: An already connected backend to use instead of opening
            ``settings.backend_url`` (it is then not closed by the app).
        sweeper: Run the periodic sweeper in the lifespan.
        plugins: Discover installed plugins at start (their catalog entries are
            published); classes registered in the process are published either way.
        plugin_specs: Extra ``MODULE[:ATTR]`` plugin specs to load.
        catalog_check_seconds: How often the master re-publishes its own
            entries if they went missing from the backend.
        close_backend: Close ``backend`` when the app stops, as if it had opened
            it (``fleet master`` opens it before serving, to wait for it).

    Returns:
        The FastAPI app; run it with uvicorn (its lifespan connects everything).
    """
    settings = settings or Settings()
    weak = weak_tokens(settings)
    if weak is not None:
        raise ConfigError(weak)
    tracing.enable()  # with the [otel] extra and somewhere to send spans
    state = MasterState(settings=settings, tokens=TokenTable.from_settings(settings))
    state.metrics = MasterMetrics()
    outage = ApiOutage(log)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Each resource registers its own clean-up as it is made: a start that fails
        # half-way undoes what it did, and shutdown runs in reverse order of start.
        async with contextlib.AsyncExitStack() as stack:
            if backend is None:
                state.backend = await open_backend(settings.backend_url)
            else:
                state.backend = backend
            if backend is None or close_backend:
                stack.push_async_callback(state.backend.close)
            log.info("master on backend %s", redact_url(state.backend.url))
            if plugins:
                load_plugins(plugin_specs)
            try:
                written = await publish_local_entries(state.backend)
                if written:
                    log.info("catalog: published %s", ", ".join(written))
            except BackendError as exc:
                log.warning("could not write the catalog at start: %s", exc)
            try:
                await sync_declared(state.backend.schedules, registered())
            except BackendError as exc:
                log.warning("could not write the declared schedules at start: %s", exc)
            if sweeper:
                firer = ScheduleFirer(state.backend, "master", catalog_check(state.backend))
                firer.start()
                stack.push_async_callback(firer.stop)
                state.sweeper = Sweeper(state.backend, settings.sweep_seconds)
                state.sweeper.start()
                stack.push_async_callback(_stop_sweeper)
                recorder = HistoryRecorder(state.backend, settings.history_interval_seconds)
                recorder.start()
                stack.push_async_callback(recorder.stop)
                hooks = WebhookService(state.backend)
                hooks.start()
                stack.push_async_callback(hooks.stop)
            keeper = asyncio.create_task(
                keep_local_entries(state.backend, catalog_check_seconds), name="fleet-catalog"
            )
            stack.push_async_callback(_cancel, keeper)
            state.views = SharedWorkerViews(state.backend, settings.heartbeat_seconds)
            stack.push_async_callback(_close_views)
            state.events = EventHub(state.backend, settings.heartbeat_seconds, state.views)
            stack.push_async_callback(_close_events)
            stack.push_async_callback(outage.close)
            state.readiness = Readiness(state.backend)
            stack.push_async_callback(state.readiness.close)
            state.waits = Waits(state.backend)
            stack.push_async_callback(state.waits.close)
            yield

    async def _stop_sweeper() -> None:
        if state.sweeper is not None:
            await state.sweeper.stop()
            state.sweeper = None

    async def _close_views() -> None:
        if state.views is not None:
            await state.views.close()
            state.views = None

    async def _close_events() -> None:
        if state.events is not None:
            await state.events.close()
            state.events = None

    app = FastAPI(
        title="Fleet master",
        version=fleet.__version__,
        openapi_url=f"{API_PREFIX}/openapi.json",
        # Swagger UI would load its scripts from a CDN; the master loads nothing
        # from the internet, so only the OpenAPI document itself is served.
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.fleet = state

    def on_outage(request: Request, exc: Exception) -> None:
        outage.failed(master_state(request).backend, exc)

    install_error_handlers(app, on_outage)
    app.add_middleware(
        BodyLimitMiddleware,
        limit_for=limit_for_paths(settings.max_body_bytes, settings.max_batch_body_bytes),
    )
    # Outermost: a request is authenticated before any body is read (fleet/master/http/gate.py).
    app.add_middleware(AuthGate, tokens=lambda: state.tokens, failures=FailedAuth())
    # Outside the gate: its answers (401, 429) carry the headers too.
    app.add_middleware(SecurityHeaders)
    app.include_router(health_routes.router)
    for module in (
        catalog_routes,
        task_routes,
        run_routes,
        queue_routes,
        browse_routes,
        history_routes,
        group_routes,
        schedule_routes,
        config_routes,
        worker_routes,
        pool_routes,
        proxy_routes,
        identity_routes,
        domain_routes,
        error_routes,
        cost_routes,
        webhook_routes,
        event_routes,
    ):
        app.include_router(module.router, prefix=API_PREFIX)
    if DASHBOARD_DIR.is_dir():
        app.mount("/", StaticFiles(directory=DASHBOARD_DIR, html=True), name="dashboard")
    return app
