"""The CLI prints no control characters it did not write (issue 40, finding 10): a
task's error, traceback and progress message with escape sequences in them (a
terminal would clear the screen, retitle itself, or hide the line) and rich markup
show up escaped in ``fleet task`` and ``fleet dlq``, against a live master."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from click.testing import CliRunner

from fleet.backends import open_backend
from fleet.cli import main
from fleet.cli.plain import plain
from fleet.core.submission import make_push_request
from tests.master.conftest import ADMIN
from tests.master.plugins import SCRAPE

HOSTILE = "boom \x1b[2J\x1b]0;pwned\x07 \x9b31m [bold red]loud[/] \u202eevil"


@pytest.fixture
def live(live_factory: Any, sqlite_url: str) -> Any:
    return live_factory(sqlite_url, sweeper=False)


def dead_task(backend_url: str) -> str:
    """A task of SCRAPE dead with HOSTILE as its error and progress message."""

    async def make() -> str:
        b = await open_backend(backend_url)
        try:
            (pushed,) = await b.queues.push(
                SCRAPE, [make_push_request({"url": "http://x/"}, max_attempts=1)]
            )
            (res,) = await b.queues.reserve(SCRAPE, visibility_seconds=30)
            await b.streams.progress(SCRAPE, res.body.id, attempt=1, fraction=None, message="ok")
            await b.streams.progress(
                SCRAPE, res.body.id, attempt=1, fraction=0.5, message=HOSTILE[:100]
            )
            outcome = await b.queues.nack(
                SCRAPE, res.body.id, res.token, delay_seconds=0, error=HOSTILE, traceback=HOSTILE
            )
            assert outcome == "dead"
            return pushed.task_id
        finally:
            await b.close()

    return asyncio.run(make())


def fleet(live: Any, *args: str) -> str:
    r = CliRunner().invoke(main, [*args, "--url", live.url, "--token", ADMIN])
    assert r.exit_code == 0, r.output
    return r.output


def test_plain_escapes_controls_and_keeps_text() -> None:
    assert plain("a\tb\nc") == "a\tb\nc"
    assert plain("\x1b[2J") == "\\u001b[2J"
    assert plain("\x9b\x07\x7f\u202e") == "\\u009b\\u0007\\u007f\\u202e"
    assert plain("é ü 日本") == "é ü 日本"


@pytest.mark.parametrize("command", ["task", "dlq"])
def test_task_and_dlq_print_no_escape_sequences(live: Any, sqlite_url: str, command: str) -> None:
    task_id = dead_task(sqlite_url)
    out = fleet(live, "task", SCRAPE, task_id) if command == "task" else fleet(live, "dlq", SCRAPE)
    for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert raw not in out, (raw, out)
    assert "\\u001b[2J" in out
    assert "[bold red]loud[/]" in out  # rich markup printed as text, not applied
