"""``fleet errors TYPE [GROUP] [--html SNAPSHOT] [--json]`` against a live master (real
HTTP, SQLite): the table of groups and its paging, --json, one group with its traceback,
domains and snapshots, a snapshot's HTML, and the refusals (unknown type, bad group,
--html without GROUP)."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

from click.testing import CliRunner, Result

from fleet.backends import open_backend
from fleet.cli import main
from fleet.core.error_groups import GroupDelta, Sample, Snapshot, SnapshotMeta
from fleet.core.records import now
from tests.cli.test_task_command import db_url, live  # noqa: F401  (fixtures)
from tests.docs.blocks import fenced_blocks, section
from tests.master.conftest import ADMIN, LiveMaster
from tests.master.plugins import SCRAPE

ROOT = Path(__file__).resolve().parents[2]
G1, G2 = "00000000000000a1", "00000000000000b2"
HTML = "<html><body><p>no price here</p></body></html>"


def fleet(master: LiveMaster, *args: str) -> Result:
    r = CliRunner().invoke(main, ["errors", *args, "--url", master.url, "--token", ADMIN])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exc_info
    return r


def seed(url: str) -> None:
    async def go() -> None:
        b = await open_backend(url)
        try:
            at = now()
            sample = Sample(
                "task-7", "ValueError: no price at https://shop.test/7", "Traceback\n  boom"
            )
            await b.errors.record(
                SCRAPE,
                [
                    GroupDelta(G1, "ValueError", "no price at <url>", "shop.py:parse", 300,
                               at - 60, at, ("shop.test",), sample),
                    GroupDelta(G2, "KeyError", "<str>", "shop.py:item", 2, at - 90, at - 30),
                ],
            )  # fmt: skip
            meta = SnapshotMeta("ab12", at, task_id="task-7", url="https://shop.test/7",
                                html_bytes=len(HTML))  # fmt: skip
            await b.errors.put(SCRAPE, G1, Snapshot(meta, HTML.encode(), None))
        finally:
            await b.close()

    asyncio.run(go())


def test_list_one_group_and_html(live: LiveMaster, db_url: str) -> None:  # noqa: F811
    seed(db_url)
    r = fleet(live, SCRAPE)
    assert r.exit_code == 0, r.output
    assert G1 in r.output and G2 in r.output and "no price at <url>" in r.output
    assert r.output.index(G1) < r.output.index(G2)  # newest first
    r = fleet(live, SCRAPE, "-n", "1", "--json")
    page = json.loads(r.output)
    assert [g["group"] for g in page["items"]] == [G1] and page["cursor"]
    r = fleet(live, SCRAPE, "-n", "1", "--cursor", page["cursor"])
    assert G2 in r.output and G1 not in r.output

    r = fleet(live, SCRAPE, G1)
    assert r.exit_code == 0, r.output
    for text in ("300 failure", "shop.py:parse", "shop.test", "task-7", "ab12", "boom"):
        assert text in r.output, text
    one = json.loads(fleet(live, SCRAPE, G1, "--json").output)
    assert one["snapshots"][0]["id"] == "ab12" and one["traceback"] == "Traceback\n  boom"
    r = fleet(live, SCRAPE, G1, "--html", "ab12")
    assert r.exit_code == 0 and r.output.strip() == HTML


def test_refusals(live: LiveMaster) -> None:  # noqa: F811
    r = fleet(live, "nope")
    assert r.exit_code != 0 and "nope" in r.output
    r = fleet(live, SCRAPE, "zz")
    assert r.exit_code != 0 and "group" in r.output
    r = fleet(live, SCRAPE, "--html", "ab12")
    assert r.exit_code == 2 and "GROUP" in r.output
    r = fleet(live, SCRAPE)
    assert r.exit_code == 0 and "no failure recorded" in r.output


def test_the_cli_page_examples_run(live: LiveMaster, db_url: str) -> None:  # noqa: F811
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    lines = [
        line
        for block in fenced_blocks(section(page, "### `fleet errors TYPE [GROUP]`"))
        for line in block.lines()
    ]
    assert len(lines) == 3, lines
    seed(db_url)
    for line in lines:
        # The page's ids stand for the seeded group's and snapshot's.
        line = line.replace("shop", SCRAPE).replace("3f9c2a61d04b7e85", G1)
        args = shlex.split(line.replace("9e1f0c2b7a4d6e30", "ab12"))
        assert args[0] == "fleet"
        r = CliRunner().invoke(main, [*args[1:], "--url", live.url, "--token", ADMIN])
        assert r.exit_code == 0, (line, r.output, r.exc_info)
        assert G1 in r.output or r.output.strip() == HTML
