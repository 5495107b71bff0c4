"""Every script under bench/ runs once on a tiny input (``--smoke``) and prints its
result, so that a rename or a refactor cannot silently break the benchmarks (a smoke
run, not a timing). Scripts that need Redis get the session's redis-server."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
PEERS = ROOT.parent / "shared" / "bench" / "peers"

#: script -> (its arguments, "{url}" standing for the Redis URL; what its output must show)
SCRIPTS: dict[str, tuple[list[str], str]] = {
    "ab_commits.py": (
        [str(ROOT), str(ROOT), "--smoke", "--url", "{url}"],
        r"median after: enqueue/s [\d,.]+, .*drain/s [\d,.]+",
    ),
    "blocks.py": (
        ["--smoke"],
        r"\| ordinary 100 KB page \| [\d.]+ \| [\d.]+ \|"
        r"(.|\n)*\| 403 generic \| [\d.]+ \| [\d.]+ \|",
    ),
    "http_client.py": (
        ["--smoke"],
        r"\| httpx \| \d+ \| \+0 µs \|(.|\n)*\| ctx.http\(\), 3 tiers \| \d+ \| [+-]\d+ µs \|",
    ),
    "browse.py": (
        ["--smoke", "--url", "{url}"],
        r"\| sqlite \| pending \| 2,000 \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+x \|"
        r"(.|\n)*\| redis \| dead \| 2,000 \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+x \|",
    ),
    "cluster_drain.py": (
        ["--smoke"],
        r"\| one server \| [\d,]+ \|\n\| cluster, 3 primaries \| [\d,]+ \|",
    ),
    "crawl.py": (
        ["--smoke", "--url", "{url}"],
        r"\| Crawler, slots=16, .* \| 42 \| [\d.]+ \| [\d,.]+ \|"
        r"(.|\n)*\| plain recipe \(docs/runs.md\), slots=16, no group \| 42 \|"
        r"(.|\n)*Crawler / plain recipe, pages/s: [\d.]+x",
    ),
    "crawl_bytes.py": (
        ["--smoke", "--url", "{url}"],
        r"false positives\) 0(.|\n)*\| the run's unique-key filter \| [\d.]+ \|"
        r"(.|\n)*\| recrawl record \(20 links\) \| [\d,.]+ \|",
    ),
    "config_patch.py": (
        ["--smoke", "--redis-url", "{url}"],
        r"\| 1 \| [\d.]+ \| [\d.]+ \| [\d,]+ \|(.|\n)*\| 3 \| ",
    ),
    "batching.py": (
        ["--smoke"],
        r"ctx.submit, 1 submitter\(s\): [\d,]+/s(.|\n)*ctx.submit, 100 submitter\(s\)"
        r"(.|\n)*emits, 2 bursts of 50: [\d,]+/s, [\d,]+ script calls",
    ),
    "big_fleet.py": (
        ["--smoke", "--url", "{url}"],
        r"20 simulated workers(.|\n)*GET /api/v1/workers: \d+ samples, p50(.|\n)*master: \d+ %",
    ),
    "floors.py": (
        ["--smoke", "--url", "{url}"],
        r"\| ctx.submit one at a time \(one round trip each\) \| [\d,]+/s, [\d.]+ µs CPU"
        r"(.|\n)*23 keys \| [\d.]+ µs \|(.|\n)*INCR, 50 callers \| [\d.]+ µs CPU \|",
    ),
    "groups.py": (["--smoke", "--url", "{url}"], r"\| 100 \| [\d,]+ \| [\d.]+x \|"),
    "identities.py": (
        ["--smoke", "--url", "{url}"],
        r"\| sqlite \| 10 \| [\d,]+ \| [\d.]+ (.|\n)*\| redis \| 50 \| [\d,]+ \| [\d.]+ ",
    ),
    "history_size.py": (
        ["--smoke", "--url", "{url}"],
        r"redis: [\d,]+ buckets(.|\n)*sqlite: [\d,]+ buckets.*per busy day",
    ),
    "latency.py": (["--smoke", "--url", "{url}"], r"submit -> run_one start over 20 tasks.*p99"),
    "queued_memory.py": (["--smoke"], r"\| fleet \| [\d,]+ \|"),
    "redis_footprint.py": (
        ["--smoke", "--url", "{url}"],
        r"bytes per queued task(.|\n)*idle worker .* commands/s",
    ),
    "redis_micro.py": (["--smoke", "--url", "{url}"], r"idle worker \(one feeder.*commands/s"),
    "progress.py": (["--smoke", "--url", "{url}"], r"20 slots x 1 calls/s(.|\n)*redis CPU"),
    "start_ab.py": (
        [str(ROOT), str(ROOT), "--smoke", "--url", "{url}"],
        r"median after: start [\d.]+ s\nmedian pairwise after/before: [\d.]+",
    ),
    "task_records.py": (
        ["--smoke", "--url", "{url}"],
        r"redis: +[\d,]+ \| [\d,]+(.|\n)*sqlite: (.|\n)*memory: ",
    ),
    "run_keys.py": (
        ["--smoke", "--url", "{url}"],
        r"unique keys on Redis(.|\n)*repeats caught: 5,000 of 5,000(.|\n)*memory +unique",
    ),
    "rest_submit.py": (
        ["--smoke", "--url", "{url}"],
        r"REST submit single: [\d,]+ req/s(.|\n)*REST submit batch of 10: ",
    ),
    "schedules.py": (
        ["--smoke", "--redis-url", "{url}"],
        r"\| redis \| [\d,]+ \| 20 \|(.|\n)*\| sqlite \| [\d,]+ \| 20 \|",
    ),
    "slow_jobs.py": (
        ["--smoke"],
        r"\| fleet, slots=50 \| [\d,]+ \|(.|\n)*\| fleet, slots=50 \+outputs \| [\d,]+ \|"
        r"(.|\n)*\+run \| [\d,]+ \|(.|\n)*\+groups \| [\d,]+ \|",
    ),
    "sqlite_drain.py": (["--smoke"], r"drain 2 processes(.|\n)*idle, 10 blocked reserves"),
    "sqlite_push_ab.py": (
        [str(ROOT), str(ROOT), "--smoke"],
        r"median after: [\d,]+ pushes/s, [\d.]+ µs CPU/push",
    ),
    "sqlite_vs_huey.py": (
        ["--smoke"],
        r"\| fleet sqlite, 1 process\(es\) x slots=10, WAL \+ NORMAL, leases \| [\d,]+ \| [\d,]+ "
        r"(.|\n)*\| huey SqliteHuey, 2 processes \(-k process\), WAL \+ NORMAL "
        r"\| [\d,]+ \| [\d,]+ ",
    ),
    "sqlite_workers.py": (["--smoke"], r"sqlite, 2 worker process\(es\) x 10 slots, 200 tasks"),
    "worker_noop.py": (
        ["--smoke", "--backend", "{url}"],
        r"200 no-op tasks, 50 slots: [\d,]+ tasks/s",
    ),
}
#: Run by test_fleet_bench_and_ratios: the peer harness' entry, and the ratios of its results.
HARNESS_SCRIPTS = {"fleet_bench.py", "ratios.py"}


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert proc.returncode == 0, (
        f"{args[0]} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    )
    return proc.stdout


def is_script(path: Path) -> bool:
    """A module with an ``if __name__ == "__main__":`` block."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return True
    return False


