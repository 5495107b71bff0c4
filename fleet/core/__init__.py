"""What plugins import: automation bases, contracts, the context and errors."""

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
    SchemaVersionError,
    StaleLease,
    TaskTimeout,
    Throttled,
    UnknownAutomation,
    UnsupportedBackend,
)
from fleet.core.schedule import Schedule
from fleet.core.task import Task

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
    "PayloadValidationError",
    "PluginLoadError",
    "Pool",
    "Queue",
    "RegistrationError",
    "Schedule",
    "SchemaVersionError",
    "StaleLease",
    "Stream",
    "Task",
    "TaskTimeout",
    "Throttled",
    "UnknownAutomation",
    "UnsupportedBackend",
    "register",
]
