"""Fleet against the best peer of ONE harness run: medians per row and ratios.

    .venv/bin/python bench/ratios.py /tmp/fleet-peers/results/<timestamp>

Reads every ``*.jsonl`` of the run (one line per measured run, written by the
shared harness), takes medians per row, and prints a Markdown table with, for
each Fleet row, its ratio to the best peer on drain, steady rate and 1-by-1
enqueue, and its bulk enqueue against RQ's ``enqueue_many``.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

METRICS = (
    ("drain_rate", "drain tasks/s"),
    ("steady_rate", "steady tasks/s"),
    ("enqueue_one_rate", "enqueue 1-by-1/s"),
    ("enqueue_bulk_rate", "enqueue bulk/s"),
    ("worker_cpu_ms_per_job", "worker CPU ms/task"),
    ("drain_round_trips", "drain round trips/task (excl. the job's INCR)"),
    ("drain_commands", "drain commands/task (excl. the job's INCR)"),
)


def median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if isinstance(r.get(key), int | float)]
    return statistics.median(values) if values else None


def load(run_dir: Path) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for path in sorted(run_dir.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if not r.get("error")]
        for r in rows:
            drain = r.get("drain_redis") or {}
            # The job's own INCR is one round trip and one command for every library.
            if isinstance(drain.get("reads_per_job"), int | float):
                r["drain_round_trips"] = drain["reads_per_job"] - 1
            r["drain_commands"] = drain.get("lib_cmds_per_job_excl_incr")
        if rows:
            out[path.stem] = {key: median(rows, key) for key, _ in METRICS}
            out[path.stem]["runs"] = len(rows)
    return out


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def main(run_dir: Path) -> None:
    data = load(run_dir)
    if not data:
        raise SystemExit(f"no results (*.jsonl without an error) in {run_dir}")
    peers = {k: v for k, v in data.items() if not k.startswith("fleet")}
    fleet = {k: v for k, v in data.items() if k.startswith("fleet")}
    header = "| row | runs | " + " | ".join(label for _, label in METRICS) + " |"
    print(header)
    print("|" + "---|" * (len(METRICS) + 2))
    for name, row in sorted(data.items(), key=lambda kv: -(kv[1]["steady_rate"] or 0)):
        cells = []
        for key, _ in METRICS:
            digits = (
                3 if "cpu" in key else 2 if key in ("drain_round_trips", "drain_commands") else 0
            )
            cells.append(fmt(row[key], digits))
        print(f"| {name} | {row['runs']:.0f} | " + " | ".join(cells) + " |")
    print()

    def best(key: str) -> tuple[str, float]:
        name, row = max(peers.items(), key=lambda kv: kv[1][key] or 0)
        return name, row[key] or 0.0

    if not peers:
        # a run of Fleet's rows alone (e.g. fleet_bench.py --smoke): nothing to compare
        print(f"no peer rows in {run_dir}: ratios need a run with peers (bench/run_peers.sh)")
        return
    for name, row in sorted(fleet.items()):
        parts = []
        for key in ("drain_rate", "steady_rate", "enqueue_one_rate"):
            peer, value = best(key)
            mine = row[key] or 0.0
            parts.append(f"{key} {mine / value:.2f}x best peer ({peer} {value:,.0f})")
        rq = peers.get("rq-simple", {}).get("enqueue_bulk_rate")
        if rq and row["enqueue_bulk_rate"]:
            parts.append(f"bulk {row['enqueue_bulk_rate'] / rq:.2f}x RQ enqueue_many ({rq:,.0f})")
        print(f"- {name}: " + "; ".join(parts))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
