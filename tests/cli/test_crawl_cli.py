"""``fleet crawl start``'s refusals (before anything is created) and the line ``fleet runs
watch`` shows for a crawl. Its success path runs against real workers in
tests/crawl/test_crawl_fleet.py."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from fleet.cli import main
from fleet.cli.runs import watch_line

# Nothing listens here: a command that reached the master would fail differently.
NOWHERE = ["--url", "http://127.0.0.1:9", "--token", "t"]


def test_a_bad_url_is_refused_before_anything_is_created() -> None:
    for bad in ("mailto:a@b.c", "/relative", "ftp://h/x", "http://u:p@h/"):
        r = CliRunner().invoke(
            main, ["crawl", "start", "quotes", "http://ok.example/", bad, *NOWHERE]
        )
        assert r.exit_code == 2, r.output
        assert "URLS" in r.output and bad in r.output
    r = CliRunner().invoke(main, ["crawl", "start", "quotes", *NOWHERE])
    assert r.exit_code == 2 and "URLS" in r.output
    r = CliRunner().invoke(
        main, ["crawl", "start", "quotes", "http://a/", "--max-pages", "0", *NOWHERE]
    )
    assert r.exit_code == 2 and "--max-pages" in r.output


def test_the_crawl_reaches_the_master() -> None:
    r = CliRunner().invoke(main, ["crawl", "start", "quotes", "http://a/", *NOWHERE])
    assert r.exit_code == 1 and "127.0.0.1:9" in r.output


def _run(meters: dict[str, float], duplicates: int = 0) -> Any:
    counters = {"duplicates": duplicates}
    return {"run_id": "ab" * 16, "state": "running", "counters": counters, "meters": meters}


def test_the_watch_line() -> None:
    line = watch_line(_run({"pages": 120, "items": 118, "robots_skipped": 3, "spend": 0.041}, 40))
    assert line == (
        f"run {'ab' * 16} (running) · pages 120 · items 118 · robots_skipped 3 · dupes 40 · "
        "spend 0.04"
    )
    assert watch_line(_run({})) == f"run {'ab' * 16} (running)"
