"""``fleet identities``: identity pools; add, generate, retire, revive, delete identities."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from fleet.cli.common import ago, client_options, open_client, print_json, table
from fleet.cli.plain import echo
from fleet.client.answers import IdentityCounts, IdentityOut
from fleet.client.http import FleetClient

STATES = ("ready", "leased", "cooling", "retired")
POOL_COLUMNS = ["pool", "total", *STATES]


def _counts(counts: IdentityCounts) -> list[int]:
    return [counts["ready"], counts["leased"], counts["cooling"], counts["retired"]]


COLUMNS = ["id", "state", "proxy", "locale", "timezone", "uses", "ok", "blocked", "last used",
           "last reason"]  # fmt: skip


def _since(value: Any) -> str:
    return "-" if not isinstance(value, int | float) else f"{ago(time.time() - value)} ago"


def row(i: IdentityOut) -> list[Any]:
    """One identity as a table row."""
    fp: dict[str, Any] = dict(i["fingerprint"] or {})
    stats = i["stats"]
    return [
        i["id"],
        i["state"],
        i["proxy"] or "direct",
        fp.get("locale") or "-",
        fp.get("timezone") or "-",
        stats["uses"],
        stats["ok"],
        stats["blocked"],
        _since(stats["last_used_at"]),
        stats["last_reason"] or "",
    ]


def _details(i: IdentityOut) -> str:
    fp = i["fingerprint"]
    lines = []
    if fp is not None:
        view = fp["viewport"] or {}
        size = f"{view.get('width')}x{view.get('height')}" if view else "-"
        lines.append(f"user agent: {fp['user_agent']}")
        lines.append(f"platform {fp['platform'] or '-'} · viewport {size}")
        lines.append("headers: " + ", ".join(name for name, _ in fp["headers"]))
    domains = sorted({str(c.get("domain")) for c in i["cookies"]})
    lines.append(f"cookies: {len(i['cookies'])}" + (f" ({', '.join(domains)})" if domains else ""))
    if i["account"] is not None:
        lines.append("account: " + json.dumps(i["account"], sort_keys=True))
    return "\n".join(lines)


def _read_file(path: str) -> list[Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}", param_hint="--add") from exc
    if isinstance(data, dict) and isinstance(data.get("identities"), list):
        data = data["identities"]
    if not isinstance(data, list):
        raise click.BadParameter(
            f'{path} holds no list of identities (a list, or {{"identities": [...]}})',
            param_hint="--add",
        )
    return data


def _create(client: FleetClient, pool: str, add: str | None, n: int | None, plan: Any) -> Any:
    if add is not None:
        return client.identities_add(pool, _read_file(add))
    assert n is not None
    return client.identities_generate(pool, n, **plan)


def _list(client: FleetClient, pool: str | None, limit: int, after: str | None,
          reveal: bool, as_json: bool) -> None:  # fmt: skip
    if pool is None:
        pools = client.identity_pools()["pools"]
        if as_json:
            print_json(pools)
        elif not pools:
            echo("no identity pool holds an identity yet (fleet identities POOL --add FILE.json)")
        else:
            rows = [[p["pool"], p["total"], *_counts(p["counts"])] for p in pools]
            table("identity pools", POOL_COLUMNS, rows)
        return
    page = client.identities(pool, after=after, limit=limit, reveal=reveal)
    if as_json:
        print_json(page)
        return
    counts = ", ".join(f"{n} {s}" for n, s in zip(_counts(page["counts"]), STATES, strict=True))
    table(f"identities of {pool} ({counts})", COLUMNS, [row(i) for i in page["items"]])
    if page["next"] is not None:
        echo(f"more: fleet identities {pool} --after {page['next']!r}")


@click.command("identities")
@click.argument("pool", required=False)
@click.argument("identity_id", metavar="[ID]", required=False)
@click.option("--add", "add", metavar="FILE.json", help="Add the identities of FILE (a list).")
@click.option("--generate", "n", type=int, default=None, help="Generate N identities.")
@click.option("--proxy", "proxies", multiple=True, help="A proxy of --generate (repeat).")
@click.option("--country", "countries", multiple=True, help="A country code (repeat).")
@click.option("--browser", "browsers", multiple=True, help="chrome, firefox, edge, safari.")
@click.option("--id-prefix", default=None, help="Ids of --generate: prefix + 12 hex digits.")
@click.option("--retire", is_flag=True, help="Retire ID: no lease takes it until revived.")
@click.option("--reason", default=None, help="Why ID is retired (its last reason).")
@click.option("--revive", is_flag=True, help="Bring a retired or cooling ID back to ready.")
@click.option("--delete", is_flag=True, help="Delete ID (asks first, unless --yes or --json).")
@click.option("--yes", is_flag=True, help="Do not ask before --delete.")
@click.option("--reveal", is_flag=True, help="Show secrets unmasked (admin token).")
@click.option("-n", "limit", type=int, default=50, show_default=True, help="Identities to list.")
@click.option("--after", default=None, help="List the identities after this id (paging).")
@client_options
def identities(
    pool: str | None,
    identity_id: str | None,
    add: str | None,
    n: int | None,
    proxies: tuple[str, ...],
    countries: tuple[str, ...],
    browsers: tuple[str, ...],
    id_prefix: str | None,
    retire: bool,
    reason: str | None,
    revive: bool,
    delete: bool,
    yes: bool,
    reveal: bool,
    limit: int,
    after: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """List identity pools, a POOL's identities or one identity ID; add, generate,
    retire, revive or delete them. Secrets show masked unless --reveal."""
    creates = [o for o, on in (("--add", add is not None), ("--generate", n is not None)) if on]
    actions = [o for o, on in (("--retire", retire), ("--revive", revive),
               ("--delete", delete)) if on]  # fmt: skip
    if len(creates + actions) > 1:
        raise click.UsageError(f"{' and '.join(creates + actions)} exclude each other")
    if creates and (pool is None or identity_id is not None):
        raise click.UsageError(f"{creates[0]} takes the POOL only")
    if actions and identity_id is None:
        raise click.UsageError(f"name the identity ID to {actions[0].lstrip('-')}")
    if reason is not None and not retire:
        raise click.UsageError("--reason goes with --retire")
    if (proxies or countries or browsers or id_prefix is not None) and n is None:
        raise click.UsageError("--proxy, --country, --browser and --id-prefix go with --generate")
    plan = {"proxies": list(proxies), "countries": list(countries), "browsers": list(browsers),
            "id_prefix": id_prefix}  # fmt: skip
    with open_client(url, token) as client:
        if creates:
            made = _create(client, str(pool), add, n, plan)
            if as_json:
                print_json(made)
            else:
                echo(f"{pool}: {made['created']} created, {made['replaced']} replaced")
            return
        if pool is None or identity_id is None:
            _list(client, pool, max(1, min(limit, 500)), after, reveal, as_json)
            return
        if delete:
            if not yes and not as_json:
                click.confirm(f"Delete identity {identity_id} of {pool}?", abort=True)
            deleted = client.identity_delete(pool, identity_id)
            print_json(deleted) if as_json else echo(f"identity {identity_id} deleted")
            return
        if retire:
            one = client.identity_retire(pool, identity_id, reason)
        elif revive:
            one = client.identity_revive(pool, identity_id)
        else:
            one = client.identity(pool, identity_id, reveal=reveal)
        if as_json:
            print_json(one)
            return
        table(f"identity {identity_id} of {pool}", COLUMNS, [row(one)])
        echo(_details(one))
