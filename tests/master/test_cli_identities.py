"""``fleet identities`` against a live master (real HTTP): list, add, generate, show,
retire, revive, delete; errors as clean exits (issue 43, item 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fleet.cli import main
from tests.master.conftest import ADMIN, READ, memory_url

SECRET = "pw-cli-secret"


@pytest.fixture
def live(live_factory: Any) -> Any:
    return live_factory(memory_url(), sweeper=False)


def fleet(live: Any, *args: str, token: str = ADMIN) -> Any:
    argv = ["identities", *args, "--url", live.url, "--token", token]
    return CliRunner().invoke(main, argv, catch_exceptions=False)


def _file(tmp_path: Path, identities: Any) -> str:
    path = tmp_path / "ids.json"
    path.write_text(json.dumps(identities))
    return str(path)


def test_add_list_show_retire_revive_delete(live: Any, tmp_path: Path) -> None:
    r = fleet(live)
    assert r.exit_code == 0 and "no identity pool" in r.output
    ids = [
        {"id": "a1", "proxy": f"http://bob:{SECRET}@p.test:8000",
         "cookies": [{"name": "sid", "value": SECRET, "domain": "shop.test"}]},
        {"id": "a2", "account": {"login": "eve", "password": SECRET}},
    ]  # fmt: skip
    r = fleet(live, "shop", "--add", _file(tmp_path, ids))
    assert r.exit_code == 0, r.output
    assert "2 created, 0 replaced" in r.output
    r = fleet(live, "shop", "--add", _file(tmp_path, {"identities": ids[:1]}), "--json")
    assert json.loads(r.output)["replaced"] == 1
    r = fleet(live, token=READ)
    assert r.exit_code == 0 and "shop" in r.output
    pools = json.loads(fleet(live, "--json").output)
    assert pools == [{"pool": "shop", "total": 2, "counts": {
        "ready": 2, "leased": 0, "cooling": 0, "retired": 0}}]  # fmt: skip
    r = fleet(live, "shop", token=READ)
    assert r.exit_code == 0 and "a1" in r.output and "a2" in r.output
    assert SECRET not in r.output and "2 ready" in r.output
    page = json.loads(fleet(live, "shop", "-n", "1", "--json").output)
    assert [i["id"] for i in page["items"]] == ["a1"] and page["next"] == "a1"
    assert "more: fleet identities shop --after 'a1'" in fleet(live, "shop", "-n", "1").output
    r = fleet(live, "shop", "a2", token=READ)
    assert r.exit_code == 0 and SECRET not in r.output and '"password": "********"' in r.output
    shown = json.loads(fleet(live, "shop", "a1", "--reveal", "--json").output)
    assert shown["cookies"][0]["value"] == SECRET
    r = fleet(live, "shop", "a1", "--reveal", token=READ)
    assert r.exit_code == 1 and "403" in r.output
    r = fleet(live, "shop", "a1", "--retire", "--reason", "banned", "--json")
    one = json.loads(r.output)
    assert (one["state"], one["stats"]["last_reason"]) == ("retired", "banned")
    assert "retired" in fleet(live, "shop", "a1").output
    assert json.loads(fleet(live, "shop", "a1", "--revive", "--json").output)["state"] == "ready"
    r = fleet(live, "shop", "a1", "--delete", "--yes")
    assert r.exit_code == 0 and "identity a1 deleted" in r.output
    r = fleet(live, "shop", "a1")
    assert r.exit_code == 1 and "unknown identity 'a1'" in r.output


def test_generate(live: Any) -> None:
    r = fleet(live, "gen", "--generate", "3", "--proxy", "http://de.test:1", "--proxy",
              "http://fr.test:1", "--country", "DE", "--country", "FR", "--browser", "firefox",
              "--id-prefix", "g-", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    made = json.loads(r.output)
    assert made["created"] == 3 and all(i.startswith("g-") for i in made["ids"])
    second = json.loads(fleet(live, "gen", made["ids"][1], "--json").output)
    assert second["proxy"] == "http://fr.test:1"
    assert (second["fingerprint"]["locale"], second["fingerprint"]["timezone"]) == (
        "fr-FR",
        "Europe/Paris",
    )
    r = fleet(live, "gen", made["ids"][0])
    assert "de-DE" in r.output and "Europe/Berlin" in r.output and "Firefox/" in r.output


def test_errors_are_clean(live: Any, tmp_path: Path) -> None:
    bad = [{"id": "x"}, {"id": "y", "cookies": [{"name": "n", "value": "v"}]}]
    r = fleet(live, "shop", "--add", _file(tmp_path, bad))
    assert r.exit_code == 1 and "identities.1.cookies.0.domain" in r.output
    assert "no identity pool" in fleet(live).output  # nothing written
    r = fleet(live, "shop", "--generate", "1", "--country", "XX")
    assert r.exit_code == 1 and "generate.countries.0" in r.output
    assert fleet(live, "shop", "--add", _file(tmp_path, [{"id": "x"}])).exit_code == 0
    r = fleet(live, "shops")
    assert r.exit_code == 1 and "did you mean 'shop'?" in r.output
    for args, message in (
        (["shop", "--retire"], "name the identity ID"),
        (["shop", "x", "--retire", "--delete"], "exclude each other"),
        (["--generate", "2"], "takes the POOL only"),
        (["shop", "--country", "DE"], "go with --generate"),
        (["shop", "x", "--reason", "r"], "--reason goes with --retire"),
    ):
        r = fleet(live, *args)
        assert r.exit_code == 2 and message in r.output, (args, r.output)
    path = tmp_path / "not.json"
    path.write_text("{")
    r = fleet(live, "shop", "--add", str(path))
    assert r.exit_code == 2 and "cannot read" in r.output
    r = fleet(live, "shop", "--add", _file(tmp_path, {"id": "x"}))
    assert r.exit_code == 2 and "no list of identities" in r.output
    r = fleet(live, "shop", "x", "--delete", "--yes", token=READ)
    assert r.exit_code == 1 and "403" in r.output
