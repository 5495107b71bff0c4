"""Config decisions of docs/protocol.md as pure functions: which generation to
apply, when to write back, and whether a desired config can run at all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from fleet.core.config import BaseConfig, missing_required_fields

ConfigAction = Literal["apply", "ignore", "write_back", "initialize"]


def config_action(held_gen: int, stored: dict[str, object] | None, stored_gen: int) -> ConfigAction:
    """What to do with the desired config read from the backend.

    Args:
        held_gen: Generation of the config this worker applied (0: none yet).
        stored: The stored desired config (None if the backend has none).
        stored_gen: Its generation (0 if none).

    Returns:
        ``initialize`` when the backend has nothing and neither do we (merge and
        write a first generation); ``apply`` when the stored gen is higher;
        ``write_back`` when it is lower (the backend lost data: write ours back);
        ``ignore`` when it is the one we hold.
    """
    if stored is None or stored_gen <= 0:
        return "initialize" if held_gen <= 0 else "write_back"
    if stored_gen > held_gen:
        return "apply"
    if stored_gen < held_gen:
        return "write_back"
    return "ignore"


@dataclass(frozen=True, slots=True)
class CheckedConfig:
    """A desired config after validation.

    Attributes:
        config: The validated config, or None when it does not validate.
        error: Why it does not validate (names the missing fields), else None.
        missing: Required fields without a value.
    """

    config: BaseConfig | None
    error: str | None = None
    missing: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.config is not None


def check_config(model: type[BaseConfig], data: dict[str, object]) -> CheckedConfig:
    """Validate a merged desired config against the automation's ``Config``.

    Args:
        model: The automation's ``Config`` class.
        data: The merged (type-wide + override) partial config.

    Returns:
        The validated config, or an error text: ``missing required config field(s):
        a, b`` when required fields lack values, else the first validation error
        with its dotted field path.
    """
    missing = tuple(missing_required_fields(model, dict(data)))
    if missing:
        return CheckedConfig(
            None, f"missing required config field(s): {', '.join(missing)}", missing
        )
    try:
        return CheckedConfig(model.model_validate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        return CheckedConfig(None, f"invalid config field {where}: {first['msg']}")


#: Config fields whose change requires rebuilding the slots' proxy handles.
PROXY_FIELDS = (
    "proxy_url",
    "proxy_provider",
    "proxy_provider_config",
    "proxy_bad_threshold",
    "proxy_cooldown_seconds",
    "proxy_max_concurrency",
)


def proxy_changed(old: BaseConfig | None, new: BaseConfig) -> bool:
    """True if ``new`` sets a different proxy than ``old``."""
    if old is None:
        return False
    return any(getattr(old, f) != getattr(new, f) for f in PROXY_FIELDS)
