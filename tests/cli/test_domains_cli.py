"""``fleet domains TYPE [DOMAIN] [--tier T | --forget] [--json]`` against a live master
(real HTTP, SQLite): the table of a type's domains with their tier names, the JSON page
and its paging, one domain with its verdicts by tier, --tier by name and by index,
--forget, and the usage errors."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

import httpx
from click.testing import CliRunner, Result

from fleet.backends import open_backend
from fleet.cli import main
from fleet.core.blocks.verdicts import VerdictKind
from fleet.core.tiers import TierRule
from tests.cli.test_task_command import db_url, live  # noqa: F401  (fixtures)
from tests.docs.blocks import fenced_blocks, section
from tests.master.conftest import ADMIN, READ, LiveMaster, auth
from tests.master.plugins import LOOP, SCRAPE

TIERS = [
    {"name": "direct", "direct": True},
    {"name": "datacenter", "proxy_url": "http://127.0.0.1:9"},
    {"name": "residential", "proxy_url": "http://127.0.0.1:10"},
]


def fleet(master: LiveMaster, *args: str, token: str = ADMIN) -> Result:
    r = CliRunner().invoke(main, ["domains", *args, "--url", master.url, "--token", token])
    # A clean exit or a clean error: never a traceback.
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exc_info
    return r


def seed(master: LiveMaster, url: str) -> None:
    """SCRAPE's three tiers; ``shop.test`` blocked up to datacenter, ``calm.test`` ok."""
    r = httpx.patch(
        f"{master.url}/api/v1/automations/{SCRAPE}/config",
        json={"proxy_tiers": TIERS},
        headers=auth(ADMIN),
    )
    assert r.status_code == 200, r.text
    rule = TierRule(tiers=3, escalate_after=3)

    async def go() -> None:
        b = await open_backend(url)
        try:
            verdicts: list[tuple[str, int, VerdictKind, str | None, int]] = [
                ("calm.test", 0, "ok", None, 7),
                ("calm.test", 0, "throttled", None, 1),
                ("shop.test", 0, "blocked", "akamai", 1),
                ("shop.test", 0, "blocked", "akamai", 1),
                ("shop.test", 0, "blocked", "akamai", 1),
                ("shop.test", 1, "ok", None, 2),
                ("shop.test", 1, "captcha", "hcaptcha", 1),
            ]
            for domain, tier, kind, vendor, n in verdicts:
                await b.domains.record(
                    SCRAPE, domain, tier=tier, kind=kind, vendor=vendor, rule=rule, count=n
                )
        finally:
            await b.close()

    asyncio.run(go())


def cells(line: str) -> list[str]:
    """A table row's cells: domain, tier, since, ok, throttled, blocked, challenge,
    captcha, last verdict."""
    return [c.strip() for c in line.split("│")[1:-1]]


def row_of(output: str, domain: str) -> list[str]:
    (line,) = [line for line in output.splitlines() if line.startswith(f"│ {domain} ")]
    return cells(line)


def test_the_table_json_and_paging(live: LiveMaster, db_url: str) -> None:  # noqa: F811
    r = fleet(live, SCRAPE)
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"{SCRAPE}: no verdict met yet (no proxy_tiers)"
    seed(live, db_url)
    r = fleet(live, SCRAPE, token=READ)
    assert r.exit_code == 0, r.output
    assert "domains of m-scrape (direct → datacenter → residential)" in r.output
    lines = r.output.splitlines()
    (calm,) = [line for line in lines if "calm.test" in line]
    (shop,) = [line for line in lines if "shop.test" in line]
    assert lines.index(calm) < lines.index(shop)  # by name

    assert cells(calm)[:2] == ["calm.test", "direct"] and cells(calm)[3:5] == ["7", "1"]
    assert cells(calm)[8] == "throttled" and cells(calm)[2].endswith("ago")
    assert cells(shop)[:2] == ["shop.test", "datacenter"]
    assert cells(shop)[3:] == ["2", "0", "3", "0", "1", "captcha (hcaptcha)"]
    assert "more:" not in r.output

    page = json.loads(fleet(live, SCRAPE, "--json").output)
    assert page["tiers"] == ["direct", "datacenter", "residential"] and page["next"] is None
    assert [(d["domain"], d["tier"]) for d in page["items"]] == [
        ("calm.test", "direct"), ("shop.test", "datacenter")]  # fmt: skip
    first = json.loads(fleet(live, SCRAPE, "-n", "1", "--json").output)
    assert [d["domain"] for d in first["items"]] == ["calm.test"] and first["next"] == "calm.test"
    r = fleet(live, SCRAPE, "-n", "1")
    assert "more: fleet domains m-scrape --after 'calm.test'" in r.output
    assert "shop.test" not in r.output
    rest = json.loads(fleet(live, SCRAPE, "--after", "calm.test", "--json").output)
    assert [d["domain"] for d in rest["items"]] == ["shop.test"] and rest["next"] is None

    # A type without proxy_tiers, and one the master does not know.
    r = fleet(live, LOOP)
    assert r.exit_code == 0 and "no verdict met yet (no proxy_tiers)" in r.output
    r = fleet(live, "no-such-type")
    assert r.exit_code == 1 and r.output.startswith("Error:") and "no-such-type" in r.output


