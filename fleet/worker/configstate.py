"""Config decisions of docs/protocol.md as pure functions: which generation to
apply, when to write back, and whether a desired config can run at all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from fleet.core.config import BaseConfig, missing_required_fields

ConfigAction = Literal["apply", "ignore", "initialize"]


def config_action(held_gen: int, book_gen: int) -> ConfigAction:
    """What to do with the configs stored for this worker.

    Args:
        held_gen: Generation of the config this worker applied (0: none yet).
        book_gen: Generation of its stored layers: the newer of the type-wide
            config's and its override's (0: never set through a PATCH).

    Returns:
        ``apply`` when the stored layers are newer than what the worker holds
        (merge them, write the result as its desired config, apply it);
        ``initialize`` when neither side has anything (merge what is stored, or
        nothing, under a first generation); ``ignore`` otherwise. A backend that
        lost the worker's own desired config is healed by the heartbeat, which
        compares that one with what the worker holds.
    """
    if book_gen > held_gen:
        return "apply"
    return "initialize" if held_gen <= 0 else "ignore"


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
