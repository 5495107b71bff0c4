"""``fleet costs TYPE``: what a type spent — its meters in all, by hour, by domain —
and the meters line of ``fleet runs show`` (docs/costs.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from fleet.cli.common import client_options, open_client, print_json, table
from fleet.cli.plain import echo

#: The meters a line shows first, in this order (then the rest by name).
FIRST = ("spend", "attempts", "run_seconds", "requests", "bytes_received", "bytes_sent",
         "solves", "solve_failures", "browser_seconds")  # fmt: skip


def amount(meter: str, value: float) -> str:
    """A meter's value for people: bytes in KB/MB/GB, seconds and spend with decimals."""
    if meter.startswith("bytes"):
        for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
            if value >= size:
                return f"{value / size:.2f} {unit}"
        return f"{value:.0f} B"
    if meter == "spend" or meter.endswith("seconds") or value != int(value):
        return f"{value:,.2f}"
    return f"{value:,.0f}"


def meters_line(meters: dict[str, float]) -> str:
    """``spend 1.20 · attempts 12 · requests 40 · bytes:residential 1.20 MB ...``."""
    if not meters:
        return "nothing metered yet"
    names = [m for m in FIRST if m in meters]
    names += sorted(m for m in meters if m not in FIRST)
    return " · ".join(f"{m} {amount(m, meters[m])}" for m in names)


@click.command("costs")
@click.argument("automation_type")
@click.option("--window", type=click.Choice(["24h", "7d", "30d"]), default="24h", show_default=True)
@click.option("-n", "limit", type=int, default=20, show_default=True, help="Domains to list.")
@click.option("--after", default=None, help="List the domains after this one (paging).")
@client_options
def costs(
    automation_type: str,
    window: str,
    limit: int,
    after: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """What a type spent: its meters and spend in all, by hour over the window, and
    by domain."""
    with open_client(url, token) as client:
        got = client.costs(
            automation_type, window=window, after=after, limit=max(1, min(limit, 500))
        )
    if as_json:
        print_json(got)
        return
    echo(f"{automation_type}: {meters_line(got['meters'])}")
    echo(f"today (UTC): {meters_line(got.get('today') or {})}")
    held = got.get("held")
    if held:
        until = datetime.fromtimestamp(held["until"], UTC).strftime("%Y-%m-%d %H:%M")
        echo(f"held until {until} UTC: {held['reason']}")
    hours = [h for h in got["hours"] if h["meters"]]
    if hours:
        rows: list[list[Any]] = [
            [
                datetime.fromtimestamp(h["start"], UTC).strftime("%m-%d %H:00"),
                amount("spend", h["meters"].get("spend", 0.0)),
                amount("attempts", h["meters"].get("attempts", 0.0)),
                amount("requests", h["meters"].get("requests", 0.0)),
                amount("bytes_received", h["meters"].get("bytes_received", 0.0)),
            ]
            for h in hours
        ]
        table(
            f"by hour (UTC), last {window}",
            ["hour", "spend", "attempts", "requests", "received"],
            rows,
        )
    if got["domains"]:
        rows = [[d["domain"], meters_line(d["meters"])] for d in got["domains"]]
        table("by domain", ["domain", "meters"], rows)
        if got["next"] is not None:
            echo(f"more: fleet costs {automation_type} --after {got['next']!r}")
