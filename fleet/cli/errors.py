"""``fleet errors TYPE [GROUP]``: a type's failures grouped by kind (docs/errors.md); one
GROUP in full with its traceback, domains and snapshots."""

from __future__ import annotations

import time
from typing import Any

import click

from fleet.cli.common import ago, client_options, open_client, print_json, table
from fleet.cli.plain import echo
from fleet.client.answers import ErrorGroupOut

COLUMNS = ["group", "count", "first seen", "last seen", "exception", "message"]
#: The widest message a list row shows (the whole one is in GROUP's view and --json).
MESSAGE_WIDTH = 80


def _ago(value: Any) -> str:
    if not isinstance(value, int | float) or not value:
        return "-"
    return f"{ago(max(time.time() - value, 0))} ago"


def row(g: ErrorGroupOut) -> list[Any]:
    """One group as a table row."""
    message = g["message"]
    if len(message) > MESSAGE_WIDTH:
        message = message[: MESSAGE_WIDTH - 1] + "…"
    return [g["group"], g["count"], _ago(g["first_seen"]), _ago(g["last_seen"]), g["exception"],
            message]  # fmt: skip


@click.command("errors")
@click.argument("automation_type")
@click.argument("group", required=False)
@click.option("--html", "html_of", default=None, metavar="SNAPSHOT",
              help="Print the HTML of this snapshot of GROUP.")  # fmt: skip
@click.option("-n", "limit", type=int, default=50, show_default=True, help="Groups to list.")
@click.option("--cursor", default=None, help="List the page after this cursor (paging).")
@client_options
def errors(
    automation_type: str,
    group: str | None,
    html_of: str | None,
    limit: int,
    cursor: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """List a type's error groups, newest first, or show one GROUP with its traceback,
    domains and snapshots."""
    if html_of is not None and group is None:
        raise click.UsageError("name the GROUP of the --html snapshot")
    with open_client(url, token) as client:
        if group is None:
            page = client.errors(automation_type, cursor=cursor, limit=max(1, min(limit, 200)))
            if as_json:
                print_json(page)
                return
            if not page["items"]:
                echo(f"{automation_type}: no failure recorded (groups last 7 days)")
                return
            table(f"error groups of {automation_type}", COLUMNS, [row(g) for g in page["items"]])
            if page["cursor"] is not None:
                echo(f"more: fleet errors {automation_type} --cursor {page['cursor']!r}")
            return
        if html_of is not None:
            click.echo(client.error_html(automation_type, group, html_of))
            return
        one = client.error_group(automation_type, group)
        if as_json:
            print_json(one)
            return
        echo(f"group {one['group']} of {automation_type}: {one['count']} failure(s)")
        echo(f"  exception: {one['exception']}")
        echo(f"  message:   {one['message']}")
        echo(f"  location:  {one['location']}")
        echo(f"  first seen {_ago(one['first_seen'])}, last seen {_ago(one['last_seen'])}")
        echo(f"  domains:   {', '.join(one['domains']) or '-'}")
        echo(f"  sample:    task {one['sample_task_id'] or '-'}: {one['sample_message']}")
        snaps = one.get("snapshots") or []
        if snaps:
            table(
                "snapshots",
                ["id", "taken", "task", "url", "html", "screenshot", "label"],
                [
                    [s["id"], _ago(s["taken_at"]), s["task_id"] or "-", s["url"] or "-",
                     f"{s['html_bytes']} B" + (" (cut)" if s["truncated"] else ""),
                     f"{s['png_bytes']} B" if s["png_bytes"] else "-", s["label"] or "-"]
                    for s in snaps
                ],
            )  # fmt: skip
        else:
            echo("  snapshots: none")
        echo("traceback:")
        click.echo(one.get("traceback") or "  -")
