"""CLI client commands about tasks: ``submit``, ``tasks``, ``dlq``, ``tail``."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import click
from rich.progress import Progress

from fleet.cli.common import (
    ago,
    client_options,
    open_client,
    parse_json_arg,
    print_json,
    table,
)
from fleet.cli.console import progress_console
from fleet.cli.plain import echo
from fleet.cli.records import (
    finish_wait,
    finish_wait_all,
    one_task,
    wait_all,
)
from fleet.client.answers import BatchItemError, DeadLetter, OutputEntry, SubmitResult
from fleet.client.http import FleetClient
from fleet.core.capabilities.browse import BROWSE_STATES

#: Tasks per batch request of ``submit --from-jsonl``.
JSONL_CHUNK = 1_000


def _read_jsonl(path: str) -> list[Any]:
    payloads = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                payloads.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise click.BadParameter(f"{path}:{lineno}: not valid JSON: {exc}") from exc
    return payloads


def queued_word(delay_seconds: float | None, submitted_at: float) -> str:
    """How to call accepted tasks: ``queued``, or ``scheduled for <when> (in <delay>)``
    when a positive ``--delay`` keeps them out of the queue until then."""
    if not delay_seconds or delay_seconds <= 0:
        return "queued"
    when = datetime.fromtimestamp(submitted_at + delay_seconds).strftime("%Y-%m-%d %H:%M:%S")
    return f"scheduled for {when} (in {ago(delay_seconds)})"


@click.command("submit")
@click.argument("automation_type")
@click.argument("payload", required=False)
@click.option(
    "--from-jsonl",
    "jsonl",
    type=click.Path(exists=True, dir_okay=False),
    help="Submit one task per line (each line a payload) with the batch route.",
)
@click.option("--priority", type=int, default=None, help=">0 high, 0 normal, <0 low.")
@click.option("--task-id", default=None)
@click.option("--max-attempts", type=int, default=None)
@click.option("--ttl", "ttl_seconds", type=float, default=None, help="Drop if not started in N s.")
@click.option("--delay", "delay_seconds", type=float, default=None, help="Start after N s.")
@click.option(
    "--timeout",
    "timeout_seconds",
    type=float,
    default=None,
    help="Time limit of each run_one in N s (wins over the config's timeout_seconds).",
)
@click.option("--idempotency-key", default=None)
@click.option("--group", default=None, help="Flow-control group (a domain, an API key...).")
@click.option("--run", default=None, help="The run the task(s) join (fleet runs create).")
@click.option(
    "--unique-key", default=None, help="With --run: a key seen before in the run is a duplicate."
)
@click.option(
    "--wait",
    is_flag=True,
    help="Wait for the task(s) to end, print the outputs (JSON lines); exit 1 if one ended dead.",
)
@click.option(
    "--wait-timeout",
    type=float,
    default=None,
    help="With --wait: give up after N seconds (exit 2). Default: no limit.",
)
@client_options
def submit(
    automation_type: str,
    payload: str | None,
    jsonl: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
    wait: bool,
    wait_timeout: float | None,
    **options: Any,
) -> None:
    """Submit a task: PAYLOAD is JSON, @file or - (stdin); or --from-jsonl FILE."""
    if (payload is None) == (jsonl is None):
        raise click.UsageError("give either a PAYLOAD or --from-jsonl FILE")
    submitted_at = time.time()
    queued = queued_word(options.get("delay_seconds"), submitted_at)
    limit = math.inf if wait_timeout is None else wait_timeout
    with open_client(url, token) as client:
        if payload is not None:
            result = client.submit(automation_type, parse_json_arg(payload), **options)
            if wait:
                record = client.wait_task(automation_type, str(result["task_id"]), limit)
                finish_wait(record, as_json)
                return
            if as_json:
                print_json(result)
            else:
                state = queued if result["queued"] else "duplicate of an existing task"
                echo(f"{result['task_id']} {state}")
            return
        assert jsonl is not None
        payloads = _read_jsonl(jsonl)
        extra = {k: v for k, v in options.items() if v is not None}
        extra.pop("task_id", None)  # one id cannot name many tasks
        results: list[SubmitResult | BatchItemError] = []
        with Progress(disable=as_json, console=progress_console()) as progress:
            bar = progress.add_task(f"submitting to {automation_type}", total=len(payloads))
            for start in range(0, len(payloads), JSONL_CHUNK):
                chunk = payloads[start : start + JSONL_CHUNK]
                results += client.submit_batch(
                    automation_type, [{"payload": p, **extra} for p in chunk]
                )
                progress.advance(bar, len(chunk))
        taken: list[SubmitResult] = []
        errors: list[tuple[int, BatchItemError]] = []
        for i, r in enumerate(results):
            # Each result is one or the other: a refusal has no task_id, a task no error
            # (mypy narrows a TypedDict union by a key only where it is absent).
            if "task_id" not in r:
                errors.append((i + 1, r))
            elif "error" not in r:
                taken.append(r)
        if wait:
            ids = [r["task_id"] for r in taken]
            records = wait_all(client, automation_type, ids, limit, as_json)
            finish_wait_all(records, len(errors), as_json)
            return
        if as_json:
            print_json(results)
        else:
            accepted = sum(1 for r in taken if r["queued"])
            dupes = sum(1 for r in taken if r["duplicate"])
            echo(f"{accepted} {queued}, {dupes} duplicates, {len(errors)} refused")
            for line, r in errors[:20]:
                echo(f"  line {line}: {r['error']}", err=True)
        if errors:
            raise SystemExit(1)


@click.command("tasks")
@click.argument("automation_type")
@click.argument("task_id", required=False)
@click.option("--cancel", is_flag=True, help="Deprecated: fleet task TYPE TASK_ID --cancel.")
@click.option(
    "--state",
    type=click.Choice(BROWSE_STATES),
    default=None,
    help="List the type's tasks in this state, newest first (done: newest finished).",
)
@click.option("--run", "run_id", default=None, help="Only the tasks of this run (with --state).")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--after", default=None, help="The `next` a previous page printed.")
@client_options
def tasks(
    automation_type: str,
    task_id: str | None,
    cancel: bool,
    state: str | None,
    run_id: str | None,
    limit: int,
    after: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Queue depths and counters of a type; with --state, a page of its tasks.

    With a TASK_ID: deprecated, use fleet task."""
    if cancel and task_id is None:
        raise click.UsageError("--cancel needs a TASK_ID")
    if state is None and (run_id is not None or after is not None):
        raise click.UsageError("--run and --after list tasks: give --state too")
    if state is not None:
        if task_id is not None:
            raise click.UsageError("--state lists tasks; a TASK_ID is one task: fleet task")
        _task_page(automation_type, state, run_id, limit, after, url, token, as_json)
        return
    if task_id is not None:
        # One command for one task; this form stays for the scripts that use it. The
        # note comes last, so the record (or its JSON) reads as it always did.
        try:
            one_task(automation_type, task_id, url, token, as_json, cancel=cancel)
        finally:
            command = f"fleet task {automation_type} {task_id}" + (" --cancel" if cancel else "")
            echo(f"`fleet tasks TYPE TASK_ID` is deprecated: use `{command}`", err=True)
        return
    with open_client(url, token) as client:
        q = client.queue(automation_type)
    if as_json:
        print_json(q)
        return
    p = q["pending"]
    age = q["oldest_pending_age"]
    table(
        f"{automation_type} queue",
        ["high", "normal", "low", "processing", "scheduled", "dead", "oldest pending"],
        [
            [
                p["high"],
                p["normal"],
                p["low"],
                q["processing"],
                q["scheduled"],
                q["dead"],
                "-" if age is None else f"{age:.1f}s",
            ]
        ],
    )
    c = q["counters"]
    table(None, list(c), [list(c.values())])


