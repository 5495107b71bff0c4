"""``fleet history TYPE``: a type's counts and run times by minute, 15 minutes or hour."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from fleet.cli.common import client_options, open_client, print_json, table

COUNTS = ("submitted", "completed", "failed", "dead", "expired", "throttled", "cancelled")
COLUMNS = ["from", *COUNTS, "timed out", "p50 s", "p95 s"]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _row(p: dict[str, Any], step: int) -> list[Any]:
    at = datetime.fromtimestamp(p["t"]).strftime("%m-%d %H:%M" if step < 3600 else "%m-%d %H:00")
    return [at, *(p[k] for k in COUNTS), p["timed_out"], _seconds(p["p50"]), _seconds(p["p95"])]


def _busy(p: dict[str, Any]) -> bool:
    return any(p[k] for k in (*COUNTS, "timed_out"))


@click.command("history")
@click.argument("automation_type")
@click.option(
    "--window",
    type=click.Choice(["1h", "24h", "30d"]),
    default="1h",
    show_default=True,
    help="1h by minute, 24h by 15 minutes, 30d by hour.",
)
@click.option("--all", "show_all", is_flag=True, help="Also the points where nothing happened.")
@client_options
def history(
    automation_type: str,
    window: str,
    show_all: bool,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """A type's history, kept by the backend: what happened to its tasks and how long
    they ran, per point of the window (the last one is still running)."""
    with open_client(url, token) as client:
        series = client.history(automation_type, window)
    if as_json:
        print_json(series)
        return
    step = int(series["step_seconds"])
    shown = [p for p in series["points"] if show_all or _busy(p)]
    title = f"{automation_type}: last {window} ({len(shown)} of {len(series['points'])} points)"
    table(title, COLUMNS, [_row(p, step) for p in shown])
