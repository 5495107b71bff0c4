"""``@task``: an ``async def`` with typed parameters as a batch automation.

The parameters become the type's ``TaskPayload``, the return annotation its
``Output`` (the returned value is emitted once the function returns), the
decorator's keyword arguments its config defaults. The decorated object still
calls the function (``await fetch_title(url=...)`` in a unit test) and submits
it from any Python process (``await fetch_title.submit(url=...)``, or
``fetch_title.delay(url=...)`` in synchronous code); the handle it answers waits
for the result.

Where a submit goes is decided when it is made (:mod:`fleet.sending`): the master
at ``FLEET_MASTER_URL`` if that is set, else the backend at ``FLEET_BACKEND_URL``
(default ``sqlite:///./fleet.db``), unless :meth:`FunctionTask.options` names one.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, ParamSpec, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo

from fleet.core.automation import BatchAutomation, register
from fleet.core.config import BaseConfig
from fleet.core.context import Context
from fleet.core.contracts import Queue
from fleet.core.errors import (
    ContractTypeError,
    RegistrationError,
    ResultTimeout,
    TaskCancelledError,
    TaskFailed,
)
from fleet.core.schedule import Schedule
from fleet.core.submission import make_push_request
from fleet.core.targets import Ended, Target
from fleet.core.tasks import Task

Params = ParamSpec("Params")
R = TypeVar("R")

#: Keyword arguments of :meth:`FunctionTask.options` that shape the task itself
#: (the rest name where it goes).
TASK_OPTIONS = frozenset(
    {
        "task_id",
        "priority",
        "max_attempts",
        "ttl_seconds",
        "delay_seconds",
        "idempotency_key",
        "group",
        "timeout_seconds",
        "run",
        "unique_key",
    }
)
#: Keyword arguments of :meth:`FunctionTask.options` that choose the target.
TARGET_OPTIONS = frozenset({"backend", "master", "token"})
#: The field of the generated ``Output`` of a function that returns a plain value.
VALUE_FIELD = "value"


async def _open(target: dict[str, Any]) -> Target:
    # The one import of fleet.core outside itself, made at call time only: a submit
    # needs a backend or a client, which build on fleet.core (tests/core/test_house.py
    # names this exception; ``import fleet.core`` still loads nothing else).
    from fleet.sending import open_target

    return await open_target(target.get("backend"), target.get("master"), target.get("token"))


def type_name(function_name: str) -> str:
    """The default automation type of a function: ``fetch_title`` -> ``fetch-title``."""
    return re.sub(r"_+", "-", function_name.strip("_")) or function_name


class TaskHandle(Generic[R]):
    """A submitted function task: ``await handle.result(timeout=30)``.

    Attributes:
        task_id: The task's id.
        automation_type: Its type.
    """

    def __init__(self, owner: FunctionTask[..., R], task_id: str, target: dict[str, Any]) -> None:
        self._owner = owner
        self._target = target
        self.task_id = task_id
        self.automation_type = owner.name

    def __repr__(self) -> str:
        return f"<TaskHandle {self.automation_type} {self.task_id}>"

    async def result(self, timeout: float = 60.0) -> R:
        """Wait for the task to end and return what the function returned.

        Raises:
            TaskFailed: The task was dead-lettered (``last_error`` says why).
            TaskCancelledError: It was cancelled.
            ResultTimeout: It had not ended within ``timeout`` seconds (it goes on).
        """
        target = await _open(self._target)
        try:
            ended = await target.ended(self.automation_type, self.task_id, timeout)
        finally:
            await target.close()
        return self._owner.outcome(self.task_id, ended, timeout)


class SyncTaskHandle(Generic[R]):
    """:class:`TaskHandle` for synchronous code (what ``.delay()`` answers)."""

    def __init__(self, handle: TaskHandle[R]) -> None:
        self._handle = handle
        self.task_id = handle.task_id
        self.automation_type = handle.automation_type

    def __repr__(self) -> str:
        return f"<SyncTaskHandle {self.automation_type} {self.task_id}>"

    def result(self, timeout: float = 60.0) -> R:
        """Block until the task ended; as :meth:`TaskHandle.result`."""
        return _run_sync(self._handle.result(timeout), "result")


def _run_sync(coro: Awaitable[R], what: str) -> R:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(coro))
    close = getattr(coro, "close", None)
    if close is not None:
        close()  # never awaited: no "coroutine was never awaited" warning
    raise RuntimeError(
        f".{'delay' if what == 'submit' else 'result'}() blocks, and this code runs in an "
        "event loop: use `await task.submit(...)` and `await handle.result()` here"
    )


async def _await(coro: Awaitable[R]) -> R:
    return await coro


@dataclass(frozen=True)
class _Bound(Generic[Params, R]):
    """A function task with submit options fixed (:meth:`FunctionTask.options`)."""

    owner: FunctionTask[Params, R]
    task_options: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] = field(default_factory=dict)

    async def submit(self, *args: Params.args, **kwargs: Params.kwargs) -> TaskHandle[R]:
        """Queue one task with these options; see :meth:`FunctionTask.submit`."""
        payload = self.owner.payload(*args, **kwargs).model_dump(mode="json")
        make_push_request(payload, **self.task_options)  # options checked before any I/O
        target = await _open(self.target)
        try:
            task_id = await target.push(self.owner.name, payload, self.task_options)
        finally:
            await target.close()
        return TaskHandle(self.owner, task_id, self.target)

    def delay(self, *args: Params.args, **kwargs: Params.kwargs) -> SyncTaskHandle[R]:
        """:meth:`submit` for synchronous code."""
        return SyncTaskHandle(_run_sync(self.submit(*args, **kwargs), "submit"))


class FunctionTask(Generic[Params, R]):
    """What ``@task`` makes of a function: still callable, and a batch automation.

    Attributes:
        name: The automation type.
        automation: The registered ``BatchAutomation`` class that runs it.
        Payload: The ``TaskPayload`` model built from the parameters.
        Output: The ``Output`` model (None when the function returns nothing).
        queue: The type's ``Queue`` reference (for ``ctx.submit`` from another task).
    """

    def __init__(
        self,
        fn: Callable[Params, Awaitable[R]],
        name: str,
        payload: type[BaseModel],
        output: type[BaseModel] | None,
        wraps_value: bool,
        ctx_param: str | None,
        automation: type[BatchAutomation[Any]],
    ) -> None:
        self.fn = fn
        self.name = name
        self.Payload = payload
        self.Output = output
        self._wraps_value = wraps_value
        self._ctx_param = ctx_param
        self.automation = automation
        self.queue: Queue[Any] = Queue(name, payload=payload)
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)
        self.__qualname__ = getattr(fn, "__qualname__", name)
        self.__module__ = fn.__module__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<function task {self.name!r} of {self.__module__}.{self.__qualname__}>"

    async def __call__(self, *args: Params.args, **kwargs: Params.kwargs) -> R:
        """Run the function here, as written (no queue, no worker)."""
        return await self.fn(*args, **kwargs)

    def payload(self, *args: Any, **kwargs: Any) -> BaseModel:
        """The ``TaskPayload`` of these arguments (as the function would bind them).

        Raises:
            ContractTypeError: (a ``TypeError``) the arguments do not bind or do
                not validate: names the parameter.
        """
        fields = self.Payload.model_fields
        names = list(fields)
        if len(args) > len(names):
            raise ContractTypeError(
                f"{self.name}: takes {len(names)} task argument(s), {len(args)} given",
                automation_type=self.name,
            )
        values = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key not in fields:
                hint = " (ctx is given by the worker)" if key == self._ctx_param else ""
                raise ContractTypeError(
                    f"{self.name}: unexpected argument {key!r}{hint}; its parameters: "
                    f"{', '.join(names) or 'none'}",
                    automation_type=self.name,
                    field=key,
                )
            if key in values:
                raise ContractTypeError(
                    f"{self.name}: argument {key!r} given twice", automation_type=self.name
                )
            values[key] = value
        try:
            return self.Payload.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or None
            raise ContractTypeError(
                f"{self.name}: {where}: {first['msg']}", automation_type=self.name, field=where
            ) from exc

    def options(self, **options: Any) -> _Bound[Params, R]:
        """This task with submit options set: ``priority``, ``delay_seconds``,
        ``ttl_seconds``, ``max_attempts``, ``timeout_seconds``, ``group``,
        ``idempotency_key``, ``task_id``, ``run``, ``unique_key``; and where it
        goes: ``backend`` (a URL), or ``master`` (a URL) with ``token``.

        ``await fetch_title.options(priority=5).submit(url=...)``

        Raises:
            ContractTypeError: An option Fleet does not know.
        """
        unknown = set(options) - TASK_OPTIONS - TARGET_OPTIONS
        if unknown:
            raise ContractTypeError(
                f"{self.name}: unknown submit option(s) {', '.join(sorted(unknown))}; known: "
                f"{', '.join(sorted(TASK_OPTIONS | TARGET_OPTIONS))}",
                automation_type=self.name,
            )
        if options.get("backend") is not None and options.get("master") is not None:
            raise ContractTypeError(
                f"{self.name}: name a backend or a master, not both", automation_type=self.name
            )
        return _Bound(
            self,
            {k: v for k, v in options.items() if k in TASK_OPTIONS and v is not None},
            {k: v for k, v in options.items() if k in TARGET_OPTIONS and v is not None},
        )

    async def submit(self, *args: Params.args, **kwargs: Params.kwargs) -> TaskHandle[R]:
        """Queue one task with these arguments; the handle waits for its result.

        The arguments are validated here (a bad one raises before anything is
        queued); submit options go through :meth:`options`.

        Raises:
            ContractTypeError: The arguments do not fit the parameters.
            BackendUnavailable: The backend cannot be reached.
            ClientError: The master refused the submit or cannot be reached.
        """
        return await _Bound(self).submit(*args, **kwargs)

    def delay(self, *args: Params.args, **kwargs: Params.kwargs) -> SyncTaskHandle[R]:
        """:meth:`submit` for synchronous code (not from inside an event loop)."""
        return _Bound(self).delay(*args, **kwargs)

    async def run(self, task: Task[Any], ctx: Context[Any]) -> None:
        """What a worker's slot runs: the function with the task's arguments; its
        return value emitted as the type's ``Output``."""
        payload = task.payload
        kwargs = {name: getattr(payload, name) for name in type(payload).model_fields}
        if self._ctx_param is not None:
            kwargs[self._ctx_param] = ctx
        value = await self.fn(**kwargs)  # type: ignore[call-arg]
        if self.Output is None:
            return
        if self._wraps_value:
            await ctx.emit(self.Output.model_validate({VALUE_FIELD: value}))
        elif isinstance(value, self.Output):
            await ctx.emit(value)
        else:
            await ctx.emit(self.Output.model_validate(value))

    def outcome(self, task_id: str, ended: Ended, waited: float) -> R:
        """What :meth:`TaskHandle.result` answers for ``ended``, or raises."""
        where = {"automation_type": self.name, "task_id": task_id}
        if ended.state == "dead":
            raise TaskFailed(f"the task failed: {ended.last_error or 'no error kept'}", **where)
        if ended.state == "cancelled":
            raise TaskCancelledError("the task was cancelled", **where)
        if ended.state == "unknown":
            raise TaskFailed(
                "no record of the task (never submitted here, or its record expired)", **where
            )
        if ended.state != "done":
            raise ResultTimeout(
                f"the task had not ended after {waited:g} s (it is {ended.state})", **where
            )
        if self.Output is None:
            return None  # type: ignore[return-value]
        if not ended.outputs:
            raise TaskFailed("the task ended done but its output is not kept", **where)
        last = ended.outputs[-1]
        if last.get("truncated"):
            raise TaskFailed(
                f"the result ({last.get('bytes')} bytes) is larger than a task's record "
                f"keeps; read it from the output stream (entry {last.get('id')})",
                **where,
            )
        model = self.Output.model_validate(last.get("payload"))
        answer: Any = getattr(model, VALUE_FIELD) if self._wraps_value else model
        return answer  # type: ignore[no-any-return]