def _task_page(
    automation_type: str,
    state: str,
    run_id: str | None,
    limit: int,
    after: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """``fleet tasks TYPE --state S``: one page, and the command for the next."""
    with open_client(url, token) as client:
        page = client.tasks(automation_type, state, run=run_id, after=after, limit=limit)
    if as_json:
        print_json(page)
        return
    when = "finished" if state == "done" else "submitted"
    rows = [
        [
            t["id"],
            t["attempt"],
            t["run"] or "-",
            t["group"] or "-",
            ago(time.time() - (t.get("finished_at") or t["enqueued_at"]))
            if state == "done"
            else ago(time.time() - t["enqueued_at"]),
            t["last_error"] or "",
        ]
        for t in page["items"]
    ]
    title = f"{automation_type} {state}" + (f" (run {run_id})" if run_id else "")
    if rows:
        table(title, ["task", "attempt", "run", "group", when, "last error"], rows)
    else:
        echo(f"no {state} task" + (" on this page" if after else "") + ".")
    if page["next"]:
        more = f"fleet tasks {automation_type} --state {state}"
        more += (f" --run {run_id}" if run_id else "") + f" --after {page['next']}"
        echo(f"more: {more}", err=True)


@click.command("dlq")
@click.argument("automation_type")
@click.option("-n", "n", type=int, default=50, show_default=True, help="How many to show/replay.")
@click.option("--replay", is_flag=True, help="Replay the N oldest dead tasks.")
@click.option("--replay-id", "replay_ids", multiple=True, help="Replay these task ids.")
@click.option("--all", "replay_all", is_flag=True, help="With --replay: every dead task.")
@click.option("--drain", is_flag=True, help="Delete every dead task.")
@click.option("--yes", is_flag=True, help="Do not ask before --drain.")
@client_options
def dlq(
    automation_type: str,
    n: int,
    replay: bool,
    replay_ids: tuple[str, ...],
    replay_all: bool,
    drain: bool,
    yes: bool,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Peek the dead-letter queue of a type; --replay or --drain it."""
    with open_client(url, token) as client:
        if drain:
            if not yes and not as_json:
                click.confirm(f"Delete every dead task of {automation_type}?", abort=True)
            count = client.dead_drain(automation_type)
            print_json({"drained": count}) if as_json else echo(f"{count} dead tasks deleted")
            return
        if replay or replay_ids:
            count = client.dead_replay(
                automation_type,
                n=None if replay_all or replay_ids else n,
                task_ids=list(replay_ids) or None,
            )
            print_json({"replayed": count}) if as_json else echo(f"{count} tasks replayed")
            return
        dead = client.dead_peek(automation_type, n)
        if as_json:
            print_json(dead)
            return
        table(
            f"{automation_type} dead letters ({len(dead)} shown)",
            ["task", "attempts", "priority", "last error", "payload"],
            [
                [
                    d["id"],
                    d["attempt"],
                    d["priority"],
                    (d.get("last_error") or "")[:80],
                    # an entry that cannot be read: what is stored instead
                    _dead_payload(d)[:60],
                ]
                for d in dead
            ],
        )


def _dead_payload(d: DeadLetter) -> str:
    """A dead letter's payload as JSON, or the stored text of one that cannot be read."""
    return (d.get("raw") or "") if d.get("unreadable") else json.dumps(d["payload"])


def follow_entries(client: FleetClient, automation_type: str, n: int) -> Iterator[OutputEntry]:
    """The ``n`` newest output entries, then every new one as it is emitted, each once.

    The event stream is subscribed before the newest entries are read, so an entry
    emitted in between is not lost; one that is both read and announced is shown once.
    """
    events = client.events([automation_type])
    for name, _ in events:
        if name == "hello":  # subscribed: from here on no emit is missed
            break
    shown: set[str] = set()
    for entry in client.output_peek(automation_type, n, newest=True) if n else []:
        shown.add(entry["id"])
        yield entry
    for name, data in events:
        if name == "emit" and data.get("type") == automation_type:
            entry = data["data"]
            if entry.get("id") in shown:
                shown.discard(entry["id"])  # read above already; each repeats once at most
                continue
            yield entry


@click.command("tail")
@click.argument("automation_type")
@click.option(
    "-n",
    "n",
    type=click.IntRange(0, 1_000),
    default=20,
    show_default=True,
    help="How many of the newest entries to print first (0: none).",
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new outputs as they are emitted.")
@client_options
def tail(
    automation_type: str, n: int, follow: bool, url: str | None, token: str | None, as_json: bool
) -> None:
    """Print the newest N entries of a type's output stream, oldest of them first (one
    JSON line each); --follow then prints new emits live (-n 0 -f: only new ones)."""
    with open_client(url, token) as client:
        if n == 0:
            # Nothing to print yet, but ask the master anyway: an unknown type or a
            # refused token must be an error, not silence.
            client.output_peek(automation_type, 1)
        if not follow:
            for entry in client.output_peek(automation_type, n, newest=True) if n else []:
                echo(json.dumps(entry if as_json else entry["payload"]))
            return
        try:
            for entry in follow_entries(client, automation_type, n):
                echo(json.dumps(entry if as_json else entry.get("payload")))
        except KeyboardInterrupt:
            return
