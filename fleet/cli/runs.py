"""``fleet runs``: list runs, show one, watch one to its end, create, pause, resume and
cancel."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from fleet.cli.common import client_options, open_client, print_json, table
from fleet.cli.console import progress_console
from fleet.cli.costs import meters_line
from fleet.cli.plain import echo
from fleet.client.answers import RunOut
from fleet.client.http import FleetClient
from fleet.core.metering import FLUSH_SECONDS

COLUMNS = ["run", "name", "state", "submitted", "done", "pending", "running", "dead", "dupes"]
SHOWN = ("submitted", "pending", "running", "done", "dead", "cancelled", "expired", "duplicates")


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def _row(r: RunOut) -> list[Any]:
    c = r["counters"]
    cells = [c["submitted"], c["done"], c["pending"], c["running"], c["dead"], c["duplicates"]]
    return [r["run_id"], r.get("name") or "", r["state"], *cells]


#: A crawl's meters, shown live by ``fleet runs watch`` (docs/crawling.md).
CRAWL_FIGURES = ("pages", "items", "robots_skipped", "not_modified", "http_errors")


def watch_line(r: RunOut) -> str:
    """``run <id> (running) · pages 120 · items 118 · dupes 340 · spend 0.12``: the
    run's state, a crawl's figures and its duplicates, and its spend if priced."""
    meters = r.get("meters") or {}
    parts = [f"run {r['run_id']} ({r['state']})"]
    parts += [f"{m} {meters[m]:g}" for m in CRAWL_FIGURES if meters.get(m)]
    if r["counters"]["duplicates"]:
        parts.append(f"dupes {r['counters']['duplicates']}")
    if meters.get("spend"):
        parts.append(f"spend {meters['spend']:.2f}")
    return " · ".join(parts)


def settled(client: FleetClient, record: RunOut) -> RunOut:
    """An ended run once its meters stopped moving: workers send what their tasks
    spent every ``FLUSH_SECONDS``, so the last tasks' meters land a moment after the
    run ends (read again until two reads a flush apart agree, a few seconds at most)."""
    deadline = time.monotonic() + 3 * FLUSH_SECONDS
    while time.monotonic() < deadline:
        time.sleep(FLUSH_SECONDS + 0.2)
        again = client.run(record["run_id"])
        if again.get("meters") == record.get("meters"):
            return again
        record = again
    return record


def show_run(r: RunOut) -> None:
    """A run for people: state, times, counters in total and per type."""
    echo(f"run       {r['run_id']}" + (f" ({r['name']})" if r.get("name") else ""))
    paused = f" ({r['paused_reason']})" if r.get("paused_reason") else ""
    echo(f"state     {r['state']}{paused}")
    echo(f"created   {_when(r['created_at'])}")
    echo(f"finished  {_when(r['finished_at'])}")
    on_complete = r["on_complete"]
    if on_complete:
        echo(f"callback  {on_complete['type']}")
    rows = [["(all)", *(r["counters"][k] for k in SHOWN)]]
    rows += [[t, *(c[k] for k in SHOWN)] for t, c in r["by_type"].items()]
    table(None, ["type", *SHOWN], rows)
    meters = r.get("meters")
    if meters is not None:
        echo(f"spent     {meters_line(meters)}")
    budget = r.get("budget")
    if budget:
        caps = ", ".join(f"{k} {v:g}" for k, v in budget.items())
        remaining = r.get("budget_left")
        rest = (
            ""
            if remaining is None
            else "; left " + ", ".join(f"{k} {v:g}" for k, v in remaining.items())
        )
        echo(f"budget    {caps}{rest}")
    for m in r.get("monitors") or []:
        value = "-" if m["value"] is None else f"{m['value']:g}"
        echo(f"monitor   {m['monitor']}: {m['state']} ({value}, threshold {m['threshold']:g})")


@click.group("runs", invoke_without_command=True)
@click.option("-n", "n", type=int, default=50, show_default=True, help="Runs to list.")
@click.option("--after", default=None, help="List the runs after this one (paging).")
@client_options
@click.pass_context
def runs(
    ctx: click.Context,
    n: int,
    after: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """List runs, newest first (or: show, watch, create, pause, resume, cancel one)."""
    if ctx.invoked_subcommand is not None:
        return
    with open_client(url, token) as client:
        page = client.runs(after=after, limit=max(1, min(n, 500)))
    if as_json:
        print_json(page)
        return
    table(f"runs ({len(page['runs'])} shown)", COLUMNS, [_row(r) for r in page["runs"]])
    if page["next"] is not None:
        echo(f"more: fleet runs --after {page['next']}")


@runs.command("show")
@click.argument("run_id")
@client_options
def show(run_id: str, url: str | None, token: str | None, as_json: bool) -> None:
    """A run's state, times and counters (total and per type)."""
    with open_client(url, token) as client:
        record = client.run(run_id)
    if as_json:
        print_json(record)
    else:
        show_run(record)


