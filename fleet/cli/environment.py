"""The ``FLEET_*`` environment as the CLI reads it: a module of its own so that
``fleet worker`` reads it without importing the client commands' libraries."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from fleet.settings import Settings


def load_settings() -> Settings:
    """``Settings()`` from the environment, or a clean usage error naming the
    ``FLEET_*`` variable that does not parse (never a traceback, never its value)."""
    from pydantic import ValidationError

    from fleet.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"FLEET_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in exc.errors()
        )
        raise click.UsageError(f"invalid environment: {problems}") from None
