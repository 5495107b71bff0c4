"""``BaseConfig``: the framework fields every automation's config carries."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from fleet.core.access.tier_config import ProxyTier, check_tiers
from fleet.core.autoslots import AutoSlotsTuning
from fleet.core.blocks.rules import BlockRule
from fleet.core.budgets import check_budget
from fleet.core.errors import ConfigError
from fleet.core.flow import parse_rate
from fleet.core.monitors import Monitors
from fleet.core.prices import Costs
from fleet.core.tiers import (
    DEFAULT_ESCALATE_AFTER,
    DEFAULT_PROBE_AFTER_SECONDS,
    DEFAULT_PROBE_SUCCESSES,
    DEFAULT_WINDOW_SECONDS,
)

#: Names of the fields the framework itself reads (as opposed to plugin fields).
FRAMEWORK_FIELDS = (
    "enabled",
    "slots",
    "min_slots",
    "max_slots",
    "auto_slots",
    "max_attempts",
    "visibility_seconds",
    "timeout_seconds",
    "recycle_seconds",
    "proxy_url",
    "proxy_provider",
    "proxy_provider_config",
    "proxy_bad_threshold",
    "proxy_cooldown_seconds",
    "proxy_max_concurrency",
    "group_concurrency",
    "group_rate",
)

#: Fields whose value is one for the whole fleet, and why: a per-worker override of
#: them is refused (422).
FLEET_WIDE_FIELDS = {
    "group_concurrency": "a group's cap counts its tasks on every worker",
    "group_rate": "a group's rate counts its starts on every worker",
    "per_host_concurrency": "a host's cap counts its requests on every worker",
    "per_host_rate": "a host's rate counts its requests on every worker",
    "monitors": "a type's monitors are checked by the master over every worker's tasks",
    "proxy_max_concurrency": "a proxy's places are counted on every worker",
    "proxy_cooldown_seconds": "a cooled proxy is left alone by every worker",
    "proxy_bad_threshold": "bad reports of every worker count toward it",
    "proxy_tiers": "a domain's tier is one for the fleet, learned from every worker's verdicts",
    "tier_escalate_after": "every worker's blocks count toward a domain's escalation",
    "tier_window_seconds": "every worker's blocks count toward a domain's escalation",
    "tier_probe_after_seconds": "a domain's tier is one for the fleet",
    "tier_probe_successes": "every worker's probes count toward a step down",
}


#: The ``slots`` value that asks each worker to size the type's slots itself.
AUTO = "auto"
#: Most slots of one type in one worker.
MAX_SLOTS = 10_000


class BaseConfig(BaseModel):
    """Base of every automation's ``Config``.

    Subclass it and add the plugin's own fields. Unknown keys are rejected so a
    typo in a PATCH is a 422, not a silently ignored setting.

    Attributes:
        enabled: When False the worker runs no slot of this type.
        slots: Concurrent slots per worker, or ``"auto"``: each worker sizes them
            between ``min_slots`` and ``max_slots`` from what it measures
            (docs/autoscaling.md).
        min_slots: The fewest slots an ``"auto"`` type runs (when enabled).
        max_slots: The most slots an ``"auto"`` type runs.
        auto_slots: The thresholds of ``"auto"`` slots (:class:`AutoSlotsTuning`).
        max_attempts: Attempts before a task is dead-lettered (per-task override wins).
        visibility_seconds: Lease length of a reserved task; renewed while it runs.
        timeout_seconds: Time limit of one ``run_one`` (None: no limit). Past it the
            run is cancelled (its ``cleanup`` still runs) and the attempt fails with
            ``TaskTimeout``; a task's own ``timeout_seconds`` wins. See
            docs/batch-automations.md#time-limits.
        recycle_seconds: Restart slots older than this (None: never).
        proxy_url: A fixed proxy URL, or several separated by commas or newlines.
        proxy_provider: Name of a ``fleet.proxy_providers`` entry point.
        proxy_provider_config: Settings passed to that provider.
        proxy_bad_threshold: Bad reports in a row (``ctx.proxy.report_bad``) that cool
            a proxy down, fleet-wide.
        proxy_cooldown_seconds: How long a proxy past the threshold is left alone by
            every slot of every worker (0: never cooled).
        proxy_max_concurrency: At most this many slots on one proxy at once,
            fleet-wide (None: no cap). See docs/primitives.md#proxies.
        monitors: Thresholds on the data of every run the type's tasks are in
            (docs/monitors.md): ``{"min_items": 100, "max_null_rate": {"price": 0.05}}``.
        group_concurrency: At most this many tasks of one group running at once,
            fleet-wide (None: no cap). See docs/flow-control.md.
        group_rate: At most this many tasks of one group started per period,
            fleet-wide and evenly spaced: ``"5/s"``, ``"100/m"``, ``"1000/h"``
            (None: no rate).
        identity_pool: The identity pool each task leases from (``ctx.identity``;
            None: no identities). See docs/identities.md.
        identity_max_concurrency: Slots of the whole fleet that may hold one identity
            at once.
        identity_cooldown_seconds: How long a blocked identity is left alone, fleet-wide.
        identity_retire_after: Blocks in a row that retire an identity.
        identity_wait_seconds: How long a task waits for a usable identity before it
            goes back uncharged (``Throttled``).
        identity_lease_seconds: How long an identity's lease lasts unless renewed (the
            worker renews it every third of that): a dead worker's identities are
            usable again within it.
        block_detection: Classify every response of ``ctx.http()`` clients; a block
            raises ``Blocked`` (docs/blocks.md).
        block_rules: The type's own block markers, tried before the built-in detectors.
        proxy_tiers: Exits per domain, cheap first; the fleet moves each domain up on
            blocks and back down when they stop (docs/blocks.md#tiers).
        tier_escalate_after: Blocked/challenge verdicts at a domain's tier, within
            ``tier_window_seconds``, that move it one tier up.
        tier_probe_after_seconds: Time at a tier before requests probe one tier down.
        tier_probe_successes: Probes in a row that step a domain down.
        solver: The ``fleet.solvers`` entry point a ``challenge`` verdict is handed to
            before the task goes back (None: none); ``solver_config`` its settings.
        costs: Prices beyond the tiers' own: per GB without tiers, per solve, per
            browser-second, per unit of the plugin's meters (docs/costs.md).
        daily_budget: Caps by meter over the type's UTC day (``{"spend": 100}``): the
            step that adds its meters past one pauses the type's dispatch until the
            next day or until the budget is raised (docs/costs.md).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled: bool = True
    slots: Annotated[int, Field(ge=0, le=MAX_SLOTS)] | Literal["auto"] = 1
    min_slots: int = Field(default=1, ge=1, le=10_000)
    max_slots: int = Field(default=16, ge=1, le=10_000)
    auto_slots: AutoSlotsTuning = Field(default_factory=AutoSlotsTuning)
    max_attempts: int = Field(default=3, ge=1, le=1_000)
    visibility_seconds: float = Field(default=300.0, ge=10)
    timeout_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    recycle_seconds: float | None = Field(default=None, gt=0)
    proxy_url: str | None = None
    proxy_provider: str | None = None
    proxy_provider_config: dict[str, Any] = Field(default_factory=dict)
    proxy_bad_threshold: int = Field(default=1, ge=1, le=1_000)
    proxy_cooldown_seconds: float = Field(default=300.0, ge=0, le=7 * 86_400)
    proxy_max_concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    monitors: Monitors | None = None
    group_concurrency: int | None = Field(default=None, ge=1)
    group_rate: str | None = None
    identity_pool: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
    )
    identity_max_concurrency: int = Field(default=1, ge=1, le=10_000)
    identity_cooldown_seconds: float = Field(default=600.0, ge=0, le=30 * 86_400)
    identity_retire_after: int = Field(default=3, ge=1, le=1_000)
    identity_wait_seconds: float = Field(default=10.0, ge=0, le=3_600)
    identity_lease_seconds: float = Field(default=30.0, ge=1, le=3_600)
    block_detection: bool = True
    block_rules: list[BlockRule] = Field(default_factory=list, max_length=200)
    proxy_tiers: list[ProxyTier] = Field(default_factory=list)
    tier_escalate_after: int = Field(default=DEFAULT_ESCALATE_AFTER, ge=1, le=10_000)
    tier_window_seconds: float = Field(default=DEFAULT_WINDOW_SECONDS, gt=0, le=30 * 86_400)
    tier_probe_after_seconds: float = Field(
        default=DEFAULT_PROBE_AFTER_SECONDS, ge=0, le=30 * 86_400
    )
    tier_probe_successes: int = Field(default=DEFAULT_PROBE_SUCCESSES, ge=1, le=10_000)
    solver: str | None = Field(default=None, min_length=1, max_length=200)
    solver_config: dict[str, Any] = Field(default_factory=dict)
    costs: Costs = Field(default_factory=Costs)
    daily_budget: dict[str, float] | None = None

    @field_validator("slots", mode="before")
    @classmethod
    def _check_slots(cls, value: Any) -> int | str:
        # One clear message for every wrong value (pydantic's union would answer
        # twice, once per member, under a field path naming the member).
        if isinstance(value, str) and value.strip().lower() == AUTO:
            return AUTO
        problem = slots_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return int(value)

    @model_validator(mode="after")
    def _check_slot_bounds(self) -> BaseConfig:
        problem = slot_bounds_problem(self.model_dump(include={"min_slots", "max_slots"}))
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def auto(self) -> bool:
        """True when the worker sizes the slots itself (``slots: "auto"``)."""
        return self.slots == AUTO

    @field_validator("daily_budget", mode="before")
    @classmethod
    def _check_daily_budget(cls, value: Any) -> dict[str, float] | None:
        return check_budget(value, field="daily_budget")

    @field_validator("proxy_tiers")
    @classmethod
    def _check_tiers(cls, value: list[ProxyTier]) -> list[ProxyTier]:
        return check_tiers(value)

    @model_validator(mode="after")
    def _one_way_to_identities(self) -> BaseConfig:
        # Cookies of a task's clients are saved to its identity: a client whose tiers
        # are other identities would mix their jars.
        if self.identity_pool is not None and any(t.identity_pool for t in self.proxy_tiers):
            raise ValueError(
                "identity_pool and proxy_tiers with identity pools exclude each other: a type "
                "leases one identity per task, or its tiers lease theirs"
            )
        return self

    @field_validator("group_rate")
    @classmethod
    def _check_group_rate(cls, value: str | None) -> str | None:
        # The canonical text ("5 / sec" -> "5/s"): what workers pass to reserve.
        return None if value is None else parse_rate(value).text

    def group_limits(self) -> tuple[int | None, str | None]:
        """The concurrency and rate of each of the type's groups (a crawler's are
        its ``per_host_*`` fields)."""
        return self.group_concurrency, self.group_rate


