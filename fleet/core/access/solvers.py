"""Challenge solvers: plugins that get past an interstitial or a captcha
(docs/blocks.md#solvers).

A solver is an entry point of group ``fleet.solvers`` (or an import path,
``package.module:Name``): a class (or any callable) that
takes the type's ``solver_config`` dict and returns an object with
``async def solve(challenge) -> Solution | None``. ``ctx.solve(challenge)`` calls the
type's ``solver`` (or one named), applies what it answers — cookies go into the task's
identity and its open clients, a token is handed back — and counts the solve or the
failure per solver, fleet-wide (the counters ``solver:<name>:solved`` and
``solver:<name>:failed``). The worker calls it too for a ``challenge`` or ``captcha``
verdict left uncaught when the type names a ``solver``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol

from fleet.core.blocks.verdicts import Challenge
from fleet.core.errors import ConfigError, FleetError

log = logging.getLogger("fleet.blocks")

#: Entry-point group of solvers.
GROUP = "fleet.solvers"


@dataclass(slots=True)
class Solution:
    """What a solver got past a challenge with.

    Attributes:
        cookies: Cookies to keep (``storage_state`` form: name, value, domain, path…).
        token: A token to submit (a captcha's response), when that is the answer.
        headers: Headers later requests should carry.
    """

    cookies: list[dict[str, Any]] = field(default_factory=list)
    token: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


class Solver(Protocol):
    """What a ``fleet.solvers`` entry point builds."""

    async def solve(self, challenge: Challenge) -> Solution | None:
        """Get past ``challenge``; None (or an exception) when it could not."""
        ...


class SolveFailed(FleetError):
    """The solver could not get past the challenge (or raised)."""


def solver_factory(name: str) -> Callable[[dict[str, Any]], Solver]:
    """The factory registered under ``name`` in ``fleet.solvers``, or at the import
    path ``package.module:Name``.

    Raises:
        ConfigError: none has that name (the message lists the known ones), or the
            import path does not import.
    """
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            loaded: Callable[[dict[str, Any]], Solver] = getattr(
                importlib.import_module(module), attr
            )
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"solver {name!r} does not import: {exc}", field="solver") from exc
        return loaded
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        known = sorted(ep.name for ep in entry_points(group=GROUP))
        raise ConfigError(
            f"unknown solver {name!r}; installed: {', '.join(known) or 'none'}", field="solver"
        )
    factory: Callable[[dict[str, Any]], Solver] = found[0].load()
    return factory


def counter_names(name: str) -> tuple[str, str]:
    """The fleet-wide counters of a solver: solved, failed."""
    return f"solver:{name}:solved", f"solver:{name}:failed"
