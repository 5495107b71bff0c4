"""Task records in the CLI: ``fleet task`` and the waiting of ``fleet submit --wait``."""

from __future__ import annotations

import json
import time
from typing import Any, cast

import click
from rich.progress import Progress

from fleet.cli.common import ago, client_options, open_client, print_json, table
from fleet.cli.console import progress_console
from fleet.cli.plain import echo
from fleet.client.answers import TaskRecord
from fleet.client.http import ENDED_STATES, FleetClient
from fleet.core.results import result_ttl

#: Seconds between two passes over the tasks ``submit --from-jsonl --wait`` waits for.
WAIT_ALL_PAUSE = 0.5
#: Exit status of a wait for a task that ended dead or cancelled (or is unknown).
EXIT_NOT_DONE = 1
#: Exit status of a wait that ran out of time before the task ended.
EXIT_STILL_RUNNING = 2


def wait_status(states: list[str]) -> int:
    """The exit status of a wait, the same for ``fleet task --wait`` and ``fleet submit
    --wait``: 0 when every task ended done, :data:`EXIT_NOT_DONE` when one ended dead or
    cancelled (or is unknown), else :data:`EXIT_STILL_RUNNING` when one had not ended."""
    if any(s in ENDED_STATES and s != "done" for s in states):
        return EXIT_NOT_DONE
    if any(s not in ENDED_STATES for s in states):
        return EXIT_STILL_RUNNING
    return 0


def _when(t: float | None) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _took(started: float | None, ended: float | None) -> str:
    if started is None or ended is None:
        return "-"
    return f"{max(ended - started, 0.0):.2f}s"


def _progress_text(progress: dict[str, Any] | None) -> str:
    if not progress:
        return "-"
    parts = []
    if progress.get("fraction") is not None:
        parts.append(f"{progress['fraction'] * 100:.0f}%")
    if progress.get("message"):
        parts.append(str(progress["message"]))
    return " ".join(parts) + f" (attempt {progress.get('attempt')}, {_when(progress.get('at'))})"


def show_record(record: TaskRecord) -> None:
    """A task's record for people: its state, times and progress, then its outputs."""
    table(
        None,
        ["task", "state", "attempt", "max", "priority", "last error"],
        [
            [
                record["task_id"],
                record["state"],
                record["attempt"],
                record["max_attempts"],
                record["priority"],
                record.get("last_error"),
            ]
        ],
    )
    echo(
        f"submitted {_when(record.get('submitted_at'))} · started "
        f"{_when(record.get('started_at'))} · finished {_when(record.get('finished_at'))}"
    )
    echo(f"progress  {_progress_text(record.get('progress'))}")
    trace_id = trace_id_of(record)
    if trace_id:
        echo(f"trace id  {trace_id}")
    attempts = record.get("attempts") or []
    if attempts:
        table(
            "attempts",
            ["attempt", "worker", "started", "ended", "took", "outcome", "error"],
            [
                [
                    a["attempt"],
                    a.get("worker") or "-",
                    _when(a.get("started_at")),
                    _when(a.get("ended_at")),
                    _took(a.get("started_at"), a.get("ended_at")),
                    a.get("outcome", ""),
                    a.get("error") or "",
                ]
                for a in attempts
            ],
        )
    outputs = record.get("outputs") or []
    total = record.get("outputs_total")
    if total is None:
        total = len(outputs)
    if outputs:
        shown = f"the newest {len(outputs)} of {total}" if total > len(outputs) else str(total)
        table(
            f"outputs ({shown})",
            ["id", "attempt", "payload"],
            [[o["id"], o["attempt"], _payload_text(o)] for o in outputs],
        )


def trace_id_of(record: TaskRecord) -> str | None:
    """The OpenTelemetry trace id of the task: the record's ``trace_id``, or the second
    dash-separated part of a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``)."""
    if record.get("trace_id"):
        return record.get("trace_id")
    traceparent = cast("dict[str, Any]", record).get("traceparent")
    parts = traceparent.split("-") if isinstance(traceparent, str) else []
    return parts[1] if len(parts) == 4 and parts[1] else None


def _payload_text(output: dict[str, Any]) -> str:
    if output.get("truncated"):
        return f"({output.get('bytes')} bytes: whole in the type's output stream only)"
    return json.dumps(output["payload"])[:100]


def echo_outputs(record: TaskRecord) -> None:
    """Each output payload of the record as a JSON line (stdout)."""
    for output in record.get("outputs") or []:
        echo(json.dumps(output["payload"], ensure_ascii=False))


