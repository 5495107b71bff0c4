"""What plugins import: automation bases, contracts, the context and errors.

The names load on first use (PEP 562), so a process that imports only a submodule
(``fleet.core.logs`` for the CLI, ``fleet.core.errors``) does not pay for the
automation bases, the context and pydantic: ``fleet --help`` and the REST client
commands start in half the time. ``from fleet.core import X`` works as before.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet.core.automation import BatchAutomation, ContinuousAutomation, register
    from fleet.core.config import BaseConfig
    from fleet.core.context import Context
    from fleet.core.contracts import Pool, Queue, Stream
    from fleet.core.errors import (
        BackendError,
        BackendUnavailable,
        BrowserUnavailable,
        ConfigError,
        ContractTypeError,
        ContractValueError,
        FleetError,
        PayloadValidationError,
        PluginLoadError,
        RegistrationError,
        ResultTimeout,
        SchemaVersionError,
        StaleLease,
        TaskCancelledError,
        TaskFailed,
        TaskTimeout,
        Throttled,
        UnknownAutomation,
        UnsupportedBackend,
    )
    from fleet.core.functions import FunctionTask, task
    from fleet.core.schedule import Schedule
    from fleet.core.tasks import Task

#: Each public name and the module that defines it.
_HOMES = {
    "BackendError": "fleet.core.errors",
    "BackendUnavailable": "fleet.core.errors",
    "BaseConfig": "fleet.core.config",
    "BatchAutomation": "fleet.core.automation",
    "BrowserUnavailable": "fleet.core.errors",
    "ConfigError": "fleet.core.errors",
    "Context": "fleet.core.context",
    "ContinuousAutomation": "fleet.core.automation",
    "ContractTypeError": "fleet.core.errors",
    "ContractValueError": "fleet.core.errors",
    "FleetError": "fleet.core.errors",
    "FunctionTask": "fleet.core.functions",
    "PayloadValidationError": "fleet.core.errors",
    "PluginLoadError": "fleet.core.errors",
    "Pool": "fleet.core.contracts",
    "Queue": "fleet.core.contracts",
    "RegistrationError": "fleet.core.errors",
    "ResultTimeout": "fleet.core.errors",
    "Schedule": "fleet.core.schedule",
    "SchemaVersionError": "fleet.core.errors",
    "StaleLease": "fleet.core.errors",
    "Stream": "fleet.core.contracts",
    "Task": "fleet.core.tasks",
    "TaskCancelledError": "fleet.core.errors",
    "TaskFailed": "fleet.core.errors",
    "TaskTimeout": "fleet.core.errors",
    "Throttled": "fleet.core.errors",
    "UnknownAutomation": "fleet.core.errors",
    "UnsupportedBackend": "fleet.core.errors",
    "register": "fleet.core.automation",
    "task": "fleet.core.functions",
}

__all__ = [
    "BackendError",
    "BackendUnavailable",
    "BaseConfig",
    "BatchAutomation",
    "BrowserUnavailable",
    "ConfigError",
    "Context",
    "ContinuousAutomation",
    "ContractTypeError",
    "ContractValueError",
    "FleetError",
    "FunctionTask",
    "PayloadValidationError",
    "PluginLoadError",
    "Pool",
    "Queue",
    "RegistrationError",
    "ResultTimeout",
    "Schedule",
    "SchemaVersionError",
    "StaleLease",
    "Stream",
    "Task",
    "TaskCancelledError",
    "TaskFailed",
    "TaskTimeout",
    "Throttled",
    "UnknownAutomation",
    "UnsupportedBackend",
    "register",
    "task",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'fleet.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