def _ctx_param(fn: Callable[..., Any], hints: dict[str, Any]) -> str | None:
    for name in inspect.signature(fn).parameters:
        hint = hints.get(name)
        origin = typing.get_origin(hint) or hint
        if name == "ctx" or (isinstance(origin, type) and issubclass(origin, Context)):
            return name
    return None


def _payload_model(
    fn: Callable[..., Any], name: str, hints: dict[str, Any], ctx_param: str | None
) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.name == ctx_param:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise RegistrationError(
                f"@task {fn.__qualname__}: *args and **kwargs cannot be a task's payload; "
                "name each parameter",
                automation_type=name,
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise RegistrationError(
                f"@task {fn.__qualname__}: positional-only parameter {param.name!r}; a task's "
                "arguments travel by name",
                automation_type=name,
            )
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    model_name = _camel(fn.__name__) + "Payload"
    return create_model(
        model_name, __config__=ConfigDict(extra="forbid"), __module__=fn.__module__, **fields
    )


def _output_model(
    fn: Callable[..., Any], hints: dict[str, Any]
) -> tuple[type[BaseModel] | None, bool]:
    returns = hints.get("return", None)
    if returns is None or returns is type(None):
        return None, False
    if isinstance(returns, type) and issubclass(returns, BaseModel):
        return returns, False
    fields: dict[str, Any] = {VALUE_FIELD: (returns, ...)}
    model = create_model(_camel(fn.__name__) + "Output", __module__=fn.__module__, **fields)
    return model, True


def _config_model(fn: Callable[..., Any], name: str, defaults: dict[str, Any]) -> type[BaseConfig]:
    if not defaults:
        return BaseConfig
    known = BaseConfig.model_fields
    unknown = sorted(set(defaults) - set(known))
    if unknown:
        raise RegistrationError(
            f"@task {fn.__qualname__}: unknown config field(s) {', '.join(unknown)}; the "
            f"config has: {', '.join(known)}",
            automation_type=name,
        )
    try:
        BaseConfig.model_validate(defaults)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RegistrationError(
            f"@task {fn.__qualname__}: {'.'.join(map(str, first['loc']))}: {first['msg']}",
            automation_type=name,
            field=".".join(map(str, first["loc"])),
        ) from exc
    fields = {
        key: (known[key].annotation, _with_default(known[key], value))
        for key, value in defaults.items()
    }
    return create_model(  # type: ignore[call-overload,no-any-return]
        _camel(fn.__name__) + "Config", __base__=BaseConfig, __module__=fn.__module__, **fields
    )


def _with_default(info: FieldInfo, value: Any) -> FieldInfo:
    # The field's constraints (ge, le, gt) stay; only its default changes.
    merged = FieldInfo.merge_field_infos(info, default=value)
    merged.default_factory = None
    return merged


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or "Task"


def _build(
    fn: Callable[Params, Awaitable[R]],
    name: str | None,
    schedules: list[Schedule] | None,
    config: dict[str, Any],
) -> FunctionTask[Params, R]:
    if not inspect.iscoroutinefunction(fn):
        raise RegistrationError(
            f"@task needs an `async def` function, got {getattr(fn, '__qualname__', fn)!r}"
        )
    automation_type = name or type_name(fn.__name__)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # an annotation that names something not importable
        raise RegistrationError(
            f"@task {fn.__qualname__}: cannot read its annotations: {exc}",
            automation_type=automation_type,
        ) from exc
    ctx_param = _ctx_param(fn, hints)
    payload = _payload_model(fn, automation_type, hints, ctx_param)
    output, wraps_value = _output_model(fn, hints)
    config_model = _config_model(fn, automation_type, config)
    holder: list[FunctionTask[Params, R]] = []

    class FunctionAutomation(BatchAutomation[Any]):
        Config = config_model
        TaskPayload: ClassVar[type[BaseModel]] = payload
        Output: ClassVar[type[BaseModel] | None] = output
        Schedules: ClassVar[list[Schedule]] = list(schedules or [])

        async def run_one(self, task: Task[Any], ctx: Context[Any]) -> None:
            await holder[0].run(task, ctx)

    # The plugin loader finds the class by its module (``--plugin mod``), and a module
    # imported twice registers the same (module, name) again rather than a clash.
    FunctionAutomation.__module__ = fn.__module__
    FunctionAutomation.__qualname__ = f"{fn.__qualname__}.automation"
    FunctionAutomation.__name__ = _camel(fn.__name__)
    FunctionAutomation.__doc__ = fn.__doc__
    register(automation_type)(FunctionAutomation)
    made = FunctionTask(
        fn, automation_type, payload, output, wraps_value, ctx_param, FunctionAutomation
    )
    holder.append(made)
    return made


@typing.overload
def task(fn: Callable[Params, Awaitable[R]], /) -> FunctionTask[Params, R]: ...


@typing.overload
def task(
    *,
    name: str | None = None,
    schedules: list[Schedule] | None = None,
    **config: Any,
) -> Callable[[Callable[Params, Awaitable[R]]], FunctionTask[Params, R]]: ...


def task(
    fn: Callable[Params, Awaitable[R]] | None = None,
    /,
    *,
    name: str | None = None,
    schedules: list[Schedule] | None = None,
    **config: Any,
) -> Any:
    """Make an ``async def`` a batch automation (``@task`` or ``@task(slots=4, ...)``).

    Args:
        fn: The function; its parameters (all but ``ctx``, which the worker passes
            when the function names it) are the task's payload, its return
            annotation the type's output.
        name: The automation type (default: the function's name, ``_`` as ``-``).
        schedules: Periodic tasks of the type (``Schedule`` list).
        **config: Defaults of the type's config: ``slots``, ``max_attempts``,
            ``timeout_seconds``, ``visibility_seconds``, ``group_concurrency``,
            ``group_rate``, ``proxy_url``... (the fields of ``BaseConfig``).

    Raises:
        RegistrationError: (a ``TypeError``) not an ``async def``, ``*args``, an
            unknown config field or value, or the name is taken by another type.
    """
    if fn is not None:
        return _build(fn, name, schedules, config)

    def decorate(inner: Callable[Params, Awaitable[R]]) -> FunctionTask[Params, R]:
        return _build(inner, name, schedules, config)

    return decorate
