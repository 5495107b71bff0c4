"""``fleet master`` as a process: wait for the backend, then serve with uvicorn.

The backend is opened before uvicorn starts rather than in the app's lifespan:
uvicorn handles Ctrl-C only once the lifespan has started, so a lifespan still
waiting for a Redis that is not there yet could not be interrupted. Opened
here, the wait ends with the first Ctrl-C (or SIGTERM) like any other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Sequence
from typing import Any

from fleet.backends.waiting import open_when_reachable
from fleet.settings import Settings

log = logging.getLogger("fleet.master")

#: Exit status when the server did not start (what ``uvicorn.run`` exits with).
STARTUP_FAILURE = 3
#: Exit status after Ctrl-C while still waiting for the backend.
INTERRUPTED = 130


def _run_loop(main: Coroutine[Any, Any, None]) -> None:
    # uvloop when installed, as uvicorn.run would pick it ("auto").
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


def run_master(
    settings: Settings,
    *,
    sweeper: bool,
    plugin_specs: Sequence[str],
    **uvicorn_options: Any,
) -> int:
    """Wait until the backend answers, then serve the master until a signal.

    Args:
        settings: The master's settings (host, port and backend URL among them).
        sweeper: Run the sweeper in this master.
        plugin_specs: Extra ``MODULE[:ATTR]`` plugins to load.
        uvicorn_options: More ``uvicorn.Config`` options (log level, access log...).

    Returns:
        The exit status: 0 after a served run, ``STARTUP_FAILURE`` if the server
        did not start, ``INTERRUPTED`` if stopped while waiting for the backend.
    """
    import uvicorn

    from fleet.master.app import create_app
    from fleet.master.http.server_protocol import configure

    server: uvicorn.Server | None = None

    async def main() -> None:
        nonlocal server
        backend = await open_when_reachable(settings.backend_url, "master", log)
        # From here the app owns the backend: its lifespan closes it on every way out.
        app = create_app(
            settings,
            backend=backend,
            close_backend=True,
            sweeper=sweeper,
            plugin_specs=plugin_specs,
        )
        protocol = configure(
            header_seconds=settings.header_timeout_seconds,
            body_seconds=settings.body_timeout_seconds,
            max_connections=settings.max_connections,
            max_header_bytes=settings.max_header_bytes,
            max_headers=settings.max_headers,
        )
        # Slow clients are bounded (fleet/master/http/server_protocol.py); the server is
        # not advertised.
        # X-Forwarded-For is believed only from the proxies named in
        # FLEET_TRUSTED_PROXIES (uvicorn trusts loopback by default: any local client
        # could then forge its address, and escape the failed-auth throttle).
        trusted = ",".join(settings.trusted_proxies)
        options = {
            "server_header": False,
            "http": protocol,
            "proxy_headers": bool(trusted),
            "forwarded_allow_ips": trusted or None,
            **uvicorn_options,
        }
        config = uvicorn.Config(app, host=settings.host, port=settings.port, **options)
        server = uvicorn.Server(config)
        await server.serve()

    try:
        _run_loop(main())
    except KeyboardInterrupt:
        # uvicorn re-raises the signal it stopped on once it has shut down.
        if server is None:
            log.warning("master: stopped while waiting for the backend")
            return INTERRUPTED
    if server is None or not server.started:
        return STARTUP_FAILURE
    return 0
