"""The ``fleet`` command: parse, configure logging, call one library function.

Subcommands live in their own modules and are imported only when invoked, so
``fleet --help`` imports none of them and a worker never imports the master's stack.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

import click

import fleet
from fleet import heap
from fleet.core.logs import formatter as log_formatter

#: Subcommand name -> "module:attribute" of its click command.
COMMANDS: dict[str, str] = {
    "worker": "fleet.cli.worker:worker",
    "run": "fleet.cli.worker:run",
    "plugins": "fleet.cli.worker:plugins",
    "master": "fleet.cli.master:master",
    "submit": "fleet.cli.tasks:submit",
    "tasks": "fleet.cli.tasks:tasks",
    "task": "fleet.cli.records:task",
    "dlq": "fleet.cli.tasks:dlq",
    "groups": "fleet.cli.groups:groups",
    "runs": "fleet.cli.runs:runs",
    "crawl": "fleet.cli.crawl:crawl",
    "history": "fleet.cli.history:history",
    "identities": "fleet.cli.identities:identities",
    "domains": "fleet.cli.domains:domains",
    "errors": "fleet.cli.errors:errors",
    "costs": "fleet.cli.costs:costs",
    "webhooks": "fleet.cli.webhooks:webhooks",
    "schedules": "fleet.cli.schedules:schedules",
    "tail": "fleet.cli.tasks:tail",
    "config": "fleet.cli.admin:config",
    "workers": "fleet.cli.admin:workers",
    "catalog": "fleet.cli.admin:catalog",
    "doctor": "fleet.cli.doctor:doctor",
    "dev": "fleet.cli.dev:dev",
}


#: Subcommands that settle the collector themselves once started (``fleet/heap.py``).
SETTLING = frozenset({"worker", "master"})

#: Subcommand name -> the first sentence of its help, for ``fleet --help`` without
#: importing every subcommand (tests/cli: the same text as the commands' own).
SUMMARIES: dict[str, str] = {
    "catalog": "List automation types (or print one type's schemas as JSON).",
    "config": "Read or change an automation type's config (type-wide or per worker).",
    "crawl": "Start a crawl: a run of a crawler's pages, seeded with its URLs.",
    "costs": "What a type spent: its meters and spend in all, by hour over the window, and "
    "by domain.",
    "dev": "Run a master and a worker together, every installed automation enabled.",
    "domains": "List a type's domains and the proxy tier each goes through, or show one "
    "DOMAIN; put it at a --tier or --forget it.",
    "dlq": "Peek the dead-letter queue of a type; --replay or --drain it.",
    "errors": "List a type's error groups, newest first, or show one GROUP with its "
    "traceback, domains and snapshots.",
    "doctor": "Check the backend, Redis persistence, plugins, and the master and token.",
    "groups": "List a type's groups, or show and change one GROUP's limits.",
    "history": "A type's history, kept by the backend: what happened to its tasks and how "
    "long they ran, per point of the window (the last one is still running).",
    "identities": "List identity pools, a POOL's identities or one identity ID; add, generate, "
    "retire, revive or delete them.",
    "master": "Run the master: REST API under /api/v1, /metrics, the sweeper.",
    "plugins": "List installed automation types, their kinds and schemas, and load errors.",
    "run": "Run one automation in this process, no master: tasks from --payload, --file or "
    "stdin; emits printed as JSON lines.",
    "runs": "List runs, newest first (or: show, watch, create, pause, resume, cancel one).",
    "schedules": "List a type's schedules, or show one schedule ID and pause, resume, run or "
    "delete it.",
    "submit": "Submit a task: PAYLOAD is JSON, @file or - (stdin); or --from-jsonl FILE.",
    "tail": "Print the newest N entries of a type's output stream, oldest of them first "
    "(one JSON line each); --follow then prints new emits live (-n 0 -f: only new ones).",
    "task": "A task's record: state, attempt, times, last error, progress, outputs and trace "
    "id (--cancel to cancel it).",
    "tasks": "Queue depths and counters of a type; with --state, a page of its tasks.",
    "webhooks": "List the webhook subscriptions (or: create, delete, test one, show its "
    "deliveries).",
    "worker": "Run automation slots: take tasks, report state, follow the desired config.",
    "workers": "List workers (of one TYPE): state, last seen, slots, config generations.",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``fleet --help`` from :data:`SUMMARIES`: listing the
        commands imports none of them (the master's web stack, httpx, the worker)."""
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name)
            if cmd is None:
                cmd = click.Command(name, help=SUMMARIES.get(name, ""))
            if not cmd.hidden:
                rows.append((name, cmd))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module_name, attr = target.split(":")
        command: click.Command = getattr(importlib.import_module(module_name), attr)
        return command


def configure_logging(level: str) -> None:
    """One line per record on stderr: readable text, or a JSON object with
    ``FLEET_LOG_FORMAT=json`` (fleet/core/logs.py).

    Raises:
        click.UsageError: ``FLEET_LOG_FORMAT`` names no format.
    """
    handler = logging.StreamHandler()
    # URL credentials (a proxy's password in an error message) never reach a log.
    try:
        handler.setFormatter(log_formatter())
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])
    if logging.getLogger().level > logging.DEBUG:
        # one INFO line per HTTP request from the client library is noise in a CLI
        for noisy in ("httpx", "httpcore"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--log-level",
    default=lambda: os.environ.get("FLEET_LOG_LEVEL", "INFO"),
    show_default="INFO or $FLEET_LOG_LEVEL",
    help="DEBUG, INFO, WARNING or ERROR.",
)
@click.pass_context
def main(ctx: click.Context, log_level: str) -> None:
    """Fleet: run typed async automations across a fleet of machines."""
    if ctx.invoked_subcommand not in SETTLING:
        heap.release()  # held by run() through the imports
    configure_logging(log_level)
    ctx.ensure_object(dict)


@main.command()
def version() -> None:
    """Print Fleet's version."""
    click.echo(f"fleet {fleet.__version__}")


def run() -> Any:
    """The ``fleet`` console command (and ``python -m fleet``): the collector is held
    off while the command imports and starts (``fleet/heap.py``)."""
    heap.hold()
    return main()
