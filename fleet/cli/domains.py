"""``fleet domains TYPE``: a type's domains, the proxy tier each goes through and the
verdicts met there; put one at a tier, or forget it."""

from __future__ import annotations

import time
from typing import Any

import click

from fleet.cli.common import ago, client_options, open_client, print_json, table
from fleet.cli.plain import echo
from fleet.client.answers import DomainOut

COLUMNS = ["domain", "tier", "since", "ok", "throttled", "blocked", "challenge", "captcha",
           "last verdict"]  # fmt: skip


def _since(value: Any) -> str:
    return (
        "-"
        if not isinstance(value, int | float) or not value
        else f"{ago(time.time() - value)} ago"
    )


def row(d: DomainOut) -> list[Any]:
    """One domain as a table row."""
    blocked = d["blocked"]
    last = d["last_verdict"] or "-"
    if d["last_vendor"]:
        last = f"{last} ({d['last_vendor']})"
    return [
        d["domain"],
        d["tier"] if d["tier"] is not None else "-",
        _since(d["since"]),
        d["ok"],
        blocked.get("throttled", 0),
        blocked.get("blocked", 0),
        blocked.get("challenge", 0),
        blocked.get("captcha", 0),
        last,
    ]


@click.command("domains")
@click.argument("automation_type")
@click.argument("domain", required=False)
@click.option("--tier", default=None, help="Put DOMAIN at this tier (a name or an index).")
@click.option("--forget", is_flag=True, help="Forget DOMAIN: it starts again at the first tier.")
@click.option("-n", "limit", type=int, default=50, show_default=True, help="Domains to list.")
@click.option("--after", default=None, help="List the domains after this one (paging).")
@client_options
def domains(
    automation_type: str,
    domain: str | None,
    tier: str | None,
    forget: bool,
    limit: int,
    after: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """List a type's domains and the proxy tier each goes through, or show one DOMAIN;
    put it at a --tier or --forget it."""
    if (tier is not None or forget) and domain is None:
        raise click.UsageError("name the DOMAIN for --tier or --forget")
    if tier is not None and forget:
        raise click.UsageError("--tier and --forget exclude each other")
    if domain is not None and domain.strip(".") == "":
        # Not a host, and a URL's path drops "." and "..": the request would name the
        # type itself (DELETE /automations/TYPE/domains/.. deletes the type).
        raise click.UsageError(f"{domain!r} is not a domain")
    if tier is not None and not tier.strip():
        raise click.UsageError("--tier takes a tier's name or index")
    with open_client(url, token) as client:
        if domain is None:
            page = client.domains(automation_type, after=after, limit=max(1, min(limit, 500)))
            if as_json:
                print_json(page)
                return
            tiers = " → ".join(page["tiers"]) or "no proxy_tiers"
            if not page["items"]:
                echo(f"{automation_type}: no verdict met yet ({tiers})")
                return
            table(
                f"domains of {automation_type} ({tiers})", COLUMNS, [row(d) for d in page["items"]]
            )
            if page["next"] is not None:
                echo(f"more: fleet domains {automation_type} --after {page['next']!r}")
            return
        if forget:
            gone = client.domain_forget(automation_type, domain)
            print_json(gone) if as_json else echo(f"{domain}: forgotten, back to the first tier")
            return
        if tier is not None:
            one = client.domain_set_tier(
                automation_type, domain, int(tier) if tier.isascii() and tier.isdigit() else tier
            )
        else:
            one = client.domain(automation_type, domain)
        if as_json:
            print_json(one)
            return
        table(f"domain {domain} of {automation_type}", COLUMNS, [row(one)])
        for name, counts in one["by_tier"].items():
            echo(f"  {name}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
