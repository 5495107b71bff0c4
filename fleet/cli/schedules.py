"""``fleet schedules``: a type's schedules; pause, resume, run now or delete one."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import click

from fleet.cli.common import ago, client_options, open_client, print_json, table
from fleet.cli.plain import echo
from fleet.client.answers import ScheduleOut

COLUMNS = ["id", "when", "timezone", "enabled", "next run", "last run", "last task"]
#: Units of a period, largest first: a period that is a whole number of one is shown in it.
_UNITS = ((86400, "d"), (3600, "h"), (60, "m"))


def every_text(seconds: float) -> str:
    """``every 5m``, ``every 2h``, ``every 90s``."""
    for size, unit in _UNITS:
        if seconds >= size and seconds % size == 0:
            return f"every {seconds / size:g}{unit}"
    return f"every {seconds:g}s"


def when_text(value: Any, *, now: float | None = None) -> str:
    """A Unix time as local time and how far it is: ``2025-05-01 14:00:00 (in 5m)``."""
    if not isinstance(value, int | float):
        return "-"
    t = time.time() if now is None else now
    local = datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")
    delta = value - t
    return f"{local} (in {ago(delta)})" if delta >= 0 else f"{local} ({ago(-delta)} ago)"


def row(s: ScheduleOut) -> list[Any]:
    if s.get("unreadable"):
        return [s["id"], f"unreadable: {s.get('error', '')}", "", "", "", "", ""]
    cron, every = s.get("cron"), s.get("every_seconds")
    when = cron if cron is not None else every_text(float(every or 0))
    return [
        s["id"],
        when,
        s["timezone"],
        (f"error: {s['last_error']}" if s.get("last_error") else "yes")
        if s["enabled"]
        else "paused",
        when_text(s["next_run"]) if s["enabled"] else "-",
        when_text(s["last_run"]),
        s.get("last_task_id") or "-",
    ]


def _details(s: ScheduleOut) -> str:
    parts = [
        f"priority {s['priority']}",
        f"group {s['group'] or '-'}",
        f"max_attempts {s['max_attempts'] or '-'}",
        f"misfire {s['misfire']}",
        f"jitter {s['jitter_seconds']:g}s",
        "declared by the plugin" if s.get("declared") else "created over the API",
    ]
    payload = json.dumps(s["payload"], sort_keys=True, default=str)
    return " · ".join(parts) + f"\npayload: {payload}"


@click.command("schedules")
@click.argument("automation_type")
@click.argument("schedule_id", metavar="[ID]", required=False)
@click.option("--pause", is_flag=True, help="Stop ID firing until --resume.")
@click.option("--resume", is_flag=True, help="Let ID fire again, from its next tick.")
@click.option("--run-now", is_flag=True, help="Enqueue one run of ID now; prints its task id.")
@click.option("--delete", is_flag=True, help="Delete ID (asks first, unless --yes or --json).")
@click.option("--yes", is_flag=True, help="Do not ask before --delete.")
@client_options
def schedules(
    automation_type: str,
    schedule_id: str | None,
    pause: bool,
    resume: bool,
    run_now: bool,
    delete: bool,
    yes: bool,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """List a type's schedules, or show one schedule ID and pause, resume, run or
    delete it. Times are local; create and change schedules over the REST API."""
    actions = [name for name, on in (("--pause", pause), ("--resume", resume),
               ("--run-now", run_now), ("--delete", delete)) if on]  # fmt: skip
    if len(actions) > 1:
        raise click.UsageError(f"{' and '.join(actions)} exclude each other")
    if actions and schedule_id is None:
        raise click.UsageError(f"name the schedule ID to {actions[0].lstrip('-')}")
    with open_client(url, token) as client:
        if schedule_id is None:
            answer = client.schedule_listing(automation_type)
            listed = answer["schedules"]
            if as_json:
                print_json(listed)
                return
            if listed or not answer.get("note"):
                table(f"{automation_type} schedules", COLUMNS, [row(s) for s in listed])
            if answer.get("note"):
                echo(answer["note"])
            elif not listed:
                echo(f"{automation_type} has no schedules")
            return
        if run_now:
            task_id = client.schedule_run(automation_type, schedule_id)
            print_json({"task_id": task_id}) if as_json else echo(task_id)
            return
        if delete:
            if not yes and not as_json:
                click.confirm(f"Delete schedule {schedule_id} of {automation_type}?", abort=True)
            deleted = client.schedule_delete(automation_type, schedule_id)
            if as_json:
                print_json(deleted)
            else:
                echo(f"schedule {schedule_id} deleted")
            return
        if pause or resume:
            s = client.schedule_patch(automation_type, schedule_id, {"enabled": resume})
        else:
            s = client.schedule(automation_type, schedule_id)
        if as_json:
            print_json(s)
            return
        table(f"{automation_type} schedule {schedule_id}", COLUMNS, [row(s)])
        echo(_details(s))
