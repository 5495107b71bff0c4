"""``fleet worker``, ``fleet run`` and ``fleet plugins``."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Coroutine
from typing import Any

import click

from fleet import heap
from fleet.cli.environment import load_settings
from fleet.core.automation import Automation, BatchAutomation
from fleet.core.config import FRAMEWORK_FIELDS
from fleet.core.errors import PluginLoadError
from fleet.plugins import Plugins, discover

log = logging.getLogger("fleet.worker")

_plugin_option = click.option(
    "--plugin",
    "plugins",
    multiple=True,
    metavar="MODULE[:ATTR]",
    help="Import automations from a module (repeatable; also $FLEET_PLUGINS, comma separated).",
)


def load_named(
    plugins: tuple[str, ...], types: tuple[str, ...] = (), *, use_entry_points: bool | None = None
) -> Plugins:
    """Discover plugins for a command that needs the ones it names (``--plugin``,
    ``FLEET_PLUGINS``, the entry point named like a ``--type``): one of those that fails
    to load ends the command before it serves or takes any task.

    Raises:
        click.ClickException: A named plugin failed; the message says why and where.
    """
    try:
        return discover(plugins, use_entry_points=use_entry_points, wanted=types, strict=True)
    except PluginLoadError as exc:
        raise click.ClickException(f"{exc}\n{_NOT_STARTING}") from exc


#: The end of a refusal for a broken plugin: why nothing runs, where the traceback is.
_NOT_STARTING = "Not starting: fix the plugin (`fleet --log-level DEBUG ...` shows the traceback)."


def _failed(found: Plugins) -> str:
    return "\n".join(f"  {e.describe()}".replace("\n", "\n  ") for e in found.errors)


def _select(found: Plugins, types: tuple[str, ...]) -> list[type[Automation[Any]]]:
    """The classes to run; a type nothing provides ends the command, naming the
    plugins that failed (one of them may have been meant to provide it) or else
    the types there are. Other plugins that failed are logged and skipped."""
    if not types and not found.types:
        if found.errors:
            raise click.ClickException(
                f"no automation types loaded; these plugins failed:\n{_failed(found)}"
            )
        raise click.UsageError(
            "no automation types found; install a plugin or pass --plugin MODULE"
        )
    unknown = [t for t in types if t not in found.types]
    known = ", ".join(sorted(found.types)) or "none"
    if unknown and found.errors:
        raise click.ClickException(
            f"type(s) {', '.join(unknown)} not provided by any plugin that loaded "
            f"(available: {known}); these plugins failed, one of them perhaps the one "
            f"meant to provide it:\n{_failed(found)}\n{_NOT_STARTING}"
        )
    if unknown:
        raise click.UsageError(f"unknown type(s) {', '.join(unknown)}; available: {known}")
    for error in found.errors:
        # Nobody asked for these by name: one broken package does not stop the others.
        log.warning("plugin skipped: %s", error.describe())
    return (
        list(found.types.values()) if not types else [found.types[t] for t in dict.fromkeys(types)]
    )


@click.command()
@click.option("--type", "types", multiple=True, help="Type to run (repeatable; default: all).")
@click.option(
    "--id",
    "worker_id",
    default=None,
    help="Worker id (default: the host name, or host-2, host-3... while those are live).",
)
@click.option(
    "--backend",
    "backend_url",
    default=None,
    help="Backend URL (default: $FLEET_BACKEND_URL, else sqlite:///./fleet.db).",
)
@click.option(
    "--grace", default=30.0, show_default=True, help="Seconds running tasks get at shutdown."
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes to run, forked after the plugins are imported; each is a "
    "whole worker with its own id (--id W: W-1, W-2, ...).",
)
@click.option(
    "--exit-when-idle",
    "exit_when_idle",
    type=click.FloatRange(min=0.1),
    default=None,
    metavar="SECONDS",
    help="Drain and exit 0 once no task ran or waited for this long (KEDA jobs, "
    "spot instances); a task still queued stays for the next worker.",
)
@_plugin_option
def worker(
    types: tuple[str, ...],
    worker_id: str | None,
    backend_url: str | None,
    grace: float,
    processes: int,
    exit_when_idle: float | None,
    plugins: tuple[str, ...],
) -> None:
    """Run automation slots: take tasks, report state, follow the desired config."""
    from fleet.worker.agent import RESYNC_SECONDS
    from fleet.worker.identity import WorkerIdInUse
    from fleet.worker.process import serve

    settings = load_settings()
    url = backend_url or settings.backend_url
    if processes > 1:
        _check_prefork(url)
    found = load_named(plugins, types)
    classes = _select(found, types)
    heap.settle(settings.gc_threshold)
    resync = float(os.environ.get("FLEET_RESYNC_SECONDS", RESYNC_SECONDS))

    def one(wid: str | None, same_signal_within: float = 0.0) -> None:
        _run(
            serve(
                url,
                classes,
                wid,
                grace=grace,
                heartbeat_seconds=settings.heartbeat_seconds,
                resync_seconds=resync,
                origins=found.origins,
                same_signal_within=same_signal_within,
                exit_when_idle=exit_when_idle,
            )
        )

    if processes == 1:
        try:
            one(worker_id)
        except WorkerIdInUse as exc:
            raise click.ClickException(str(exc)) from exc
        return

    from fleet.worker.prefork import FATAL_STATUS, SAME_SIGNAL_SECONDS, Supervisor

    def child(index: int) -> int:
        try:
            one(None if worker_id is None else f"{worker_id}-{index}", SAME_SIGNAL_SECONDS)
        except WorkerIdInUse as exc:
            click.echo(f"Error: {exc}", err=True)
            return FATAL_STATUS
        return 0

    sys.exit(Supervisor(processes, child).run())


def _check_prefork(url: str) -> None:
    from fleet.worker.prefork import can_fork

    if not can_fork():
        raise click.UsageError("--processes needs os.fork (Linux, macOS); start one worker each")
    if url.split(":", 1)[0].lower() == "memory":
        raise click.UsageError(
            "--processes needs a shared backend: memory:// lives in one process "
            "(use sqlite:///... or redis://...)"
        )


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run the worker's event loop: uvloop when it is installed (it comes with
    ``fleet-automation[master]``; a third less CPU per task on the hot path), else asyncio's
    own loop. ``FLEET_UVLOOP=0`` forces asyncio's loop."""
    if os.environ.get("FLEET_UVLOOP", "1") != "0":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            uvloop.run(main)
            return
    asyncio.run(main)


