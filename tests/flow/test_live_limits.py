"""A group cap holds from the very next reserve after the PATCH that sets it.

A real master and two ``fleet worker`` processes of ``flow-job`` (5 slots each) on
Redis and on SQLite. Twenty rounds, the cap alternating between 1 and 2: each round
PATCHes ``group_concurrency`` and at once (no sleep) submits a batch over four
groups, then waits for it to drain. From each attempt's start and end times in the
plugin's ledger, no group of a round ever runs more tasks at once than that round's
cap, on both workers together: the workers' reserves, blocked since before the PATCH,
read the limit stored in the backend rather than their own copy of the config.
A per-worker override of a fleet-wide field answers 422.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.flow.test_fleet_groups import PLUGIN, max_overlap, read_ledger
from tests.support.fleet_procs import wait_up, worker_processes
from tests.support.master_proc import MasterProcess
from tests.worker.procs import fleet_env
from tests.worker.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TYPE = "flow-job"
WORKERS = ("w1", "w2")
ROUNDS = 20
GROUPS = ("big", "small", "mid", "tiny")
#: The type's rate in each round: none, except every fourth round.
RATES = (None, None, None, "50/s")
PER_GROUP = {"big": 8, "small": 3, "mid": 5, "tiny": 2}


async def test_a_patched_cap_holds_from_the_next_reserve(shared_url: str, tmp_path: Path) -> None:
    url = shared_url
    ledger = tmp_path / "ledger.jsonl"
    env = fleet_env(FLEET_FLOW_LEDGER=str(ledger), FLEET_ENTRY_POINTS="0")
    master = MasterProcess(url, tmp_path)
    rounds: dict[str, tuple[int, int]] = {}  # task id -> (round, cap)
    b: Backend
    async with await open_backend(url) as b, master.client() as http:
        await b.configs.set(TYPE, {"slots": 5, "visibility_seconds": 30})
        try:
            with worker_processes(url, PLUGIN, TYPE, WORKERS, tmp_path, env):
                await wait_up(b, TYPE, WORKERS, http)

                # A fleet-wide field cannot be overridden per worker: one value for the fleet.
                answer = await http.patch(
                    f"/api/v1/automations/{TYPE}/workers/w1/config", json={"group_concurrency": 3}
                )
                assert answer.status_code == 422, answer.text
                detail = answer.json()["detail"]
                assert detail[0]["loc"] == ["body", "group_concurrency"]
                assert "fleet-wide" in detail[0]["msg"]
                answer = await http.patch(
                    f"/api/v1/automations/{TYPE}/workers/w1/config", json={"group_rate": "1/s"}
                )
                assert answer.status_code == 422, answer.text

                for n in range(ROUNDS):
                    cap = 1 if n % 2 == 0 else 2
                    answer = await http.patch(
                        f"/api/v1/automations/{TYPE}/config",
                        json={
                            "group_concurrency": cap,
                            "group_rate": "50/s" if n % 4 == 3 else None,
                        },
                    )
                    assert answer.status_code == 200, answer.text
                    tasks = [
                        {"payload": {"n": i, "ms": 25}, "group": g}
                        for g in GROUPS
                        for i in range(PER_GROUP[g])
                    ]
                    answer = await http.post(
                        f"/api/v1/automations/{TYPE}/tasks/batch", json={"tasks": tasks}
                    )
                    assert answer.status_code == 202, answer.text
                    ids = [item["task_id"] for item in answer.json()["results"]]
                    assert len(ids) == len(tasks)
                    for tid in ids:
                        rounds[tid] = (n, cap)

                    async def drained(ids: list[str] = ids) -> bool:
                        for tid in ids:
                            if (await b.queues.state(TYPE, tid)).state != "done":
                                return False
                        return True

                    await wait_until(drained, timeout=60, interval=0.05, what=f"round {n} done")
        finally:
            master.close()

    rows = read_ledger(ledger)
    starts: dict[tuple[str, int], float] = {}
    spans: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    pids: set[int] = set()
    for row in rows:
        if row["id"] not in rounds:
            continue
        key = (row["id"], row["attempt"])
        if row["ev"] == "start":
            starts[key] = row["t"]
            pids.add(row["pid"])
        elif row["ev"] == "end":
            n, _ = rounds[row["id"]]
            spans[(n, row["group"])].append((starts[key], row["t"]))
    assert len(pids) == 2, "both workers ran tasks"
    assert sum(len(v) for v in spans.values()) == len(rounds)
    worst: dict[int, int] = defaultdict(int)
    for (n, group), intervals in spans.items():
        cap = 1 if n % 2 == 0 else 2
        seen = max_overlap(intervals)
        assert seen <= cap, f"round {n}: group {group} ran {seen} at once, cap {cap}"
        worst[cap] = max(worst[cap], seen)
    # The cap of 2 was used (the test can tell a cap of 1 from one of 2).
    assert worst[2] == 2, worst