def unknown_message(automation_type: str, task_id: str) -> str:
    return (
        f"no task {task_id!r} of {automation_type!r}: never submitted, or it "
        f"finished more than {ago(result_ttl())} ago"
    )


def finish_wait(record: TaskRecord, as_json: bool) -> None:
    """Print what one waited-for task left and exit as it ended (:func:`wait_status`)."""
    if as_json:
        print_json(record)
    else:
        echo_outputs(record)
        echo(f"{record['task_id']} {record['state']} (attempt {record['attempt']})", err=True)
        if record.get("last_error") and record["state"] == "dead":
            echo(f"  last error: {record['last_error']}", err=True)
    _exit_as_waited(record, as_json)


def _exit_as_waited(record: TaskRecord, as_json: bool) -> None:
    status = wait_status([record["state"]])
    if status == EXIT_STILL_RUNNING and not as_json:
        echo("the wait ended before the task did", err=True)
    if status:
        raise SystemExit(status)


def wait_all(
    client: FleetClient, automation_type: str, task_ids: list[str], seconds: float, quiet: bool
) -> list[TaskRecord]:
    """The records of ``task_ids`` once each ended or ``seconds`` passed, with a
    progress bar; in the order given."""
    deadline = time.monotonic() + seconds
    records: dict[str, TaskRecord] = {}
    pending = list(dict.fromkeys(task_ids))
    with Progress(disable=quiet, console=progress_console()) as progress:
        bar = progress.add_task(f"waiting for {automation_type}", total=len(pending))
        while pending:
            left: list[str] = []
            for task_id in pending:
                record = client.task_state(automation_type, task_id)
                records[task_id] = record
                if record["state"] in ENDED_STATES:
                    progress.advance(bar)
                else:
                    left.append(task_id)
            pending = left
            if pending and time.monotonic() + WAIT_ALL_PAUSE > deadline:
                break
            if pending:
                time.sleep(WAIT_ALL_PAUSE)
    return [records[t] for t in dict.fromkeys(task_ids)]


@click.command("task")
@click.argument("automation_type")
@click.argument("task_id")
@click.option(
    "--wait",
    "wait_seconds",
    type=float,
    default=None,
    help="Wait up to N seconds for the task to end; exit 0 only if it ended done.",
)
@click.option("--cancel", is_flag=True, help="Cancel the task instead of showing it.")
@client_options
def task(
    automation_type: str,
    task_id: str,
    wait_seconds: float | None,
    cancel: bool,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """A task's record: state, attempt, times, last error, progress, outputs and trace
    id (--cancel to cancel it)."""
    one_task(automation_type, task_id, url, token, as_json, wait_seconds, cancel)


def one_task(
    automation_type: str,
    task_id: str,
    url: str | None,
    token: str | None,
    as_json: bool,
    wait_seconds: float | None = None,
    cancel: bool = False,
) -> None:
    """``fleet task``: show one task's record (after a wait), or cancel the task.

    Raises:
        click.UsageError: ``cancel`` with a wait.
        click.ClickException: The master does not know the task (after its record is
            printed, with ``as_json``).
        SystemExit: After a wait, the task did not end done (:func:`wait_status`).
    """
    if cancel and wait_seconds is not None:
        raise click.UsageError("--cancel and --wait do not go together")
    with open_client(url, token) as client:
        if cancel:
            cancelled = client.cancel(automation_type, task_id)
            print_json(cancelled) if as_json else echo(f"{task_id} {cancelled['outcome']}")
            return
        if wait_seconds is None:
            record = client.task_state(automation_type, task_id)
        else:
            record = client.wait_task(automation_type, task_id, wait_seconds)
    if as_json:
        print_json(record)
    if record["state"] == "unknown":
        # Scripts test the exit status: a typo'd or long-forgotten id is an error.
        raise click.ClickException(unknown_message(automation_type, task_id))
    if not as_json:
        show_record(record)
    if wait_seconds is not None:
        _exit_as_waited(record, as_json)


def finish_wait_all(records: list[TaskRecord], refused: int, as_json: bool) -> None:
    """Print what the waited-for tasks left (their outputs, then a summary) and
    exit 1 if one ended dead or cancelled or was refused, 2 if one still runs."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record["state"]] = counts.get(record["state"], 0) + 1
    if as_json:
        print_json(records)
    else:
        for record in records:
            echo_outputs(record)
        summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        echo(f"{summary or 'no tasks'}; {refused} refused", err=True)
    status = EXIT_NOT_DONE if refused else wait_status([r["state"] for r in records])
    if status:
        raise SystemExit(status)