@runs.command("watch")
@click.argument("run_id")
@click.option("--interval", type=float, default=1.0, show_default=True, help="Seconds per look.")
@client_options
def watch(run_id: str, interval: float, url: str | None, token: str | None, as_json: bool) -> None:
    """A live progress bar of done / submitted until the run ends; exit 1 if it
    ended cancelled or with dead tasks."""
    with open_client(url, token) as client:
        record = client.run(run_id)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, disable=as_json, console=progress_console()) as progress:
            bar = progress.add_task(f"run {run_id}", total=None)
            while True:
                c = record["counters"]
                ended = c["done"] + c["dead"] + c["cancelled"] + c["expired"]
                progress.update(bar, completed=ended, total=max(c["submitted"], 1))
                if record["state"] not in ("running", "paused"):
                    break
                progress.update(bar, description=watch_line(record))
                time.sleep(max(interval, 0.05))
                record = client.run(run_id, wait=min(max(interval, 0.05), 60.0))
            record = settled(client, record)
    if as_json:
        print_json(record)
    else:
        show_run(record)
    if record["state"] != "done" or record["counters"]["dead"]:
        raise SystemExit(1)


@runs.command("create")
@click.option("--name", default=None, help="A name to know the run by.")
@click.option("--on-complete-type", default=None, help="Type of the task submitted at the end.")
@click.option("--on-complete-payload", default=None, help="Its payload (JSON object).")
@click.option(
    "types",
    "--type",
    multiple=True,
    help="A type a scoped token may submit into the run (repeatable).",
)
@click.option(
    "--max-delay",
    "max_delay",
    type=float,
    default=None,
    help="The longest delay (seconds) of a task of the run (default 86400).",
)
@click.option(
    "budget_caps",
    "--budget",
    multiple=True,
    metavar="METER=CAP",
    help="A cap at which the run pauses: spend=50, bytes=5e9, solver_calls=1000 "
    "(repeatable; docs/costs.md).",
)
@click.option(
    "monitor_specs",
    "--monitor",
    multiple=True,
    metavar="NAME=VALUE",
    help="A monitor of its data: min_items=100, max_error_rate=0.05, "
    "max_null_rate.price=0.1 (repeatable; docs/monitors.md).",
)
@client_options
def create(
    name: str | None,
    on_complete_type: str | None,
    on_complete_payload: str | None,
    types: tuple[str, ...],
    max_delay: float | None,
    budget_caps: tuple[str, ...],
    monitor_specs: tuple[str, ...],
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Create a run; prints its id (submit into it with fleet submit --run ID)."""
    on_complete = None
    if on_complete_type is not None:
        payload = json.loads(on_complete_payload) if on_complete_payload else {}
        on_complete = {"type": on_complete_type, "payload": payload}
    elif on_complete_payload is not None:
        raise click.UsageError("--on-complete-payload needs --on-complete-type")
    with open_client(url, token) as client:
        run_id = client.create_run(
            name=name,
            on_complete=on_complete,
            types=list(types) or None,
            max_delay_seconds=max_delay,
            budget=parse_budget(budget_caps),
            monitors=parse_monitors(monitor_specs),
        )
    if as_json:
        print_json({"run_id": run_id})
    else:
        echo(run_id)


@runs.command("cancel")
@click.argument("run_id")
@client_options
def cancel(run_id: str, url: str | None, token: str | None, as_json: bool) -> None:
    """Cancel a run: its pending tasks are cancelled, its running ones stopped."""
    with open_client(url, token) as client:
        record = client.cancel_run(run_id)
    if as_json:
        print_json(record)
    else:
        show_run(record)


def parse_monitors(specs: tuple[str, ...]) -> dict[str, Any] | None:
    """``("min_items=100", "max_null_rate.price=0.1")`` as ``{"min_items": 100.0,
    "max_null_rate": {"price": 0.1}}`` (None if none); the master checks them."""
    if not specs:
        return None
    out: dict[str, Any] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        try:
            number = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise click.BadParameter(
                f"{spec!r} is not NAME=VALUE (e.g. min_items=100)", param_hint="--monitor"
            )
        head, _, field = name.strip().partition(".")
        if field:
            out.setdefault(head, {})[field] = number
        else:
            out[head] = int(number) if head == "min_items" and number.is_integer() else number
    return out


def parse_budget(caps: tuple[str, ...]) -> dict[str, float] | None:
    """``("spend=50", "bytes=5e9")`` as ``{"spend": 50.0, "bytes": 5e9}`` (None if none)."""
    if not caps:
        return None
    out: dict[str, float] = {}
    for cap in caps:
        name, sep, value = cap.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise click.BadParameter(
                f"{cap!r} is not METER=CAP (e.g. bytes=5e9)", param_hint="--budget"
            )
    return out


@runs.command("pause")
@click.argument("run_id")
@click.option("--reason", default=None, help="Why (shown with the run).")
@client_options
def pause(
    run_id: str, reason: str | None, url: str | None, token: str | None, as_json: bool
) -> None:
    """Pause a run: its queued tasks wait, its running ones finish."""
    with open_client(url, token) as client:
        record = client.pause_run(run_id, reason)
    if as_json:
        print_json(record)
    else:
        show_run(record)


@runs.command("resume")
@click.argument("run_id")
@click.option(
    "budget_caps",
    "--budget",
    multiple=True,
    metavar="METER=CAP",
    help="The run's new budget (repeatable): a run paused at its budget needs a higher one.",
)
@client_options
def resume(
    run_id: str, budget_caps: tuple[str, ...], url: str | None, token: str | None, as_json: bool
) -> None:
    """Resume a paused run (optionally with a raised budget)."""
    with open_client(url, token) as client:
        record = client.resume_run(run_id, parse_budget(budget_caps))
    if as_json:
        print_json(record)
    else:
        show_run(record)