def slots_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid ``slots`` (a whole number from 0 to
    :data:`MAX_SLOTS`, or ``"auto"`` in any case), or None. The master applies it
    to a config it checks against a worker's published JSON schema too, whose
    answer for a misspelt ``"auto"`` would be "not of type 'integer'"."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SLOTS:
        return None
    return f'slots is a whole number from 0 to {MAX_SLOTS} or "auto", not {value!r}'


def slot_bounds_problem(data: dict[str, Any]) -> str | None:
    """Why ``min_slots``/``max_slots`` of a (merged) config do not go together, or
    None. The master applies it to a config it checks against a worker's published
    JSON schema, which cannot say it."""
    fields = BaseConfig.model_fields
    lo = data.get("min_slots", fields["min_slots"].default)
    hi = data.get("max_slots", fields["max_slots"].default)
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        return f"min_slots ({lo}) is above max_slots ({hi})"
    return None


def merge_config(*layers: dict[str, Any] | None) -> dict[str, Any]:
    """Merge config dicts, later layers winning key by key (one level deep).

    Nested dicts (such as ``proxy_provider_config``) are merged too, so a
    per-worker override can change one provider setting without restating all.
    A value of ``None`` in a later layer is kept: it means "set to None".
    """
    out: dict[str, Any] = {}
    for layer in layers:
        if not layer:
            continue
        for key, value in layer.items():
            old = out.get(key)
            if isinstance(old, dict) and isinstance(value, dict):
                out[key] = {**old, **value}
            else:
                out[key] = value
    return out


def missing_required_fields(model: type[BaseModel], data: dict[str, Any]) -> list[str]:
    """Names of the required fields of ``model`` that ``data`` does not set."""
    return [
        name
        for name, info in model.model_fields.items()
        if info.is_required() and name not in data and (info.alias or name) not in data
    ]


def validate_config(
    model: type[BaseConfig], data: dict[str, Any], *, automation_type: str | None = None
) -> BaseConfig:
    """Validate ``data`` into ``model`` or raise :class:`ConfigError` naming the field.

    Raises:
        ConfigError: With ``field`` set to the first offending field's dotted path.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise ConfigError(
            f"invalid config: {first['msg']}", automation_type=automation_type, field=field
        ) from exc
