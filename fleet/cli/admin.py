"""CLI client commands about the fleet: ``config get|set``, ``workers``, ``catalog``."""

from __future__ import annotations

import json
from typing import Any

import click

from fleet.cli.common import (
    ago,
    client_options,
    open_client,
    parse_assignment,
    print_json,
    table,
)
from fleet.cli.plain import echo
from fleet.client.answers import CatalogEntryOut


@click.group("config")
def config() -> None:
    """Read or change an automation type's config (type-wide or per worker)."""


@config.command("get")
@click.argument("automation_type")
@click.option("--worker", "worker_id", default=None, help="Show one worker's config.")
@client_options
def config_get(
    automation_type: str, worker_id: str | None, url: str | None, token: str | None, as_json: bool
) -> None:
    """Show the effective config of a type (or of one worker)."""
    with open_client(url, token) as client:
        if worker_id is not None:
            layers = client.worker(automation_type, worker_id).get("config")
            if layers is None:  # one worker's answer has it; a list's would not
                raise click.ClickException(f"the master sent no config of {worker_id}")
            if as_json:
                print_json(layers)
                return
            rows = [
                [k, json.dumps(v), "override" if k in layers["override"] else "type"]
                for k, v in sorted(layers["merged"].items())
            ]
            table(
                f"{automation_type} / {worker_id} (gen {layers['desired_gen']})",
                ["key", "value", "from"],
                rows,
            )
            return
        cfg = client.config_get(automation_type)
        if as_json:
            print_json(cfg)
            return
        rows = [
            [k, json.dumps(v), "set" if k in cfg["config"] else "default"]
            for k, v in sorted(cfg["effective"].items())
        ]
        table(f"{automation_type} config", ["key", "value", "source"], rows)
        if cfg["missing"]:
            echo(f"required but unset: {', '.join(cfg['missing'])}", err=True)


@config.command("set")
@click.argument("automation_type")
@click.argument("assignments", nargs=-1, required=True)
@click.option("--worker", "worker_id", default=None, help="Set one worker's override.")
@click.option("--replace", is_flag=True, help="Replace the stored config instead of merging.")
@client_options
def config_set(
    automation_type: str,
    assignments: tuple[str, ...],
    worker_id: str | None,
    replace: bool,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Set KEY=VALUE pairs (values are JSON when they parse: slots=3 enabled=false)."""
    patch = dict(parse_assignment(a) for a in assignments)
    with open_client(url, token) as client:
        result = client.config_patch(automation_type, patch, worker_id=worker_id, replace=replace)
    if as_json:
        print_json(result)
        return
    echo(
        f"{automation_type}: generation {result['gen']} pushed to "
        f"{len(result['workers'])} worker(s)"
    )
    if result["missing"]:
        echo(f"required but unset: {', '.join(result['missing'])}", err=True)


@click.command("workers")
@click.argument("automation_type", required=False)
@click.option("--drain", "drain_id", default=None, help="Drain this worker (needs TYPE).")
@click.option("--resume", "resume_id", default=None, help="Resume this worker (needs TYPE).")
@click.option("--forget", "forget_id", default=None, help="Forget this worker (needs TYPE).")
@client_options
def workers(
    automation_type: str | None,
    drain_id: str | None,
    resume_id: str | None,
    forget_id: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """List workers (of one TYPE): state, last seen, slots, config generations."""
    actions = [
        (a, w) for a, w in (("drain", drain_id), ("resume", resume_id), ("forget", forget_id)) if w
    ]
    if actions and automation_type is None:
        raise click.UsageError("--drain/--resume/--forget need the automation TYPE")
    with open_client(url, token) as client:
        if actions:
            assert automation_type is not None
            for action, wid in actions:
                result = client.worker_action(automation_type, wid, action)
                print_json(result) if as_json else echo(f"{wid}: {action}")
            return
        views = client.workers(automation_type)
    if as_json:
        print_json(views)
        return
    rows: list[list[Any]] = []
    for v in views:
        gen = v["gen"]
        gen_text = f"{gen['applied']}/{gen['desired']}" + (" (lagging)" if v["lagging"] else "")
        slots = v["slots"]
        rows.append(
            [
                v["type"],
                v["worker_id"],
                v["state"],
                ago(v["seen_ago"]),
                f"{slots['busy']}/{slots['total']}",
                gen_text,
                v.get("host"),
                (v.get("last_error") or "")[:60],
            ]
        )
    table(
        "workers",
        [
            "type",
            "worker",
            "state",
            "seen",
            "busy/slots",
            "gen applied/desired",
            "host",
            "last error",
        ],
        rows,
    )


def pool_names(entry: CatalogEntryOut) -> list[str]:
    """The names of the pools a catalog entry declares (the name its REST path uses,
    not the attribute that holds the pool in the class)."""
    pools = entry.get("pools")
    if not isinstance(pools, dict):
        return []
    return sorted(
        p["name"] if isinstance(p, dict) and isinstance(p.get("name"), str) else str(attr)
        for attr, p in pools.items()
    )


@click.command("catalog")
@click.argument("automation_type", required=False)
@client_options
def catalog(automation_type: str | None, url: str | None, token: str | None, as_json: bool) -> None:
    """List automation types (or print one type's schemas as JSON)."""
    with open_client(url, token) as client:
        if automation_type is not None:
            print_json(client.catalog(automation_type))
            return
        entries = client.catalog()
        summary = {a["type"]: a for a in client.automations()}
    if as_json:
        print_json(entries)
        return
    rows = []
    for t, e in sorted(entries.items()):
        s = summary.get(t)
        w = (s.get("workers") if s else None) or {}
        q = (s.get("queue") if s else None) or {}
        rows.append(
            [
                t,
                e.get("kind"),
                f"{w.get('up', 0)}/{w.get('total', 0)}",
                q.get("pending_total", "-"),
                q.get("dead", "-"),
                "yes" if e.get("stream") else "",
                ", ".join(pool_names(e)),
            ]
        )
    table("catalog", ["type", "kind", "workers up", "pending", "dead", "stream", "pools"], rows)
