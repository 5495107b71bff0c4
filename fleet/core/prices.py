"""``costs``: a type's prices beyond its proxy tiers' own (docs/costs.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Costs(BaseModel):
    """A type's prices beyond its tiers' (``cost_per_gb``, ``cost_per_request`` of each
    of ``proxy_tiers``), in one currency unit.

    Attributes:
        per_gb: The price of a GB through a type without ``proxy_tiers``.
        per_solve: Per solver name: the price of one solve (``"*"``: any other solver).
        per_browser_second: The price of a second of a browser context.
        per_unit: Per meter of the plugin's own (``ctx.meter``): the price of one unit.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    per_gb: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    per_solve: dict[str, float] = Field(default_factory=dict)
    per_browser_second: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    per_unit: dict[str, float] = Field(default_factory=dict)
