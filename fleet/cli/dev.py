"""``fleet dev``: master + worker (+ ``--demo`` site and tasks) in one terminal."""

from __future__ import annotations

import asyncio
import sys

import click

from fleet.cli.worker import load_named
from fleet.dev.demo_seed import DemoUnavailable
from fleet.dev.procs import make_echo
from fleet.dev.runner import DevError, DevOptions, DevRunner


@click.command("dev")
@click.option(
    "--backend",
    "backend_url",
    default=None,
    help="Backend URL (default: $FLEET_BACKEND_URL, else sqlite:///./fleet.db).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Master address.")
@click.option("--port", type=int, default=8000, show_default=True, help="Master port.")
@click.option(
    "--plugin",
    "plugins",
    multiple=True,
    metavar="MODULE[:ATTR]",
    help="Also load automations from a module (repeatable).",
)
@click.option(
    "--demo",
    is_flag=True,
    help="Serve the demo site and its three local proxies (identities) and submit demo tasks.",
)
@click.option(
    "--demo-port",
    type=int,
    default=8765,
    show_default=True,
    help="Demo site port (0: any); its proxies take the next three.",
)
@click.option(
    "--grace",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds running tasks get when stopping.",
)
@click.option("-v", "--verbose", is_flag=True, help="Also log every HTTP request.")
def dev(
    backend_url: str | None,
    host: str,
    port: int,
    plugins: tuple[str, ...],
    demo: bool,
    demo_port: int,
    grace: float,
    verbose: bool,
) -> None:
    """Run a master and a worker together, every installed automation enabled.

    Both write their logs here, prefixed by component. Ctrl-C stops everything.
    """
    import logging

    from fleet.settings import Settings

    if not verbose:
        # This process runs the demo site and posts the demo's tasks: keep its
        # per-request and server start/stop lines out of the way.
        for name in ("httpx", "uvicorn.error"):
            logging.getLogger(name).setLevel(logging.WARNING)
    # A named plugin that fails would stop both children, after a misleading "no
    # plugins installed": refuse before starting anything, as they would.
    load_named(plugins, use_entry_points=False)
    options = DevOptions(
        backend_url=backend_url or Settings().backend_url,
        host=host,
        port=port,
        plugins=plugins,
        demo=demo,
        demo_port=demo_port,
        grace=grace,
        verbose=verbose,
    )
    try:
        code = asyncio.run(DevRunner(options, make_echo()).run())
    except (DevError, DemoUnavailable, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(code)
