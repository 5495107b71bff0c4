"""``fleet webhooks`` against a live master (SQLite): create prints the secret once,
the list shows it masked, deliveries and test and delete; a bad URL exits with the
master's 422; the lines of docs/cli.md run as written."""

from __future__ import annotations

import shlex
from pathlib import Path

from click.testing import CliRunner

from fleet.cli import main
from tests.cli.test_task_command import db_url, fleet, live  # noqa: F401  (fixtures)
from tests.docs.blocks import fenced_blocks, section
from tests.master.conftest import ADMIN, LiveMaster

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")


def test_create_list_test_deliveries_delete(live: LiveMaster) -> None:  # noqa: F811
    r = fleet(live, "webhooks", "create", "http://127.0.0.1:9/in", "--event", "run.completed",
              "--event", "task.dead", "--type", "a", "--description", "ops")  # fmt: skip
    assert r.exit_code == 0, r.output
    first, secret_line, warning = r.output.strip().splitlines()
    hook_id = first.split()[1]
    secret = secret_line.split()[1]
    assert hook_id.startswith("wh_") and secret.startswith("whsec_") and "not shown" in warning
    listed = fleet(live, "webhooks")
    assert listed.exit_code == 0 and hook_id in listed.output
    assert secret not in listed.output and secret[-4:] in listed.output
    assert "types a" in listed.output
    sent = fleet(live, "webhooks", "test", hook_id)
    assert sent.exit_code == 0 and "webhook.test evt_" in sent.output, sent.output
    log = fleet(live, "webhooks", "deliveries", hook_id)
    assert log.exit_code == 0 and "webhook.test" in log.output and "pending" in log.output
    assert fleet(live, "webhooks", "delete", hook_id).exit_code == 0
    gone = fleet(live, "webhooks", "deliveries", hook_id)
    assert gone.exit_code != 0 and "no webhook" in gone.output
    bad = fleet(live, "webhooks", "create", "ftp://x.test/", "--event", "run.completed")
    assert bad.exit_code != 0 and "http or https" in bad.output, bad.output


def test_the_cli_pages_lines_run_as_written(live: LiveMaster) -> None:  # noqa: F811
    lines = [
        line
        for block in fenced_blocks(section(PAGE, "### `fleet webhooks`"))
        for line in block.lines()
    ]
    assert len(lines) == 3, lines
    made = ""
    for line in lines:
        # The page's receiver stands for a local one: nothing leaves this machine.
        line = line.replace("https://hooks.example.com/fleet", "http://127.0.0.1:9/fleet")
        args = shlex.split(line.replace("wh_5f2c9a0e11b3d7c4", made))
        assert args[0] == "fleet"
        r = CliRunner().invoke(main, [*args[1:], "--url", live.url, "--token", ADMIN])
        assert r.exit_code == 0, (line, r.output)
        if args[1:3] == ["webhooks", "create"]:
            made = r.output.split()[1]
            assert "run.completed, task.dead" in r.output
        elif len(args) == 2:
            assert made in r.output and "cf-scraper" in r.output
