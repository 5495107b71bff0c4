"""Typed references: ``Pool[P, T]``, ``Queue[P]`` and ``Stream[P]``.

A reference is a wire name plus the pydantic model(s) of what travels under it.
Declare it once (typically in a ``-contracts`` package) and import it wherever it
is used; the framework validates payloads against it at every boundary.
"""

from __future__ import annotations

import re
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from fleet.core.errors import ContractTypeError, ContractValueError

P = TypeVar("P", bound=BaseModel)
T = TypeVar("T", bound=BaseModel)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


def check_name(name: object, what: str) -> str:
    """Validate a wire name (automation type, pool, stream): no separators, <= 128 chars.

    Raises:
        ContractValueError: If the name is empty or has characters Redis keys split on.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ContractValueError(
            f"{what} name must be 1-128 characters of letters, digits, '_', '-' or '.', "
            f"starting with a letter or digit; got {name!r}",
            field="name",
        )
    return name


def _check_model(model: object, what: str) -> None:
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ContractTypeError(f"{what} must be a pydantic BaseModel subclass, got {model!r}")


def ensure_instance(value: object, model: type[BaseModel], what: str) -> None:
    """Raise ``TypeError`` (as :class:`ContractTypeError`) unless ``value`` is a ``model``."""
    if not isinstance(value, model):
        raise ContractTypeError(
            f"{what} must be an instance of {model.__module__}.{model.__qualname__}, "
            f"got {type(value).__module__}.{type(value).__qualname__}"
        )


class Pool(Generic[P, T]):
    """A shared bag of typed items: payload model ``P``, tag model ``T``.

    Args:
        name: The pool's wire name (``fleet:pool:<name>``).
        payload: The payload model.
        tags: The tag model (the queryable slice; exact-match filters).
    """

    def __init__(self, name: str, *, payload: type[P], tags: type[T]) -> None:
        self.name = check_name(name, "pool")
        _check_model(payload, "Pool payload")
        _check_model(tags, "Pool tags")
        self.payload = payload
        self.tags = tags

    def check_where(self, where: dict[str, Any]) -> None:
        """Raise ``ValueError`` if a filter names a field the tag model does not have."""
        unknown = sorted(set(where) - set(self.tags.model_fields))
        if unknown:
            raise ContractValueError(
                f"pool {self.name!r}: unknown tag field(s) {', '.join(unknown)}; "
                f"tags are {', '.join(self.tags.model_fields) or 'none'}",
                field=unknown[0],
            )

    def __repr__(self) -> str:
        return f"Pool[{self.payload.__name__}, {self.tags.__name__}]({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pool) and (self.name, self.payload, self.tags) == (
            other.name,
            other.payload,
            other.tags,
        )

    def __hash__(self) -> int:
        return hash(("pool", self.name))


class Queue(Generic[P]):
    """The task queue of a ``BatchAutomation``: its type name and ``TaskPayload`` model.

    Args:
        name: The receiving automation's type (``fleet:queue:<name>``).
        payload: The task payload model.
    """

    def __init__(self, name: str, *, payload: type[P]) -> None:
        self.name = check_name(name, "queue")
        _check_model(payload, "Queue payload")
        self.payload = payload

    def __repr__(self) -> str:
        return f"Queue[{self.payload.__name__}]({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Queue) and (self.name, self.payload) == (
            other.name,
            other.payload,
        )

    def __hash__(self) -> int:
        return hash(("queue", self.name))


class Stream(Generic[P]):
    """The output stream of an automation: its type name and ``Output`` model.

    Args:
        name: The producing automation's type (``stream:<name>``).
        payload: The output model.
    """

    def __init__(self, name: str, *, payload: type[P]) -> None:
        self.name = check_name(name, "stream")
        _check_model(payload, "Stream payload")
        self.payload = payload

    def __repr__(self) -> str:
        return f"Stream[{self.payload.__name__}]({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and (self.name, self.payload) == (
            other.name,
            other.payload,
        )

    def __hash__(self) -> int:
        return hash(("stream", self.name))
