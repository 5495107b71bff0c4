"""The automation base classes and ``register``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from fleet.core.browser import BrowserNeeds
from fleet.core.config import BaseConfig
from fleet.core.contracts import Pool, check_name
from fleet.core.errors import ContractValueError, RegistrationError
from fleet.core.schedule import Schedule, check_schedule_id

if TYPE_CHECKING:
    from fleet.core.context import Context
    from fleet.core.tasks import Task

ConfigT = TypeVar("ConfigT", bound=BaseConfig)

#: Every registered automation class by type name (filled by :func:`register`).
_REGISTRY: dict[str, type[Automation[Any]]] = {}


class Automation(Generic[ConfigT]):
    """What both automation kinds share: declarations and the cleanup hook.

    Class attributes a plugin may set:
        Config: The pydantic config model (a ``BaseConfig`` subclass).
        Output: The model of what ``ctx.emit`` accepts (None: the type emits nothing).
        Pools: Pools this automation owns, by local name.
        Browser: A ``BrowserNeeds`` declaration, or None.
    """

    automation_type: ClassVar[str] = ""
    kind: ClassVar[str] = "Automation"
    Config: type[ConfigT]
    Output: ClassVar[type[BaseModel] | None] = None
    Pools: ClassVar[dict[str, Pool[Any, Any]]] = {}
    Browser: ClassVar[BrowserNeeds | None] = None

    async def cleanup(self, ctx: Context[ConfigT]) -> None:
        """Runs after every ``run_one``/``run_slot``, whether it returned or raised."""


class ContinuousAutomation(Automation[ConfigT]):
    """An automation whose slots each run one long loop (``run_slot``)."""

    kind: ClassVar[str] = "ContinuousAutomation"

    async def run_slot(self, ctx: Context[ConfigT]) -> None:
        """The slot's loop; typically runs until ``ctx.shutdown`` is set."""
        raise NotImplementedError(f"{type(self).__name__} must implement run_slot")


class BatchAutomation(Automation[ConfigT]):
    """An automation fed discrete tasks from its queue (``run_one`` per task).

    ``TaskPayload`` (a pydantic model) is required: a class that defines
    ``run_one`` without it is rejected with ``TypeError`` when it is created.
    ``Schedules`` (a list of :class:`~fleet.core.schedule.Schedule`) declares
    periodic tasks, written to the backend when a worker or master with the plugin
    starts.
    """

    kind: ClassVar[str] = "BatchAutomation"
    TaskPayload: ClassVar[type[BaseModel]]
    Schedules: ClassVar[list[Schedule]] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "run_one" in cls.__dict__:
            _check_task_payload(cls)

    async def run_one(self, task: Task[Any], ctx: Context[ConfigT]) -> None:
        """Handle one task. Raise to have it retried (then dead-lettered)."""
        raise NotImplementedError(f"{type(self).__name__} must implement run_one")


def _check_task_payload(cls: type[Any]) -> None:
    payload = getattr(cls, "TaskPayload", None)
    if payload is None:
        raise RegistrationError(
            f"{cls.__qualname__} is a BatchAutomation without TaskPayload; declare "
            "`TaskPayload = SomeModel` so task payloads can be validated"
        )
    if not (isinstance(payload, type) and issubclass(payload, BaseModel)):
        raise RegistrationError(
            f"{cls.__qualname__}.TaskPayload must be a pydantic BaseModel subclass, got {payload!r}"
        )


