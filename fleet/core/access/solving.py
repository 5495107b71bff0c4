"""``ctx.solve`` and ``ctx.check``: a challenge handed to the type's solver, and a
response met outside ``ctx.http()`` (a browser's) classified (docs/blocks.md)."""

from __future__ import annotations

import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from fleet.core.access.router import NO_TIERS
from fleet.core.access.solvers import Solution, SolveFailed, Solver, counter_names, solver_factory
from fleet.core.blocks.verdicts import OK, Blocked, Challenge, Verdict
from fleet.core.errors import ConfigError, FleetError

if TYPE_CHECKING:
    from fleet.core.access.router import Access
    from fleet.core.capabilities import Counters
    from fleet.core.config import BaseConfig
    from fleet.core.metering import TaskMeter


class Solved(Protocol):
    """Where a solution's cookies go (``fleet.core.identity.IdentityHandle``)."""

    def add_cookies(self, cookies: list[dict[str, Any]]) -> None: ...


log = logging.getLogger("fleet.blocks")

_solvers: dict[tuple[str, str], Solver] = {}


def solver_for(name: str, config: dict[str, Any]) -> Solver:
    """The process's solver ``name`` built with ``config`` (built once per config)."""
    key = (name, json.dumps(config, sort_keys=True, default=str))
    got = _solvers.get(key)
    if got is None:
        got = _solvers[key] = solver_factory(name)(dict(config))
    return got


async def _count(counters: Counters, name: str) -> None:
    with contextlib.suppress(FleetError):  # a count lost to an outage loses nothing else
        await counters.incr(name)


async def solve(
    access: Access,
    counters: Counters,
    identity: Solved | None,
    challenge: Challenge,
    name: str | None = None,
    metering: TaskMeter | None = None,
) -> Solution:
    """``ctx.solve``: see :meth:`fleet.core.context.Context.solve`."""
    config = access.config
    automation_type = access.automation_type
    name = name or config.solver
    if not name:
        raise ConfigError(
            "ctx.solve needs a solver: name one, or set `solver` in the type's config",
            field="solver",
            automation_type=automation_type,
        )
    solver = solver_for(name, config.solver_config if name == config.solver else {})
    solved, failed = counter_names(name)
    try:
        got = await solver.solve(challenge)
    except Exception as exc:
        await _count(counters, failed)
        if metering is not None:
            metering.solve(name, ok=False)
        raise SolveFailed(
            f"solver {name!r} failed on {challenge.kind} at {challenge.url}: "
            f"{type(exc).__name__}: {exc}",
            automation_type=automation_type,
        ) from exc
    if metering is not None:
        metering.solve(name, ok=got is not None)
    if got is None:
        await _count(counters, failed)
        raise SolveFailed(
            f"solver {name!r} could not get past the {challenge.kind} at {challenge.url}",
            automation_type=automation_type,
        )
    await _count(counters, solved)
    if got.cookies and identity is not None:
        identity.add_cookies(got.cookies)
    return got


async def _parts(response: Any) -> tuple[int, Any, bytes, str]:
    import httpx

    if isinstance(response, httpx.Response):
        return response.status_code, response.headers, await response.aread(), str(response.url)
    # A Playwright response: status, all_headers(), body(), url.
    headers = await response.all_headers()
    try:
        body = await response.body()
    except Exception:  # a redirect or an aborted load has no body to read
        body = b""
    return int(response.status), headers, body, str(response.url)


async def check(
    access: Access, response: Any, *, page: Any = None, classify: bool = True
) -> Verdict:
    """``ctx.check``: see :meth:`fleet.core.context.Context.check` (``classify=False``:
    counted as ``ok``, like a request that opted out)."""
    if response is None:  # a same-document navigation answers nothing
        return OK
    config: BaseConfig = access.config
    if not config.block_detection:
        return OK
    from fleet.core.blocks import classifier_for

    status, headers, body, url = await _parts(response)
    verdict = OK
    if classify:
        verdict = classifier_for(config.block_rules or None)(status, headers, body, url)
    domain = urlsplit(url).hostname or ""
    if domain:
        await access.note(domain, NO_TIERS, verdict)
    if verdict.ok:
        return verdict
    challenge = None
    if verdict.kind in ("challenge", "captcha"):
        if page is None:
            page = getattr(getattr(response, "frame", None), "page", None)
        challenge = Challenge(
            kind=verdict.kind,
            vendor=verdict.vendor,
            url=url,
            sitekey=verdict.sitekey,
            page=page,
            body=body[: 64 * 1024].decode("utf-8", "replace"),
            headers={k.lower(): v for k, v in dict(headers).items()},
        )
    raise Blocked(verdict, url, domain=domain or None, challenge=challenge)
