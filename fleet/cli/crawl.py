"""``fleet crawl start``: a crawl as a run, seeded and named in one command."""

from __future__ import annotations

import click

from fleet.cli.common import client_options, open_client, print_json
from fleet.cli.plain import echo
from fleet.cli.runs import parse_budget
from fleet.core.errors import ContractValueError


@click.group("crawl")
def crawl() -> None:
    """Start a crawl: a run of a crawler's pages, seeded with its URLs."""


@crawl.command("start")
@click.argument("crawler")
@click.argument("urls", nargs=-1, required=True)
@click.option("--name", default=None, help="A name to know the crawl's run by.")
@click.option(
    "--max-pages", type=click.IntRange(min=1), default=None, help="Pages to fetch at most."
)
@click.option(
    "--max-depth", type=click.IntRange(min=0), default=None, help="Links from a seed at most."
)
@click.option(
    "budget_caps",
    "--budget",
    multiple=True,
    metavar="METER=CAP",
    help="A cap at which the crawl pauses: spend=5, requests=10000, bytes=5e9 (repeatable).",
)
@click.option("--on-complete-type", default=None, help="Type of the task submitted at the end.")
@client_options
def start(
    crawler: str,
    urls: tuple[str, ...],
    name: str | None,
    max_pages: int | None,
    max_depth: int | None,
    budget_caps: tuple[str, ...],
    on_complete_type: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Create a run for CRAWLER, seed it with URLS and print the run's id.

    The crawl follows links on the seeds' hosts (and the crawler's scope); watch it
    with `fleet runs watch ID`.
    """
    # Imported here: `fleet --help` must not load the crawl stack.
    from fleet.crawl import seed_task

    seeds = []
    try:
        hosts = sorted({seed_task(u)[1] for u in urls})
        for u in urls:
            key, group, task = seed_task(u, hosts=hosts, max_pages=max_pages, max_depth=max_depth)
            body = task.model_dump(mode="json", exclude_defaults=True)
            seeds.append({"payload": body, "group": group, "unique_key": key})
    except ContractValueError as e:
        raise click.BadParameter(str(e), param_hint="URLS") from None
    on_complete = {"type": on_complete_type, "payload": {}} if on_complete_type else None
    with open_client(url, token) as client:
        run_id = client.create_run(
            name=name or f"crawl {crawler}",
            on_complete=on_complete,
            types=[crawler],
            budget=parse_budget(budget_caps),
        )
        results = client.submit_batch(crawler, [{**s, "run": run_id} for s in seeds])
    failed = [r for r in results if "error" in r]
    if failed:
        raise click.ClickException(f"seeds refused: {failed}")
    if as_json:
        print_json({"run_id": run_id, "seeds": len(seeds)})
    else:
        echo(run_id)