def test_one_domain_tier_and_forget(live: LiveMaster, db_url: str) -> None:  # noqa: F811
    seed(live, db_url)
    r = fleet(live, SCRAPE, "shop.test", token=READ)
    assert r.exit_code == 0, r.output
    assert "domain shop.test of m-scrape" in r.output and "datacenter" in r.output
    assert "  direct: 3 blocked" in r.output
    assert "  datacenter: 1 captcha, 2 ok" in r.output
    one = json.loads(fleet(live, SCRAPE, "shop.test", "--json").output)
    assert (one["tier"], one["ok"], one["last_vendor"]) == ("datacenter", 2, "hcaptcha")
    r = fleet(live, SCRAPE, "nowhere.test")
    assert r.exit_code == 1 and "no verdict was met at nowhere.test" in r.output

    # --tier by name, then by index; each answered and kept.
    r = fleet(live, SCRAPE, "shop.test", "--tier", "residential")
    assert r.exit_code == 0, r.output
    assert row_of(r.output, "shop.test")[:2] == ["shop.test", "residential"]
    assert json.loads(fleet(live, SCRAPE, "shop.test", "--json").output)["tier"] == "residential"
    r = fleet(live, SCRAPE, "shop.test", "--tier", "0", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["tier"] == "direct"
    assert json.loads(fleet(live, SCRAPE, "shop.test", "--json").output)["tier_index"] == 0
    # A tier the type lacks: the master's 422, and nothing moves.
    for bad in ("mobile", "3", "-1", "²"):
        r = fleet(live, SCRAPE, "shop.test", "--tier", bad)
        assert r.exit_code == 1, (bad, r.output)
        assert "not one of the type's proxy_tiers" in r.output, (bad, r.output)
    assert json.loads(fleet(live, SCRAPE, "shop.test", "--json").output)["tier"] == "direct"
    # Writes need the admin token.
    r = fleet(live, SCRAPE, "shop.test", "--tier", "datacenter", token=READ)
    assert r.exit_code == 1 and "403" in r.output
    r = fleet(live, SCRAPE, "shop.test", "--forget", token=READ)
    assert r.exit_code == 1 and "403" in r.output

    r = fleet(live, SCRAPE, "shop.test", "--forget")
    assert r.exit_code == 0 and "shop.test: forgotten, back to the first tier" in r.output
    r = fleet(live, SCRAPE, "shop.test")
    assert r.exit_code == 1 and "no verdict was met at shop.test" in r.output
    r = fleet(live, SCRAPE, "shop.test", "--forget", "--json")
    assert r.exit_code == 1 and "no verdict was met" in r.output
    r = fleet(live, SCRAPE, "calm.test", "--forget", "--json")
    assert json.loads(r.output) == {"type": SCRAPE, "domain": "calm.test", "forgotten": True}
    assert fleet(live, SCRAPE).output.strip() == (
        f"{SCRAPE}: no verdict met yet (direct → datacenter → residential)"
    )


def test_usage_errors(live: LiveMaster, db_url: str) -> None:  # noqa: F811
    seed(live, db_url)
    for args in (
        [SCRAPE, "--tier", "direct"],
        [SCRAPE, "--forget"],
        [SCRAPE, "shop.test", "--tier", "direct", "--forget"],
        [SCRAPE, "shop.test", "--tier", ""],
    ):
        r = fleet(live, *args)
        assert r.exit_code == 2, (args, r.output)
        assert "Usage:" in r.output and "Error:" in r.output, (args, r.output)
    assert "name the DOMAIN" in fleet(live, SCRAPE, "--tier", "direct").output
    assert (
        "exclude each other" in fleet(live, SCRAPE, "shop.test", "--tier", "0", "--forget").output
    )
    # "." and ".." are no host: a client would drop them from the path (a DELETE of
    # /automations/m-scrape/domains/.. is one of the type itself).
    for dots in (".", ".."):
        for more in ([], ["--forget"], ["--tier", "direct"]):
            r = fleet(live, SCRAPE, dots, *more)
            assert r.exit_code == 2 and "not a domain" in r.output, (dots, more, r.output)
    catalog = httpx.get(f"{live.url}/api/v1/catalog/{SCRAPE}", headers=auth(ADMIN))
    assert catalog.status_code == 200  # the type is still there
    # Nothing moved.
    shop = json.loads(fleet(live, SCRAPE, "shop.test", "--json").output)
    assert shop["tier"] == "datacenter"
    assert fleet(live, SCRAPE, "-n", "0").exit_code == 0  # clamped to one


def test_the_cli_pages_lines_run_as_written(live: LiveMaster, db_url: str) -> None:  # noqa: F811
    """The ``fleet domains`` and ``fleet costs`` lines of docs/cli.md, the type they
    name played by SCRAPE."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    lines = [
        line
        for heading in ("### `fleet domains TYPE [DOMAIN]`", "### `fleet costs TYPE`")
        for block in fenced_blocks(section(page, heading))
        for line in block.lines()
    ]
    assert len(lines) == 3, lines
    seed(live, db_url)
    for line in lines:
        args = shlex.split(line.replace("cf-scraper", SCRAPE))
        assert args[0] == "fleet"
        r = CliRunner().invoke(main, [*args[1:], "--url", live.url, "--token", ADMIN])
        assert r.exit_code == 0, (line, r.output, r.exc_info)
        if "--tier residential" in line:
            assert row_of(r.output, "shop.example")[1] == "residential"
        if line.startswith("fleet costs"):
            assert "nothing metered yet" in r.output
