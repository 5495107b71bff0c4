"""``fleet master``: serve the REST API, catalog, sweeper and metrics with uvicorn."""

from __future__ import annotations

import logging
import sys

import click

from fleet import heap
from fleet.backends import redact_url
from fleet.cli.environment import load_settings
from fleet.cli.worker import load_named
from fleet.client.tokenfile import UnsafeTokenFile, ensure_token, is_loopback
from fleet.core.logs import log_format
from fleet.master.http.tokens_policy import weak_tokens
from fleet.settings import Settings


def prepare_settings(settings: Settings, host: str) -> tuple[Settings, str | None]:
    """Make sure the master has an admin token.

    Returns:
        The settings to use and, when a token was generated or reused from the
        token file, the file's path (to tell the user; never the token itself).

    Raises:
        click.UsageError: No ``FLEET_ADMIN_TOKEN`` and ``host`` is not loopback.
    """
    weak = weak_tokens(settings)
    if weak:
        raise click.UsageError(weak)
    if settings.admin_token:
        return settings, None
    if not is_loopback(host):
        raise click.UsageError(
            f"refusing to listen on {host} without FLEET_ADMIN_TOKEN: set it to a long random "
            "secret (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
        )
    try:
        token, path = ensure_token()
    except UnsafeTokenFile as exc:
        raise click.ClickException(str(exc)) from exc
    return settings.model_copy(update={"admin_token": token}), str(path)


def _stderr(line: str) -> None:
    click.echo(line, err=True)


@click.command("master")
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default 8000).")
@click.option(
    "--backend",
    "backend_url",
    default=None,
    help="Backend URL (FLEET_BACKEND_URL; default sqlite:///./fleet.db).",
)
@click.option("--plugin", "plugins", multiple=True, help="Extra plugin MODULE[:ATTR] to load.")
@click.option("--no-sweeper", is_flag=True, help="Do not run the sweeper in this master.")
def master(
    host: str | None,
    port: int | None,
    backend_url: str | None,
    plugins: tuple[str, ...],
    no_sweeper: bool,
) -> None:
    """Run the master: REST API under /api/v1, /metrics, the sweeper."""
    from fleet.master.serve import run_master

    settings = load_settings()
    updates: dict[str, object] = {}
    if host is not None:
        updates["host"] = host
    if port is not None:
        updates["port"] = port
    if backend_url is not None:
        updates["backend_url"] = backend_url
    settings = settings.model_copy(update=updates)
    settings, token_file = prepare_settings(settings, settings.host)
    # Settled before the plugins load, as before they were checked here: their objects
    # are not the master's to freeze (tests/master/test_heap.py).
    heap.settle(settings.gc_threshold)
    # The master skips a plugin that fails (workers publish their own catalog entries),
    # but one named here is a mistake to report, not to serve around; installed entry
    # points nobody named stay logged and skipped by the app.
    load_named(plugins, use_entry_points=False)
    banner = (
        f"fleet master on http://{settings.host}:{settings.port} "
        f"(backend {redact_url(settings.backend_url)})"
    )
    json_logs = log_format() == "json"
    say = logging.getLogger("fleet.master").warning if json_logs else _stderr
    if token_file is not None:
        say(f"admin token (no FLEET_ADMIN_TOKEN set) is in {token_file}")
    say(banner)
    # uvicorn follows `fleet --log-level`: its access log (one line per request)
    # only at INFO or below, so `--log-level WARNING` serves without it.
    level = logging.getLogger().getEffectiveLevel()
    # Open SSE streams never end by themselves: give them a few seconds at shutdown.
    # A backend that is not up yet is waited for (one log line, then retries).
    status = run_master(
        settings,
        sweeper=not no_sweeper,
        plugin_specs=plugins,
        log_level=logging.getLevelName(level).lower() if level > logging.INFO else "info",
        access_log=level <= logging.INFO,
        timeout_graceful_shutdown=5,
        # JSON lines: uvicorn's records go through Fleet's handler, not its own format.
        **({"log_config": None} if json_logs else {}),
    )
    if status:
        sys.exit(status)
