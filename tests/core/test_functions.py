"""``@task``: what a function becomes (payload, output, config), how it runs in a
worker, and how ``.submit()``/``.delay()`` and ``handle.result()`` behave against a
real SQLite file and a real master process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import (
    BatchAutomation,
    ContractTypeError,
    FunctionTask,
    RegistrationError,
    ResultTimeout,
    TaskCancelledError,
    TaskFailed,
    task,
)
from fleet.core.automation import get_automation, unregister
from fleet.core.functions import type_name
from tests.plugins_fixture.functions import (
    Title,
    fetch_title,
    ft_quiet,
    ft_shout,
    ft_slow,
    ft_with_ctx,
)
from tests.support.master_proc import MASTER_TOKEN, MasterProcess
from tests.worker.support import running_worker

ALL = [ft_shout, fetch_title, ft_quiet, ft_with_ctx, ft_slow]


# ---------------------------------------------------------------- what it becomes


def test_the_parameters_are_the_payload() -> None:
    model = ft_shout.Payload
    assert list(model.model_fields) == ["word", "times"]
    assert model.model_fields["times"].default == 2
    assert model.model_fields["word"].is_required()
    assert ft_shout.payload("hi").model_dump() == {"word": "hi", "times": 2}
    assert ft_shout.payload(word="hi", times=3).model_dump() == {"word": "hi", "times": 3}
    # ctx is the worker's to give, not a field of the payload
    assert list(ft_with_ctx.Payload.model_fields) == ["label"]


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        ((), {}, "word"),
        ((), {"word": "x", "times": "many"}, "times"),
        ((), {"word": "x", "colour": "red"}, "unexpected argument 'colour'"),
        (("a", 2, 3), {}, r"takes 2 task argument\(s\), 3 given"),
        (("a",), {"word": "b"}, "given twice"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_queued(
    args: tuple[Any, ...], kwargs: dict[str, Any], says: str
) -> None:
    with pytest.raises(ContractTypeError, match=says):
        ft_shout.payload(*args, **kwargs)


def test_ctx_given_by_the_caller_is_named_as_the_workers() -> None:
    with pytest.raises(ContractTypeError, match="ctx is given by the worker"):
        ft_with_ctx.payload(label="a", ctx=None)


def test_the_return_annotation_is_the_output() -> None:
    assert ft_shout.Output is not None
    assert list(ft_shout.Output.model_fields) == ["value"]
    assert fetch_title.Output is Title
    assert ft_quiet.Output is None
    assert ft_quiet.automation.Output is None


def test_the_decorator_arguments_are_config_defaults() -> None:
    config = ft_shout.automation.Config
    assert config().slots == 3
    assert config().max_attempts == 2
    # the base config's limits still hold for a value set later
    with pytest.raises(ValueError):
        config.model_validate({"slots": -1})
    assert ft_quiet.automation.Config().slots == 1


def test_names_and_registration() -> None:
    assert type_name("fetch_title") == "fetch-title"
    assert type_name("_private__thing_") == "private-thing"
    assert ft_shout.name == "ft-shout"
    assert fetch_title.name == "ft-title"
    cls = get_automation("ft-shout")
    assert cls is ft_shout.automation and issubclass(cls, BatchAutomation)
    assert cls.__module__ == "tests.plugins_fixture.functions"
    assert isinstance(ft_shout, FunctionTask)
    assert ft_shout.queue.name == "ft-shout" and ft_shout.queue.payload is ft_shout.Payload
    assert ft_shout.__doc__ == "Say it louder."


def test_what_cannot_be_a_task_is_refused_at_definition() -> None:
    def plain(x: int) -> int:
        return x

    with pytest.raises(RegistrationError, match="async def"):
        task(plain)  # type: ignore[arg-type]

    async def star(*urls: str) -> None:
        del urls

    with pytest.raises(RegistrationError, match=r"\*args"):
        task(star)

    async def fine(x: int) -> None:
        del x

    with pytest.raises(RegistrationError, match=r"unknown config field.*sluts"):
        task(sluts=4)(fine)
    with pytest.raises(RegistrationError, match="slots"):
        task(slots=-2)(fine)
    with pytest.raises(RegistrationError, match="already registered"):
        task(name="ft-shout")(fine)
    assert get_automation("fine") is None


def test_a_second_decorated_function_of_the_same_name_in_another_module_clashes() -> None:
    async def ft_shout_again(word: str) -> str:
        return word

    try:
        made = task(name="ft-unique-once")(ft_shout_again)
        assert get_automation("ft-unique-once") is made.automation
    finally:
        unregister("ft-unique-once")


async def test_calling_it_runs_the_function_here() -> None:
    assert await ft_shout("hey", times=3) == "HEY HEY HEY"
    assert await fetch_title(url="http://x/a") == Title(url="http://x/a", title="a")


# ---------------------------------------------------------------- submit and result


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fleet.db'}"


@pytest.fixture
async def worker_backend(db_url: str) -> AsyncIterator[Backend]:
    backend = await open_backend(db_url)
    try:
        async with running_worker(backend, [t.automation for t in ALL]):
            yield backend
    finally:
        await backend.close()


async def test_submit_then_result_through_a_backend(worker_backend: Backend, db_url: str) -> None:
    on = {"backend": db_url}
    handle = await ft_shout.options(**on).submit("hey", times=3)
    assert handle.automation_type == "ft-shout" and len(handle.task_id) == 32
    assert await handle.result(timeout=10) == "HEY HEY HEY"
    titled = await fetch_title.options(**on).submit(url="http://site/page")
    assert await titled.result(timeout=10) == Title(url="http://site/page", title="page")
    quiet = await ft_quiet.options(**on).submit(n=1)
    assert await quiet.result(timeout=10) is None
    seen = await (await ft_with_ctx.options(**on).submit(label="l")).result(timeout=10)
    assert seen == {"label": "l", "type": "ft-with-ctx", "worker": "w1"}
    # the record holds the emitted output, as for any automation
    info = await worker_backend.queues.state("ft-shout", handle.task_id)
    assert info.state == "done" and info.outputs[-1]["payload"] == {"value": "HEY HEY HEY"}


async def test_options_shape_the_task(worker_backend: Backend, db_url: str) -> None:
    handle = await ft_shout.options(backend=db_url, task_id="mine-1", priority=5).submit("a")
    assert handle.task_id == "mine-1"
    assert await handle.result(timeout=10) == "A A"
    with pytest.raises(ContractTypeError, match=r"unknown submit option.*prio"):
        ft_shout.options(prio=5)
    with pytest.raises(ContractTypeError, match="not both"):
        ft_shout.options(backend=db_url, master="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="priority"):
        await ft_shout.options(backend=db_url, priority="high").submit("a")
    assert (await worker_backend.queues.depths("ft-shout")).pending == 0


async def test_a_dead_task_raises_with_its_error(worker_backend: Backend, db_url: str) -> None:
    handle = await ft_shout.options(backend=db_url).submit("boom")
    with pytest.raises(TaskFailed, match="RuntimeError: asked to fail: boom") as caught:
        await handle.result(timeout=20)
    assert caught.value.task_id == handle.task_id
    info = await worker_backend.queues.state("ft-shout", handle.task_id)
    assert info.state == "dead" and info.attempt == 2  # the decorator's max_attempts


async def test_a_result_that_takes_too_long_times_out_and_the_task_goes_on(
    worker_backend: Backend, db_url: str
) -> None:
    handle = await ft_slow.options(backend=db_url).submit(seconds=1.0)
    with pytest.raises(ResultTimeout, match=r"had not ended after 0\.2 s") as caught:
        await handle.result(timeout=0.2)
    assert isinstance(caught.value, TimeoutError)
    assert await handle.result(timeout=10) == 1.0


async def test_a_cancelled_task_raises(worker_backend: Backend, db_url: str) -> None:
    handle = await ft_slow.options(backend=db_url, delay_seconds=60).submit(seconds=0.0)
    assert await worker_backend.queues.cancel("ft-slow", handle.task_id) == "cancelled"
    with pytest.raises(TaskCancelledError):
        await handle.result(timeout=5)


async def test_an_unknown_task_raises(db_url: str) -> None:
    from fleet.core.functions import TaskHandle

    backend = await open_backend(db_url)  # the file, with its schema
    await backend.close()
    handle = TaskHandle(ft_shout, "never-submitted", {"backend": db_url})
    with pytest.raises(TaskFailed, match="no record"):
        await handle.result(timeout=1)


async def test_delay_is_for_synchronous_code(worker_backend: Backend, db_url: str) -> None:
    def sync_caller() -> str:
        handle = ft_shout.options(backend=db_url).delay(word="sync")
        return handle.result(timeout=10)

    assert await asyncio.to_thread(sync_caller) == "SYNC SYNC"
    with pytest.raises(RuntimeError, match=r"await task\.submit"):
        ft_shout.options(backend=db_url).delay(word="in a loop")


async def test_the_backend_comes_from_the_environment(
    worker_backend: Backend, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLEET_MASTER_URL", raising=False)
    monkeypatch.setenv("FLEET_BACKEND_URL", db_url)
    assert await (await ft_shout.submit("env")).result(timeout=10) == "ENV ENV"


async def test_submit_and_result_through_a_master(
    worker_backend: Backend, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    master = MasterProcess(db_url, tmp_path)
    try:
        await master.wait_ready()
        handle = await ft_shout.options(master=master.url, token=MASTER_TOKEN).submit("via")
        assert await handle.result(timeout=10) == "VIA VIA"
        # FLEET_MASTER_URL wins over the backend variable; the token from the environment
        monkeypatch.setenv("FLEET_MASTER_URL", master.url)
        monkeypatch.setenv("FLEET_ADMIN_TOKEN", MASTER_TOKEN)
        monkeypatch.setenv("FLEET_BACKEND_URL", "redis://127.0.0.1:1/0")
        dead = await ft_shout.submit("boom")
        with pytest.raises(TaskFailed, match="asked to fail"):
            await dead.result(timeout=20)
        titled = await fetch_title.submit(url="http://m/x")
        assert await titled.result(timeout=10) == Title(url="http://m/x", title="x")
        # the master validates against the catalog too: a bad token is refused
        monkeypatch.setenv("FLEET_ADMIN_TOKEN", "wrong")
        from fleet.client.http import ClientError

        with pytest.raises(ClientError, match=r"401|token"):
            await ft_shout.submit("refused")
    finally:
        master.close()
