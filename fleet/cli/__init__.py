"""The ``fleet`` command: parse, configure logging, call one library function.

Subcommands live in their own modules and are imported only when invoked, so
``fleet --help`` stays fast and a worker never imports the master's stack.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

import click

import fleet
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
    "history": "fleet.cli.history:history",
    "schedules": "fleet.cli.schedules:schedules",
    "tail": "fleet.cli.tasks:tail",
    "config": "fleet.cli.admin:config",
    "workers": "fleet.cli.admin:workers",
    "catalog": "fleet.cli.admin:catalog",
    "doctor": "fleet.cli.doctor:doctor",
    "dev": "fleet.cli.dev:dev",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

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
    configure_logging(log_level)
    ctx.ensure_object(dict)


@main.command()
def version() -> None:
    """Print Fleet's version."""
    click.echo(f"fleet {fleet.__version__}")


def run() -> Any:  # pragma: no cover - console entry for `python -m fleet`
    return main()
