"""``proxy_tiers``: a type's exits, cheap first (docs/blocks.md#tiers)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


def _urls(value: str) -> list[str]:
    return [u.strip() for u in value.replace("\n", ",").split(",") if u.strip()]


class ProxyTier(BaseModel):
    """One tier of a type's ``proxy_tiers``: how its requests leave, and what they cost.

    Exactly one of ``proxy_url`` (one URL, or several separated by commas: one is
    picked per client), ``proxy_provider`` (a ``fleet.proxy_providers`` entry point,
    with ``proxy_provider_config``), ``identity_pool`` (the tier's requests go out as an
    identity of that pool, leased for the task: its exit, headers and cookies) or
    ``direct: true``.

    Attributes:
        name: Shown in the domains view, events and metrics (``datacenter``).
        cost_per_gb: What a GB through it costs (for the budgets; informational here).
        cost_per_request: What one request through it costs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    proxy_url: str | None = Field(default=None, min_length=1, max_length=4096)
    proxy_provider: str | None = Field(default=None, min_length=1, max_length=200)
    proxy_provider_config: dict[str, Any] = Field(default_factory=dict)
    direct: bool = False
    identity_pool: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
    )
    cost_per_gb: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    cost_per_request: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_exit(self) -> ProxyTier:
        given = [
            self.proxy_url is not None,
            self.proxy_provider is not None,
            self.direct,
            self.identity_pool is not None,
        ]
        if sum(given) != 1:
            raise ValueError(
                f"tier {self.name!r} needs exactly one of proxy_url, proxy_provider, "
                "identity_pool or direct: true"
            )
        if self.proxy_url is not None and not _urls(self.proxy_url):
            raise ValueError(f"tier {self.name!r}: proxy_url holds no URL")
        return self


def check_tiers(tiers: list[ProxyTier]) -> list[ProxyTier]:
    """Tier names are unique (they name the tier everywhere)."""
    names = [t.name for t in tiers]
    if len(set(names)) != len(names):
        raise ValueError(f"proxy_tiers names must be unique; got {names}")
    if len(tiers) > 16:
        raise ValueError("at most 16 proxy_tiers")
    return tiers
