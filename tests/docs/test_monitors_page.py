"""docs/monitors.md runs as written against a live master (SQLite): its ``fleet runs
create --monitor`` line and its Python client block create runs whose monitors are the
page's; its ``fleet config set`` line sets the type's monitors; ``fleet runs show``
prints them; a field no Output declares is refused, as the page says."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from fleet.backends import open_backend
from fleet.cli import main
from fleet.client.http import FleetClient
from fleet.core.catalog import catalog_entry
from fleet.core.monitors import Monitors
from fleet.master.services import monitors as run_monitors
from tests.cli.test_task_command import db_url, live  # noqa: F401  (fixtures)
from tests.docs.blocks import fenced_blocks
from tests.master.conftest import ADMIN, LiveMaster
from tests.monitors.test_monitors import Parser

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "monitors.md").read_text(encoding="utf-8")
WANT = {"min_items": 100, "max_null_rate": {"price": 0.05}, "max_error_rate": 0.02}


def _fleet(master: LiveMaster, line: str) -> str:
    args = shlex.split(line)[1:]
    r = CliRunner().invoke(main, [*args, "--url", master.url, "--token", ADMIN])
    assert r.exit_code == 0, r.output
    return r.output.strip()


async def _spec(url: str, run_id: str) -> dict[str, Any]:
    async with await open_backend(url) as b:
        raw = await b.kv.get(run_monitors.NAMESPACE, f"spec:{run_id}")
    assert raw is not None
    return Monitors.model_validate_json(raw).model_dump(exclude_defaults=True)


def test_the_page_runs(live: LiveMaster, db_url: str) -> None:  # noqa: F811
    async def known() -> None:
        async with await open_backend(db_url) as b:
            await b.catalog.put("priced", catalog_entry(Parser))

    asyncio.run(known())
    bash = [b.text for b in fenced_blocks(PAGE) if b.lang == "bash"]
    (create,) = [line for text in bash for line in text.splitlines() if "runs create" in line]
    run_id = _fleet(live, create)
    assert asyncio.run(_spec(db_url, run_id)) == WANT

    (python,) = [b.text for b in fenced_blocks(PAGE) if b.lang == "python"]
    here = python.replace("http://127.0.0.1:8000", live.url)
    scope: dict[str, Any] = {"token": ADMIN}
    exec(compile(here, "monitors.md", "exec"), scope)
    assert asyncio.run(_spec(db_url, scope["run_id"])) == WANT

    (config,) = [line for text in bash for line in text.splitlines() if "config set" in line]
    _fleet(live, config)
    with FleetClient(live.url, ADMIN) as client:
        stored = client.request("GET", "/api/v1/automations/priced/config")
        assert stored["config"]["monitors"] == {"min_items": 10, "max_null_rate": {"price": 0.1}}
        shown = _fleet(live, f"fleet runs show {run_id}")
        assert "monitor   min_items: ok (0, threshold 100)" in shown
        assert "monitor   max_null_rate:price: ok (-, threshold 0.05)" in shown
    refused = CliRunner().invoke(
        main,
        [
            "runs",
            "create",
            "--type",
            "priced",
            "--monitor",
            "max_null_rate.cost=0.1",
            "--url",
            live.url,
            "--token",
            ADMIN,
        ],
    )
    assert refused.exit_code != 0 and "'cost'" in refused.output