def test_every_bench_script_has_a_smoke_run() -> None:
    scripts = {p.name for p in BENCH.glob("*.py") if is_script(p)}
    assert scripts == set(SCRIPTS) | HARNESS_SCRIPTS
    for name in scripts - {"ratios.py"}:  # ratios.py reads a results folder
        assert '"--smoke"' in (BENCH / name).read_text(), name


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_bench_script_smoke(script: str, redis_url: str) -> None:
    args, shows = SCRIPTS[script]
    out = run([str(BENCH / script), *(a.format(url=redis_url) for a in args)], cwd=ROOT)
    assert re.search(shows, out), out


@pytest.mark.parametrize("harness", ["peers", "standin"])
def test_fleet_bench_and_ratios(
    harness: str, redis_server: RedisServer, redis_url: str, tmp_path: Path
) -> None:
    """``fleet_bench.py`` in the shared peer harness (as ``run_peers.sh`` runs it, from
    the peers folder) or, where that folder is missing, in the stand-in: the harness
    looks the distribution's version up, enqueues, drains with one worker; then
    ``ratios.py`` reads the results (Fleet's rows alone: no ratio, and it says so)."""
    results = tmp_path / "results"
    env = {"REDIS_URL": redis_url, "RESULTS_DIR": str(results), "LOG_DIR": str(tmp_path)}
    if harness == "peers":
        if not (PEERS / "common.py").exists():
            pytest.skip(f"no peer harness at {PEERS}")
        cwd = PEERS  # read-only: the run writes only to RESULTS_DIR and LOG_DIR
    else:
        cwd = tmp_path
        env["FLEET_BENCH_PEERS"] = str(tmp_path / "no-peers-here")
    out = run([str(BENCH / "fleet_bench.py"), "--smoke"], cwd=cwd, env=env)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["version"] == version("fleet-automation")
    assert summary["n"] == 200 and summary["final_count"] == 200, summary
    assert not summary.get("error"), summary
    assert (results / "fleet-slots10.jsonl").exists()
    table = run([str(BENCH / "ratios.py"), str(results)], cwd=ROOT)
    assert re.search(r"^\| fleet-slots10 \| 1 \| [\d,]+ \|", table, re.M), table
    assert "no peer rows" in table


#: bench/domains.py: registered here, after the parametrised smoke list was built, and
#: run by the test below (one redis-server of the session, one SQLite file).
SCRIPTS["domains.py"] = (
    ["--smoke", "--url", "{url}"],
    r"\| redis \| 200 \| 20 \| [\d.]+ \| [\d.]+ \| [\d.]+ \|(.|\n)*\| sqlite \| 200 \| 20 \| ",
)


def test_domains_bench_smoke(redis_url: str) -> None:
    args, shows = SCRIPTS["domains.py"]
    out = run([str(BENCH / "domains.py"), *(a.format(url=redis_url) for a in args)], cwd=ROOT)
    assert re.search(shows, out), out
