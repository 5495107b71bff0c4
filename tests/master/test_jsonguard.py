"""The JSON guard: depth and unpaired surrogates refused at ingress with 422, on every
route that takes a body, before anything is stored; pure checks and the routes."""

from __future__ import annotations

import json

import pytest

from fleet.master.http.jsonguard import MAX_DEPTH, depth_of, json_problem
from tests.master.conftest import ADMIN, SCOPED, InProcess, auth
from tests.master.plugins import SCRAPE

H = auth(ADMIN)


def nested(depth: int, leaf: str = "1") -> bytes:
    return ("[" * depth + leaf + "]" * depth).encode()


def test_depth_ignores_brackets_inside_strings() -> None:
    assert depth_of(b'{"a": "[[[[{{{{", "b": [1, {"c": [2]}]}') == 4
    assert depth_of(b'"[["') == 0
    assert depth_of(b'["\\"[[[", 1]') == 1
    assert depth_of(nested(MAX_DEPTH)) == MAX_DEPTH


def test_problems() -> None:
    assert json_problem(nested(MAX_DEPTH)) is None
    loc, msg = json_problem(nested(MAX_DEPTH + 1))  # type: ignore[misc]
    assert loc == ["body"] and "65 levels" in msg
    assert json_problem(b'{"a": "\\ud83d\\ude00"}') is None  # a proper pair
    assert json_problem(b'{"a": "\\\\ud800"}') is None  # an escaped backslash, not an escape
    assert json_problem(b'{"a": [1, {"b": "x\\ud800"}]}')[0] == ["body", "a", 1, "b"]  # type: ignore[index]
    assert json_problem(b'{"\\udc00": 1}')[0] == ["body"]  # type: ignore[index]
    assert json_problem(b"not json [[[[") is None  # the route's own 422


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", f"/api/v1/automations/{SCRAPE}/tasks"),
        ("POST", f"/api/v1/automations/{SCRAPE}/tasks/batch"),
        ("PATCH", f"/api/v1/automations/{SCRAPE}/config"),
        ("PUT", f"/api/v1/automations/{SCRAPE}/groups/g"),
        ("POST", f"/api/v1/automations/{SCRAPE}/schedules"),
        ("POST", f"/api/v1/automations/{SCRAPE}/dead/replay"),
    ],
)
async def test_every_body_route_refuses_deep_and_surrogate_bodies(
    master: InProcess, method: str, path: str
) -> None:
    deep = b'{"payload": ' + nested(300) + b"}"
    r = await master.client.request(method, path, content=deep, headers=H)
    assert r.status_code == 422 and "levels deep" in r.text, r.text
    lone = b'{"payload": {"url": "\\ud800"}, "task_id": "x"}'
    r = await master.client.request(method, path, content=lone, headers=H)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][:2] == ["body", "payload"]
    assert (await master.backend.queues.depths(SCRAPE)).pending == 0


async def test_a_deep_payload_from_a_scoped_token_is_never_stored(master: InProcess) -> None:
    body = json.dumps({"payload": {"url": "u", "extra": json.loads(nested(100))}})
    r = await master.client.post(
        f"/api/v1/automations/{SCRAPE}/tasks", content=body, headers=auth(SCOPED)
    )
    assert r.status_code == 422
    for path in ("dead", "config", "queue"):
        assert (
            await master.client.get(f"/api/v1/automations/{SCRAPE}/{path}", headers=H)
        ).status_code == 200
    r = await master.client.get("/api/v1/workers", headers=H)
    assert r.status_code == 200


async def test_ids_and_keys_with_surrogates_or_control_characters_are_422(
    master: InProcess,
) -> None:
    path = f"/api/v1/automations/{SCRAPE}/tasks"
    for field, value in [
        ("task_id", "a\nb"),
        ("task_id", "tab\there"),
        ("idempotency_key", "k\r\nforged: line"),
        ("task_id", "\u0085next"),
    ]:
        r = await master.client.post(path, json={"payload": {"url": "u"}, field: value}, headers=H)
        assert r.status_code == 422, (field, value, r.text)
        assert r.json()["detail"][0]["loc"][-1] == field
    assert (await master.backend.queues.depths(SCRAPE)).pending == 0
