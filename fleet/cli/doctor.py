"""``fleet doctor``: is this machine's fleet set up right?

Checks the backend answers, every stored catalog entry, worker record and dead
letter can be read, Redis keeps data across restarts (AOF) and will not evict
queue keys, the installed plugins load, and the master is reachable and accepts
the token. Each check is ``ok``, ``warn`` or ``fail``; any ``fail``
makes the command exit 1.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click
import httpx

from fleet.cli.common import (
    print_json,
    resolve_token,
    resolve_url,
    table,
)
from fleet.cli.environment import load_settings

if TYPE_CHECKING:
    from fleet.backends.base import Backend


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the doctor's report."""

    name: str
    status: str  #: ok | warn | fail
    detail: str


async def check_backend(url: str) -> list[Check]:
    """The backend answers; on Redis, persistence and eviction settings."""
    from fleet.backends import open_backend, redact_url
    from fleet.backends.base import with_env_namespace

    shown = redact_url(with_env_namespace(url))  # the namespace says which fleet it sees
    try:
        backend = await asyncio.wait_for(open_backend(url), 10)
    except Exception as exc:
        return [Check("backend", "fail", f"{shown}: {type(exc).__name__}: {exc}")]
    try:
        ok = await backend.ping()
        records = await check_records(backend) if ok else []
    finally:
        await backend.close()
    checks = [
        Check(
            "backend", "ok" if ok else "fail", f"{shown} {'answers' if ok else 'does not answer'}"
        )
    ]
    checks += records
    if ok and urlsplit(url).scheme in ("redis", "rediss", "unix"):
        checks += await check_redis(url)
    return checks


#: Dead letters per type the doctor reads, oldest first, looking for unreadable ones.
DEAD_SCAN = 1000


async def check_records(backend: Backend) -> list[Check]:
    """Stored records that cannot be read (docs/operations.md, "Corrupt records"):
    one ``warn`` line each, or one ``ok`` line."""
    from fleet.core.stored import UnreadableBody, entry_unreadable

    try:
        found: list[Check] = []
        entries = await backend.catalog.all()
        for t, entry in sorted(entries.items()):
            why = entry_unreadable(entry)
            if why is not None:
                found.append(Check("records", "warn", f"catalog entry of {t}: {why}"))
        pairs = await backend.workers.all()
        for t, wid in pairs:
            record = await backend.workers.get(t, wid)
            if record is not None and record.unreadable:
                parts = ", ".join(record.unreadable)
                found.append(Check("records", "warn", f"worker {wid} of {t}: unreadable {parts}"))
        types = sorted({*entries, *(t for t, _ in pairs)})
        for t in types:
            for body in await backend.queues.dead_peek(t, DEAD_SCAN):
                if isinstance(body, UnreadableBody):
                    shown = body.id or "(no id)"
                    found.append(
                        Check("records", "warn", f"dead letter {shown} of {t}: {body.unreadable}")
                    )
    except Exception as exc:
        return [Check("records", "fail", f"cannot read the records: {type(exc).__name__}: {exc}")]
    if found:
        return found
    detail = (
        f"{len(entries)} catalog entr{'y' if len(entries) == 1 else 'ies'}, {len(pairs)} "
        f"worker record(s) and the dead letters of {len(types)} type(s) read"
    )
    return [Check("records", "ok", detail)]


async def check_redis(url: str) -> list[Check]:
    """AOF on (queues survive a restart) and ``maxmemory-policy noeviction``."""
    import redis.asyncio as aioredis

    client: Any = aioredis.Redis.from_url(url)
    checks = []
    try:
        info = await client.info("persistence")
        if int(info.get("aof_enabled", 0)):
            checks.append(Check("redis persistence", "ok", "appendonly yes"))
        else:
            checks.append(
                Check(
                    "redis persistence",
                    "warn",
                    "AOF is off: a Redis restart loses what changed since the last RDB snapshot "
                    "(set appendonly yes)",
                )
            )
        try:
            policy = (await client.config_get("maxmemory-policy")).get("maxmemory-policy")
        except Exception:  # CONFIG is often disabled on managed Redis
            policy = None
        if policy is None:
            checks.append(Check("redis eviction", "warn", "cannot read maxmemory-policy"))
        elif policy in ("noeviction", b"noeviction"):
            checks.append(Check("redis eviction", "ok", "noeviction"))
        else:
            checks.append(
                Check(
                    "redis eviction",
                    "warn",
                    f"maxmemory-policy {policy!s}: Redis may evict queue keys; use noeviction",
                )
            )
    finally:
        await client.aclose()
    return checks


def check_plugins() -> list[Check]:
    """Installed plugins import and declare valid automations."""
    try:
        from fleet.plugins import discover
    except ImportError:
        return [Check("plugins", "warn", "plugin discovery is not available")]
    found = discover()
    checks = [
        Check(
            "plugins",
            "ok" if found.types else "warn",
            f"{len(found.types)} automation type(s): {', '.join(sorted(found.types)) or '-'}",
        )
    ]
    for error in found.errors:
        checks.append(Check("plugin", "fail", f"{error.source}: {error.error}"))
    return checks


def check_master(url: str, token: str | None) -> list[Check]:
    """The master answers ``/healthz`` and accepts the token."""
    try:
        with httpx.Client(base_url=url, timeout=5) as http:
            health = http.get("/healthz")
            ready = http.get("/readyz")
            checks = [
                Check(
                    "master",
                    "ok" if health.status_code == 200 else "fail",
                    f"{url} answers {health.status_code}",
                )
            ]
            checks.append(
                Check(
                    "master backend",
                    "ok" if ready.status_code == 200 else "fail",
                    "ready" if ready.status_code == 200 else "the master's backend is down",
                )
            )
            if not token:
                checks.append(Check("token", "warn", "no token (FLEET_ADMIN_TOKEN or --token)"))
                return checks
            r = http.get("/api/v1/catalog", headers={"Authorization": f"Bearer {token}"})
            status = {200: "ok", 401: "fail", 403: "warn"}.get(r.status_code, "fail")
            detail = {
                200: "accepted",
                401: "refused (401)",
                403: "known but may not list (scoped token)",
            }.get(r.status_code, str(r.status_code))
            checks.append(Check("token", status, detail))
            return checks
    except httpx.HTTPError as exc:
        return [Check("master", "fail", f"cannot reach {url}: {exc}")]


@click.command("doctor")
@click.option("--url", default=None, help="Master URL (FLEET_MASTER_URL).")
@click.option("--token", default=None, help="Bearer token (FLEET_ADMIN_TOKEN).")
@click.option("--backend", "backend_url", default=None, help="Backend URL (FLEET_BACKEND_URL).")
@click.option("--no-master", is_flag=True, help="Skip the master checks.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def doctor(
    url: str | None, token: str | None, backend_url: str | None, no_master: bool, as_json: bool
) -> None:
    """Check the backend, Redis persistence, plugins, and the master and token."""
    checks = asyncio.run(check_backend(backend_url or load_settings().backend_url))
    checks += check_plugins()
    if not no_master:
        checks += check_master(resolve_url(url), resolve_token(token))
    if as_json:
        print_json([{"name": c.name, "status": c.status, "detail": c.detail} for c in checks])
    else:
        marks = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]"}
        table(
            "fleet doctor",
            ["check", "", "detail"],
            [[c.name, marks[c.status], c.detail] for c in checks],
        )
    if any(c.status == "fail" for c in checks):
        raise SystemExit(1)