@click.command()
@click.argument("automation_type")
@click.option("--payload", "payloads", multiple=True, help="A task payload as JSON (repeatable).")
@click.option(
    "--file",
    "file",
    type=click.File("r"),
    default=None,
    help="A JSON-lines file of task payloads ('-' for stdin).",
)
@click.option("--slots", type=int, default=None, help="Slots to run (default: the config's).")
@click.option("--config", "config_json", default=None, help="Config fields as a JSON object.")
@click.option("--backend", "backend_url", default=None, help="Backend URL (default: memory://).")
@_plugin_option
def run(
    automation_type: str,
    payloads: tuple[str, ...],
    file: Any,
    slots: int | None,
    config_json: str | None,
    backend_url: str | None,
    plugins: tuple[str, ...],
) -> None:
    """Run one automation in this process, no master: tasks from --payload, --file
    or stdin; emits printed as JSON lines. Exit status 1 if any task dead-lettered."""
    from fleet.worker.run_local import read_json_lines, run_local

    (cls,) = _select(load_named(plugins, (automation_type,)), (automation_type,))
    try:
        items: list[Any] = [json.loads(p) for p in payloads]
        if file is not None:
            items.extend(read_json_lines(file))
        elif not payloads and issubclass(cls, BatchAutomation):
            if sys.stdin.isatty():
                raise click.UsageError("give tasks with --payload, --file or JSON lines on stdin")
            items.extend(read_json_lines(sys.stdin))
        config = json.loads(config_json) if config_json else {}
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if not isinstance(config, dict):
        raise click.UsageError("--config must be a JSON object")
    code = asyncio.run(
        run_local(
            cls,
            items,
            backend_url=backend_url,
            slots=slots,
            config=config,
            progress=sys.stderr.isatty(),
        )
    )
    sys.exit(code)


def _summary(cls: type[Automation[Any]]) -> dict[str, Any]:
    from fleet.core.catalog import catalog_entry

    entry = catalog_entry(cls)
    config_fields = list(entry["config"].get("properties", {}))
    required = entry["config"].get("required", [])
    return {
        "type": cls.automation_type,
        "kind": cls.kind,
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "task_payload": (entry["queue"] or {}).get("payload", {}).get("title"),
        "output": (entry["stream"] or {}).get("payload", {}).get("title"),
        "config_fields": config_fields,
        "required_config": required,
        "pools": {k: v["name"] for k, v in entry["pools"].items()},
        "browser": entry["browser"],
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@_plugin_option
def plugins(as_json: bool, plugins: tuple[str, ...]) -> None:
    """List installed automation types, their kinds and schemas, and load errors."""
    found = discover(plugins)
    rows = [{**_summary(cls), "source": found.sources[t]} for t, cls in sorted(found.types.items())]
    if as_json:
        doc = {"types": rows, "errors": [e.to_dict() for e in found.errors]}
        click.echo(json.dumps(doc, indent=2))
    else:
        from rich.table import Table

        from fleet.cli.console import output_console

        console = output_console()
        table = Table(title="Fleet automations")
        for column in ("type", "kind", "task payload", "output", "config", "source"):
            table.add_column(column)
        for r in rows:
            # Plugin fields only (the framework ones are the same for every type);
            # a * marks fields that must be set before the type can run.
            config = ", ".join(
                f"{f}*" if f in r["required_config"] else f
                for f in r["config_fields"]
                if f not in FRAMEWORK_FIELDS
            )
            table.add_row(
                r["type"],
                r["kind"],
                r["task_payload"] or "-",
                r["output"] or "-",
                config or "(defaults)",
                r["source"],
            )
        console.print(table)
        for e in found.errors:
            console.print(f"[red]failed to load[/red] {e.source}: {e.error}")
            console.print(e.traceback, markup=False, highlight=False)
    if found.errors:
        sys.exit(1)
