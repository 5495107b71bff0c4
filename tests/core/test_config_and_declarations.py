"""BaseConfig, config merging, BrowserNeeds, references and submit options."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError

from fleet.core import BaseConfig, ConfigError, Pool, Queue, Stream
from fleet.core.browser import BrowserNeeds
from fleet.core.config import merge_config, missing_required_fields, validate_config
from fleet.core.records import TaskBody, tier_of
from fleet.core.submission import make_push_request


class Cfg(BaseConfig):
    api_key: str
    depth: int = 2


def test_base_config_defaults() -> None:
    c = BaseConfig()
    assert (c.enabled, c.slots, c.max_attempts, c.visibility_seconds) == (True, 1, 3, 300.0)
    assert c.recycle_seconds is None and c.proxy_url is None and c.proxy_provider is None
    assert c.proxy_provider_config == {}


def test_base_config_forbids_unknown_and_bounds() -> None:
    with pytest.raises(ValidationError):
        BaseConfig.model_validate({"slotz": 3})
    with pytest.raises(ValidationError):
        BaseConfig(visibility_seconds=5)
    with pytest.raises(ValidationError):
        BaseConfig(slots=-1)


def test_validate_config_names_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        validate_config(Cfg, {"depth": "deep"}, automation_type="x")
    assert info.value.field in ("api_key", "depth")
    with pytest.raises(ConfigError) as info2:
        validate_config(Cfg, {"api_key": "k", "depth": "deep"})
    assert info2.value.field == "depth"
    assert validate_config(Cfg, {"api_key": "k"}).depth == 2  # type: ignore[attr-defined]


def test_missing_required_fields() -> None:
    assert missing_required_fields(Cfg, {}) == ["api_key"]
    assert missing_required_fields(Cfg, {"api_key": "k"}) == []


def test_merge_config_layers() -> None:
    merged = merge_config(
        {"slots": 2, "proxy_provider_config": {"a": 1, "b": 2}},
        None,
        {"slots": 5, "proxy_provider_config": {"b": 3}, "proxy_url": None},
    )
    assert merged == {"slots": 5, "proxy_provider_config": {"a": 1, "b": 3}, "proxy_url": None}


def test_browser_needs_validation() -> None:
    b = BrowserNeeds(size=4, max_uses=1, engine="cloak", launch_args=["--x"])  # type: ignore[arg-type]
    assert b.launch_args == ("--x",)
    assert b.describe()["engine"] == "cloak"
    # any engine name is accepted here (plugins register engines; an unknown one fails
    # the pool's warm-up): only what cannot be a name is refused
    assert BrowserNeeds(engine="netscape").engine == "netscape"
    for bad in ({"size": 0}, {"max_uses": 0}, {"engine": ""}, {"engine": 7}, {"size": 1000}):
        with pytest.raises(ValueError):
            BrowserNeeds(**bad)  # type: ignore[arg-type]


class P(BaseModel):
    x: int


def test_references_validate_models_and_names() -> None:
    with pytest.raises(TypeError):
        Queue("q", payload=dict)  # type: ignore[type-var]
    with pytest.raises(ValueError):
        Stream("bad name", payload=P)
    pool = Pool[P, P]("p", payload=P, tags=P)
    with pytest.raises(ValueError, match="unknown tag"):
        pool.check_where({"y": 1})
    assert Queue("q", payload=P) == Queue("q", payload=P)


def test_make_push_request_options() -> None:
    req = make_push_request(
        {"x": 1},
        priority=5,
        ttl_seconds=10,
        delay_seconds=2,
        idempotency_key="k",
        idempotency_ttl_seconds=60,
    )
    assert req.body.priority == 5 and req.body.tier == "high"
    assert req.body.attempt == 0 and req.body.max_attempts is None
    assert req.delay_seconds == 2 and req.idempotency_key == "k" and req.idempotency_ttl == 60
    assert len(req.body.id) == 32
    for bad in (
        {"priority": "1"},
        {"max_attempts": 0},
        {"ttl_seconds": 0},
        {"delay_seconds": -1},
        {"task_id": ""},
        {"idempotency_key": ""},
    ):
        with pytest.raises(ValueError) as info:
            make_push_request({}, **bad)  # type: ignore[arg-type]
        assert getattr(info.value, "field", None) == next(iter(bad))


def test_task_body_roundtrip_and_tiers() -> None:
    body = TaskBody(
        id="a",
        payload={"u": 1},
        priority=-2,
        attempt=1,
        max_attempts=4,
        enqueued_at=100.0,
        ttl_seconds=5,
        last_error="boom",
    )
    assert TaskBody.from_json(body.to_json()) == body
    assert body.tier == "low" and tier_of(0) == "normal" and tier_of(3) == "high"
    assert body.is_expired(106.0) and not body.is_expired(104.0)
    assert TaskBody.from_json('{"id": "x", "payload": null}').max_attempts is None


def test_task_body_stored_form_leaves_defaults_out() -> None:
    """The stored body carries priority, attempt and max_attempts only when they are
    not their defaults (the record holds them); reading it puts the defaults back."""
    plain = TaskBody(id="a", payload={"i": 1}, enqueued_at=100.5)
    assert json.loads(plain.to_json()) == {"id": "a", "payload": {"i": 1}, "enqueued_at": 100.5}
    assert TaskBody.from_json(plain.to_json()) == plain
    set_ = TaskBody(id="b", payload=None, priority=3, attempt=2, max_attempts=5)
    stored = json.loads(set_.to_json())
    assert (stored["priority"], stored["attempt"], stored["max_attempts"]) == (3, 2, 5)
    assert TaskBody.from_json(set_.to_json()) == set_
    # what REST shows of a body stays whole
    assert set(plain.to_dict()) >= {"priority", "attempt", "max_attempts"}
