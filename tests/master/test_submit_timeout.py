"""``timeout_seconds`` of a submit (issue 26, 4): a finite number of seconds > 0, else a
422 naming the field; kept with the task, single and batch, REST and CLI."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from fleet.cli import main as cli_main
from tests.master.conftest import ADMIN, InProcess, auth
from tests.master.plugins import SCRAPE

H = auth(ADMIN)
TASKS = f"/api/v1/automations/{SCRAPE}/tasks"


async def _stored_limit(master: InProcess) -> Any:
    (res,) = await master.backend.queues.reserve(SCRAPE, k=1)
    return res.body.timeout_seconds


async def test_a_bad_timeout_is_422_naming_the_field(master: InProcess) -> None:
    for bad in (0, -1, "soon", True, 10**9):
        body = {"payload": {"url": "u"}, "timeout_seconds": bad}
        r = await master.client.post(TASKS, json=body, headers=H)
        assert r.status_code == 422, (bad, r.text)
        assert ["body", "timeout_seconds"] in [e["loc"] for e in r.json()["detail"]], r.text
    headers = {**H, "Content-Type": "application/json"}
    for raw in (b"Infinity", b"NaN"):
        content = b'{"payload": {"url": "u"}, "timeout_seconds": ' + raw + b"}"
        r = await master.client.post(TASKS, content=content, headers=headers)
        assert r.status_code == 422, (raw, r.text)
    assert (await master.backend.queues.depths(SCRAPE)).pending == 0


async def test_the_timeout_is_kept_with_the_task(master: InProcess) -> None:
    body = {"payload": {"url": "u"}, "timeout_seconds": 2.5}
    r = await master.client.post(TASKS, json=body, headers=H)
    assert r.status_code == 202, r.text
    assert await _stored_limit(master) == 2.5


async def test_a_batch_refuses_only_the_task_with_a_bad_timeout(master: InProcess) -> None:
    tasks = [
        {"payload": {"url": "a"}, "timeout_seconds": 7},
        {"payload": {"url": "b"}, "timeout_seconds": -3},
    ]
    r = await master.client.post(f"{TASKS}/batch", json={"tasks": tasks}, headers=H)
    assert r.status_code == 202, r.text
    ok, refused = r.json()["results"]
    assert ok["queued"] is True
    assert refused["detail"][0]["loc"] == ["body", "tasks", 1, "timeout_seconds"]
    assert await _stored_limit(master) == 7


def test_fleet_submit_has_a_timeout_option() -> None:
    result = CliRunner().invoke(cli_main, ["submit", "--help"])
    assert result.exit_code == 0 and "--timeout" in result.output
