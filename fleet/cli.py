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

#: Subcommand name -> "module:attribute" of its click command.
COMMANDS: dict[str, str] = {
    "worker": "fleet.worker.cli:worker",
    "run": "fleet.worker.cli:run",
    "plugins": "fleet.worker.cli:plugins",
    "master": "fleet.master.cli:master",
    "submit": "fleet.client.cli_tasks:submit",
    "tasks": "fleet.client.cli_tasks:tasks",
    "dlq": "fleet.client.cli_tasks:dlq",
    "tail": "fleet.client.cli_tasks:tail",
    "config": "fleet.client.cli_admin:config",
    "workers": "fleet.client.cli_admin:workers",
    "catalog": "fleet.client.cli_admin:catalog",
    "doctor": "fleet.client.doctor:doctor",
    "dev": "fleet.dev.cli:dev",
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
    """One readable line per record on stderr."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
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