def _check_schedules(cls: type[Any], name: str) -> None:
    schedules = getattr(cls, "Schedules", None) or []
    if not isinstance(schedules, list | tuple) or not all(
        isinstance(s, Schedule) for s in schedules
    ):
        raise RegistrationError(
            f"{cls.__qualname__}.Schedules must be a list of Schedule", automation_type=name
        )
    seen: set[str] = set()
    for s in schedules:
        if s.id in seen:
            raise RegistrationError(
                f"{cls.__qualname__}.Schedules declares {s.id!r} twice", automation_type=name
            )
        seen.add(s.id)
        payload = s.payload
        if isinstance(payload, BaseModel) and not isinstance(payload, cls.TaskPayload):
            raise RegistrationError(
                f"schedule {s.id!r}: payload is a {type(payload).__name__}, not the "
                f"{cls.TaskPayload.__name__} of {cls.__qualname__}",
                automation_type=name,
            )
        try:
            check_schedule_id(s.id)
            s.definition()
            cls.TaskPayload.model_validate(s.definition()["payload"])
        except (ContractValueError, ValidationError) as exc:
            raise RegistrationError(f"schedule {s.id!r}: {exc}", automation_type=name) from exc


def _check_declarations(cls: type[Any]) -> None:
    config = getattr(cls, "Config", None)
    if config is None:
        cls.Config = BaseConfig
    elif not (isinstance(config, type) and issubclass(config, BaseConfig)):
        raise RegistrationError(
            f"{cls.__qualname__}.Config must be a BaseConfig subclass, got {config!r}"
        )
    output = getattr(cls, "Output", None)
    if output is not None and not (isinstance(output, type) and issubclass(output, BaseModel)):
        raise RegistrationError(
            f"{cls.__qualname__}.Output must be a pydantic BaseModel subclass, got {output!r}"
        )
    pools = getattr(cls, "Pools", {})
    if not isinstance(pools, dict) or not all(isinstance(p, Pool) for p in pools.values()):
        raise RegistrationError(f"{cls.__qualname__}.Pools must be a dict of Pool references")
    browser = getattr(cls, "Browser", None)
    if browser is not None and not isinstance(browser, BrowserNeeds):
        raise RegistrationError(f"{cls.__qualname__}.Browser must be a BrowserNeeds")


AutomationClass = TypeVar("AutomationClass", bound=type[Automation[Any]])


def register(name: str) -> Any:
    """Class decorator: name an automation and add it to the registry.

    Args:
        name: The automation type (queue, stream and config are keyed by it).

    Returns:
        A decorator returning the class unchanged but for ``automation_type``.

    Raises:
        RegistrationError: (a ``TypeError``) if the class is not an automation, a
            ``BatchAutomation`` lacks ``TaskPayload``, or ``name`` is already taken
            by a different class.
    """
    check_name(name, "automation")

    def decorate(cls: AutomationClass) -> AutomationClass:
        if not (isinstance(cls, type) and issubclass(cls, (BatchAutomation, ContinuousAutomation))):
            raise RegistrationError(
                f"@register({name!r}) needs a BatchAutomation or ContinuousAutomation subclass",
                automation_type=name,
            )
        if issubclass(cls, BatchAutomation):
            _check_task_payload(cls)
            _check_schedules(cls, name)
        elif getattr(cls, "Schedules", None):
            raise RegistrationError(
                f"{cls.__qualname__}: only a BatchAutomation has tasks to schedule",
                automation_type=name,
            )
        _check_declarations(cls)
        existing = _REGISTRY.get(name)
        if existing is not None and not _same_class(existing, cls):
            raise RegistrationError(
                f"automation type {name!r} is already registered by "
                f"{existing.__module__}.{existing.__qualname__}",
                automation_type=name,
            )
        cls.automation_type = name
        _REGISTRY[name] = cls
        return cls

    return decorate


def _same_class(a: type[Any], b: type[Any]) -> bool:
    # A module imported twice (e.g. by path and by package) re-creates the class;
    # that is the same automation, not a clash.
    return a is b or (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def registered() -> dict[str, type[Automation[Any]]]:
    """A copy of the registry: automation type -> class."""
    return dict(_REGISTRY)


def get_automation(name: str) -> type[Automation[Any]] | None:
    """The class registered under ``name``, or None."""
    return _REGISTRY.get(name)


def unregister(name: str) -> None:
    """Remove a type from the registry (for tests and plugin reloads)."""
    _REGISTRY.pop(name, None)
