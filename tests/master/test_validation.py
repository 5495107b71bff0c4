"""JSON-schema validation from the catalog (types the master has no plugin for)."""

from __future__ import annotations

from typing import Any

from fleet.master.http.errors import finite_json
from fleet.master.services.validation import (
    non_finite_errors,
    schema_defaults,
    schema_errors,
    split_missing,
)
from tests.master.plugins import Page, ScrapeConfig

PAGE = Page.model_json_schema()
CONFIG = ScrapeConfig.model_json_schema()


def locs(errors: list[dict[str, Any]]) -> list[list[Any]]:
    return [e["loc"] for e in errors]


def test_valid_payload_has_no_errors() -> None:
    assert schema_errors(PAGE, {"url": "https://x", "depth": 2}) == []


def test_missing_field_points_at_the_field() -> None:
    errors = schema_errors(PAGE, {"depth": 1}, ("body", "payload"))
    assert locs(errors) == [["body", "payload", "url"]]
    assert errors[0]["type"] == "missing"


def test_wrong_type_and_bound_point_at_their_fields() -> None:
    errors = schema_errors(PAGE, {"url": 5, "depth": 9}, ("body", "payload"))
    assert sorted(map(tuple, locs(errors))) == [
        ("body", "payload", "depth"),
        ("body", "payload", "url"),
    ]
    assert all(e["msg"] for e in errors)


def test_payload_not_an_object() -> None:
    errors = schema_errors(PAGE, ["x"], ("body", "payload"))
    assert locs(errors) == [["body", "payload"]]


def test_config_extra_key_is_forbidden_and_named() -> None:
    errors = schema_errors(CONFIG, {"slotz": 3}, ("body",))
    assert locs(errors) == [["body", "slotz"]]
    assert errors[0]["type"] == "extra_forbidden"


def test_optional_field_error_explains_the_expected_type() -> None:
    errors = schema_errors(CONFIG, {"recycle_seconds": "soon"}, ("body",))
    assert locs(errors) == [["body", "recycle_seconds"]]
    assert "soon" in errors[0]["msg"]


def test_long_messages_are_cut() -> None:
    errors = schema_errors(PAGE, {"url": "x" * 10_000, "depth": "deep" * 1000})
    assert all(len(e["msg"]) <= 300 for e in errors)


def test_split_missing_keeps_other_errors() -> None:
    errors = [
        {"type": "missing", "loc": ["body", "api_key"], "msg": "Field required"},
        {"type": "int_type", "loc": ["body", "slots"], "msg": "bad"},
    ]
    missing, others = split_missing(errors)
    assert missing == ["api_key"]
    assert others == [errors[1]]


def test_non_finite_numbers_are_found_anywhere() -> None:
    value = {"a": [1.0, float("nan")], "b": {"c": float("inf")}, "d": 2}
    assert sorted(map(tuple, locs(non_finite_errors(value, ("p",))))) == [
        ("p", "a", 1),
        ("p", "b", "c"),
    ]
    assert non_finite_errors({"ok": 1.5}, ()) == []
    assert finite_json({"x": [float("-inf")]}) == {"x": ["-inf"]}


def test_schema_defaults() -> None:
    defaults = schema_defaults(CONFIG)
    assert defaults["slots"] == 1 and defaults["user_agent"] == "fleet-test"
    assert schema_defaults({"type": "object"}) == {}
