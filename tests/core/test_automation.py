"""register(), the base classes' declarations and the catalog entry."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from fleet.core import (
    BaseConfig,
    BatchAutomation,
    ContinuousAutomation,
    Pool,
    RegistrationError,
    register,
)
from fleet.core.automation import get_automation, registered, unregister
from fleet.core.browser import BrowserNeeds
from fleet.core.catalog import catalog_entry


class Req(BaseModel):
    url: str


class Out(BaseModel):
    n: int


class Tags(BaseModel):
    site: str


class Cfg(BaseConfig):
    api_key: str
    depth: int = 2


@pytest.fixture(autouse=True)
def _clean_registry() -> Any:
    before = set(registered())
    yield
    for name in set(registered()) - before:
        unregister(name)


def test_register_sets_type_and_registry() -> None:
    @register("t-batch")
    class A(BatchAutomation[Cfg]):
        Config = Cfg
        TaskPayload = Req

        async def run_one(self, task: Any, ctx: Any) -> None:
            return None

    assert A.automation_type == "t-batch"
    assert get_automation("t-batch") is A
    # the same class again is fine (a module imported twice)
    assert register("t-batch")(A) is A


def test_register_same_name_different_class_raises() -> None:
    @register("t-dup")
    class A(ContinuousAutomation[BaseConfig]):
        pass

    class B(ContinuousAutomation[BaseConfig]):
        pass

    with pytest.raises(RegistrationError, match="already registered") as info:
        register("t-dup")(B)
    assert isinstance(info.value, TypeError)
    assert info.value.automation_type == "t-dup"


def test_batch_without_task_payload_is_a_type_error_at_class_creation() -> None:
    with pytest.raises(TypeError, match="TaskPayload"):

        class NoPayload(BatchAutomation[BaseConfig]):
            async def run_one(self, task: Any, ctx: Any) -> None:
                return None


def test_register_checks_task_payload_even_without_run_one() -> None:
    class Base(BatchAutomation[BaseConfig]):
        pass

    with pytest.raises(TypeError, match="TaskPayload"):
        register("t-nopayload")(Base)


def test_register_rejects_non_model_declarations() -> None:
    class BadOut(ContinuousAutomation[BaseConfig]):
        Output = dict  # type: ignore[assignment]

    with pytest.raises(RegistrationError, match="Output"):
        register("t-badout")(BadOut)

    class NotAutomation:
        pass

    with pytest.raises(RegistrationError):
        register("t-plain")(NotAutomation)


@pytest.mark.parametrize("name", ["", "a b", "a:b", "x" * 200, "-lead"])
def test_register_rejects_bad_names(name: str) -> None:
    with pytest.raises(ValueError):
        register(name)


def test_missing_config_defaults_to_base_config() -> None:
    @register("t-noconfig")
    class C(ContinuousAutomation[BaseConfig]):
        pass

    assert C.Config is BaseConfig


def test_catalog_entry_batch() -> None:
    pool = Pool[Out, Tags]("things", payload=Out, tags=Tags)

    @register("t-cat")
    class A(BatchAutomation[Cfg]):
        Config = Cfg
        TaskPayload = Req
        Output = Out
        Pools = {"things": pool}
        Browser = BrowserNeeds(size=2)

        async def run_one(self, task: Any, ctx: Any) -> None:
            return None

    entry = catalog_entry(A)
    assert entry["type"] == "t-cat"
    assert entry["kind"] == "BatchAutomation"
    assert entry["config"]["properties"]["api_key"]["type"] == "string"
    assert "api_key" in entry["config"]["required"]
    assert entry["queue"]["name"] == "t-cat"
    assert entry["queue"]["payload"]["required"] == ["url"]
    assert entry["stream"] == {"name": "t-cat", "payload": Out.model_json_schema()}
    assert entry["pools"]["things"]["name"] == "things"
    assert entry["pools"]["things"]["tags"]["properties"]["site"]["type"] == "string"
    assert entry["browser"]["size"] == 2


def test_catalog_entry_continuous_has_no_queue() -> None:
    @register("t-cont")
    class C(ContinuousAutomation[BaseConfig]):
        pass

    entry = catalog_entry(C)
    assert entry["kind"] == "ContinuousAutomation"
    assert entry["queue"] is None and entry["stream"] is None and entry["pools"] == {}
