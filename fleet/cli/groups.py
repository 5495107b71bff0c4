"""``fleet groups``: a type's flow-control groups, and one group's limits."""

from __future__ import annotations

import time
from typing import Any

import click

from fleet.cli.common import client_options, open_client, print_json, table
from fleet.cli.plain import echo
from fleet.client.answers import GroupOut


def _until(value: Any) -> str:
    if not isinstance(value, int | float):
        return ""
    left = value - time.time()
    return f"{left:.0f}s" if left > 0 else ""


def _limit(value: Any, own: Any) -> str:
    text = "-" if value is None else str(value)
    return f"{text} *" if own is not None else text


def _row(g: GroupOut) -> list[Any]:
    own = g.get("settings") or {}
    return [
        g["group"],
        g["pending"],
        g["running"],
        _limit(g["concurrency"], own.get("concurrency")),
        _limit(g["rate"], own.get("rate")),
        "paused" if g["paused"] else ("throttled" if _until(g["throttled_until"]) else ""),
        _until(g["throttled_until"]),
    ]


COLUMNS = ["group", "pending", "running", "concurrency", "rate", "state", "held for"]


@click.command("groups")
@click.argument("automation_type")
@click.argument("group", required=False)
@click.option("--pause", is_flag=True, help="Start nothing of GROUP, fleet-wide.")
@click.option("--resume", is_flag=True, help="Let GROUP start tasks again.")
@click.option("--rate", default=None, help="GROUP's own rate: 5/s, 100/m, 1000/h.")
@click.option("--concurrency", type=int, default=None, help="GROUP's own concurrency cap.")
@click.option("--reset", is_flag=True, help="GROUP back to the type's limits (lifts a throttle).")
@click.option("-n", "n", type=int, default=100, show_default=True, help="Groups to list.")
@click.option("--after", default=None, help="List the groups after this name (paging).")
@client_options
def groups(
    automation_type: str,
    group: str | None,
    pause: bool,
    resume: bool,
    rate: str | None,
    concurrency: int | None,
    reset: bool,
    n: int,
    after: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """List a type's groups, or show and change one GROUP's limits.

    A value marked * is the group's own; the others are the type's
    group_concurrency and group_rate.
    """
    changes = pause or resume or rate is not None or concurrency is not None
    if pause and resume:
        raise click.UsageError("--pause and --resume exclude each other")
    if (changes or reset) and group is None:
        raise click.UsageError("name the GROUP to change")
    if reset and changes:
        raise click.UsageError("--reset cannot be combined with other changes")
    with open_client(url, token) as client:
        if group is None:
            page = client.groups(automation_type, after=after, limit=max(1, min(n, 1000)))
            if as_json:
                print_json(page)
                return
            d = page["defaults"]
            title = (
                f"{automation_type} groups ({len(page['groups'])} shown; type limits: "
                f"concurrency {d['concurrency'] or '-'}, rate {d['rate'] or '-'})"
            )
            table(title, COLUMNS, [_row(g) for g in page["groups"]])
            if page["next"] is not None:
                echo(f"more: fleet groups {automation_type} --after {page['next']!r}")
            return
        if reset:
            answer = client.group_reset(automation_type, group)
        elif changes:
            own = client.group(automation_type, group).get("settings") or {}
            answer = client.group_set(
                automation_type,
                group,
                concurrency=concurrency if concurrency is not None else own.get("concurrency"),
                rate=rate if rate is not None else own.get("rate"),
                paused=pause or (bool(own.get("paused")) and not resume),
            )
        else:
            answer = client.group(automation_type, group)
        if as_json:
            print_json(answer)
        else:
            table(f"{automation_type} group {group}", COLUMNS, [_row(answer)])
