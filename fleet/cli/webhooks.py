"""``fleet webhooks``: list the webhook subscriptions (or: create, delete, test one,
show its deliveries). ``create`` prints the signing secret, the only time it is shown."""

from __future__ import annotations

import time
from typing import Any

import click

from fleet.cli.common import ago, client_options, open_client, print_json, table
from fleet.cli.plain import echo
from fleet.core.webhooks import EVENTS

COLUMNS = ["id", "url", "events", "filters", "enabled", "secret"]
DELIVERY_COLUMNS = ["event", "type", "status", "attempts", "http", "error", "queued"]


def _row(hook: dict[str, Any]) -> list[Any]:
    filters = []
    if hook.get("types"):
        filters.append("types " + ",".join(hook["types"]))
    if hook.get("runs"):
        filters.append("runs " + ",".join(hook["runs"]))
    enabled = "yes" if hook["enabled"] else "no"
    events = ",".join(hook["events"])
    return [hook["id"], hook["url"], events, "; ".join(filters) or "-", enabled, hook["secret"]]


def _delivery(d: dict[str, Any]) -> list[Any]:
    queued = f"{ago(time.time() - d['created_at'])} ago" if d.get("created_at") else "-"
    return [
        d["event_id"],
        d["event_type"],
        d["status"],
        d["attempts"],
        d["http_status"] if d["http_status"] is not None else "-",
        d["error"] or "-",
        queued,
    ]


@click.group("webhooks", invoke_without_command=True)
@client_options
@click.pass_context
def webhooks(ctx: click.Context, url: str | None, token: str | None, as_json: bool) -> None:
    """List the webhook subscriptions (or: create, delete, test one, show its deliveries)."""
    if ctx.invoked_subcommand is not None:
        return
    with open_client(url, token) as client:
        found = client.request("GET", "/api/v1/webhooks")
    if as_json:
        print_json(found)
        return
    hooks = found["webhooks"]
    table(f"webhooks ({len(hooks)})", COLUMNS, [_row(h) for h in hooks])


@webhooks.command("create")
@click.argument("target_url")
@click.option(
    "--event",
    "events",
    multiple=True,
    required=True,
    type=click.Choice(EVENTS),
    help="An event it receives (repeatable).",
)
@click.option("--type", "types", multiple=True, help="Only events of this type (repeatable).")
@click.option("--run", "runs", multiple=True, help="Only events of this run (repeatable).")
@click.option("--description", default=None, help="Free text.")
@client_options
def create(
    target_url: str,
    events: tuple[str, ...],
    types: tuple[str, ...],
    runs: tuple[str, ...],
    description: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Subscribe TARGET_URL to events; prints the signing secret (shown this once)."""
    body: dict[str, Any] = {"url": target_url, "events": list(events)}
    if types:
        body["types"] = list(types)
    if runs:
        body["runs"] = list(runs)
    if description is not None:
        body["description"] = description
    with open_client(url, token) as client:
        made = client.request("POST", "/api/v1/webhooks", json_body=body)
    if as_json:
        print_json(made)
        return
    echo(f"webhook {made['id']} -> {made['url']} ({', '.join(made['events'])})")
    echo(f"secret  {made['secret']}")
    echo("keep the secret now: it is not shown again")


@webhooks.command("delete")
@click.argument("hook_id")
@client_options
def delete(hook_id: str, url: str | None, token: str | None, as_json: bool) -> None:
    """Delete a subscription and its delivery log."""
    with open_client(url, token) as client:
        gone = client.request("DELETE", f"/api/v1/webhooks/{hook_id}")
    if as_json:
        print_json(gone)
    else:
        echo(f"webhook {hook_id} deleted")


@webhooks.command("test")
@click.argument("hook_id")
@client_options
def send_test(hook_id: str, url: str | None, token: str | None, as_json: bool) -> None:
    """Send a signed ``webhook.test`` event to a subscription."""
    with open_client(url, token) as client:
        sent = client.request("POST", f"/api/v1/webhooks/{hook_id}/test")
    if as_json:
        print_json(sent)
    else:
        echo(f"webhook.test {sent['event_id']} queued for {hook_id}")


@webhooks.command("deliveries")
@click.argument("hook_id")
@click.option("-n", "limit", type=int, default=50, show_default=True, help="Deliveries to list.")
@click.option("--cursor", default=None, help="The `next` of the last page.")
@client_options
def deliveries(
    hook_id: str,
    limit: int,
    cursor: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """A subscription's delivery log, newest first: status, attempts, last answer."""
    params: dict[str, Any] = {"limit": max(1, min(limit, 100))}
    if cursor is not None:
        params["cursor"] = cursor
    with open_client(url, token) as client:
        page = client.request("GET", f"/api/v1/webhooks/{hook_id}/deliveries", params=params)
    if as_json:
        print_json(page)
        return
    rows = [_delivery(d) for d in page["deliveries"]]
    table(f"deliveries of {hook_id} ({len(rows)} shown)", DELIVERY_COLUMNS, rows)
    if page["next"] is not None:
        echo(f"more: fleet webhooks deliveries {hook_id} --cursor {page['next']}")
