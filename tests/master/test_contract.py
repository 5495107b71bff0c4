"""The master's contract (issue 41, item 5): each Fleet error kind answers its status
through the one map of ``fleet/master/http/errors.py``; every route names its answer
in the OpenAPI document; the client's ``TypedDict``s are the same shapes; the task
browser pages with ``after``/``next`` and still takes ``cursor``/``next_cursor``."""

from __future__ import annotations

import subprocess
import sys
import typing
from typing import Any

import httpx
import pytest
from fastapi import APIRouter
from jsonschema import Draft202012Validator

from fleet.client import answers as client_answers
from fleet.core import clock
from fleet.core.errors import (
    BackendError,
    Conflict,
    ContractValueError,
    FleetError,
    Forbidden,
    InvalidInput,
    NotFound,
    Refused,
    RetryLater,
    TooLarge,
    Unsupported,
)
from fleet.master.app import create_app
from fleet.master.http.errors import REFUSAL_STATUS
from fleet.worker.stats import TypeCounters, stats_frame
from tests.master import plugins
from tests.master.conftest import ADMIN, InProcess, auth, memory_url, settings_for

#: Routes whose answer is not JSON: SSE, Prometheus text, the readiness probe.
NOT_JSON = {
    ("GET", "/api/v1/events"),
    ("GET", "/metrics"),
    ("GET", "/readyz"),
    ("GET", "/api/v1/automations/{automation_type}/errors/{group}/snapshots/{snapshot}/html"),
    ("GET", "/api/v1/automations/{automation_type}/errors/{group}/snapshots/{snapshot}/screenshot"),
}

RAISED: list[tuple[FleetError, int]] = [
    (NotFound("unknown pool 'x'", resource="pool", key="x", hint="; did you mean 'y'?"), 404),
    (Conflict("run 'r' has ended", resource="run", key="r"), 409),
    (Forbidden("not this run", resource="run", key="r"), 403),
    (TooLarge("on_complete too large", resource="on_complete"), 413),
    (Unsupported("no runs on this backend", resource="runs"), 501),
    (RetryLater("entry cannot be read", resource="catalog entry", key="t"), 503),
    (InvalidInput([{"type": "value_error", "loc": ["body", "x"], "msg": "bad"}]), 422),
    (ContractValueError("bad tag", field="tags.a"), 422),
    (BackendError("redis at redis://secret:6379 refused"), 500),
]


@pytest.fixture
async def raising_master() -> Any:
    """A master whose app also has a route raising the error of its index."""
    app = create_app(settings_for(memory_url()), plugins=False, sweeper=False)
    router = APIRouter()

    @router.get("/api/v1/raise/{index}")
    async def _raise(index: int) -> None:
        raise RAISED[index][0]

    app.include_router(router)
    app.router.routes.insert(0, app.router.routes.pop())  # before the dashboard's mount
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://master")
    try:
        yield InProcess(app, client)
    finally:
        await client.aclose()
        await lifespan.__aexit__(None, None, None)


@pytest.mark.parametrize("index", range(len(RAISED)), ids=[type(e).__name__ for e, _ in RAISED])
async def test_each_fleet_error_answers_its_status(raising_master: InProcess, index: int) -> None:
    error, status = RAISED[index]
    r = await raising_master.client.get(f"/api/v1/raise/{index}", headers=auth(ADMIN))
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    if isinstance(error, Refused):
        assert detail == error.message + error.hint
    elif status == 422:
        assert isinstance(detail, list) and detail[0]["msg"]
    else:
        assert "secret" not in detail and "logged on the master" in detail


def test_every_refusal_kind_has_a_status() -> None:
    tree = vars(sys.modules["fleet.core.errors"]).values()
    kinds = {c for c in tree if isinstance(c, type) and issubclass(c, Refused) and c is not Refused}
    assert kinds == set(REFUSAL_STATUS)


async def test_services_refusals_reach_the_wire(master: InProcess) -> None:
    h = auth(ADMIN)
    r = await master.client.get("/api/v1/automations/scrap/queue", headers=h)
    assert r.status_code == 404
    assert r.json()["detail"].startswith("unknown automation type 'scrap'")
    r = await master.client.get("/api/v1/runs/nope", headers=h)
    assert r.status_code in (404, 422)


def _document() -> dict[str, Any]:
    app = create_app(settings_for(memory_url()), plugins=False, sweeper=False)
    return app.openapi()


def _named(schema: dict[str, Any]) -> bool:
    """A schema that names its shape: a ``$ref``, or an array or map of ``$ref``s."""
    if "$ref" in schema:
        return True
    if schema.get("type") == "array":
        return _named(schema.get("items", {}))
    extra = schema.get("additionalProperties")
    return schema.get("type") == "object" and isinstance(extra, dict) and _named(extra)


def test_every_route_names_its_answer_in_the_openapi_document() -> None:
    unnamed = []
    for path, ops in _document()["paths"].items():
        for method, op in ops.items():
            if (method.upper(), path) in NOT_JSON:
                continue
            ok = next(c for c in op["responses"] if c.startswith("2"))
            schema = op["responses"][ok].get("content", {}).get("application/json", {})
            if not _named(schema.get("schema", {})):
                unnamed.append(f"{method.upper()} {path}")
    assert unnamed == []


def test_the_clients_typed_answers_are_the_documents_schemas() -> None:
    schemas = _document()["components"]["schemas"]
    typed = {
        name: cls
        for name, cls in vars(client_answers).items()
        if isinstance(cls, type) and typing.is_typeddict(cls)
    }
    assert typed
    for name, cls in typed.items():
        assert name in schemas, name
        schema = schemas[name]
        assert set(cls.__annotations__) == set(schema["properties"]), name
        assert set(cls.__required_keys__) == set(schema.get("required", [])), name


def test_the_client_imports_without_the_master_extra() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('fastapi', 'starlette', 'uvicorn'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import fleet.client.http, fleet.client.answers\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_the_task_browser_pages_with_after_and_next(master: InProcess) -> None:
    h = auth(ADMIN)
    base = f"/api/v1/automations/{plugins.SCRAPE}/tasks"
    for i in range(3):
        r = await master.client.post(base, json={"payload": {"url": f"https://x/{i}"}}, headers=h)
        assert r.status_code == 202, r.text
    first = (await master.client.get(base, params={"limit": 2}, headers=h)).json()
    assert first["next"] is not None and first["next_cursor"] == first["next"]
    by_after = (
        await master.client.get(base, params={"limit": 2, "after": first["next"]}, headers=h)
    ).json()
    by_cursor = (
        await master.client.get(base, params={"limit": 2, "cursor": first["next"]}, headers=h)
    ).json()
    assert by_after == by_cursor and len(by_after["items"]) == 1 and by_after["next"] is None
    bad = await master.client.get(base, params={"after": "not-a-cursor"}, headers=h)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "after"]


# ------------------------------------------- answers the routes build themselves
# Most routes return a dict that FastAPI validates against the route's model; these
# build their JSON themselves (a status other than 200, or one JSON made per read for
# every caller), so nothing holds them to the document but this.


def _resolved(schema: dict[str, Any], components: dict[str, Any], body: Any) -> dict[str, Any]:
    """``schema`` with a ``$ref`` replaced by its target; of an ``anyOf``, the first
    model whose required keys ``body`` has."""
    for option in schema.get("anyOf", [schema]):
        ref = option.get("$ref")
        if ref is not None:
            target: dict[str, Any] = components[ref.rsplit("/", 1)[-1]]
            if isinstance(body, dict) and set(target.get("required", [])) <= set(body):
                return target
    return schema


def _undeclared(
    body: Any, schema: dict[str, Any], components: dict[str, Any], at: str
) -> list[str]:
    """The keys of ``body`` (and of its nested answers) that its model does not declare."""
    schema = _resolved(schema, components, body)
    if isinstance(body, list):
        items = schema.get("items", {})
        return [
            k for i, v in enumerate(body) for k in _undeclared(v, items, components, f"{at}[{i}]")
        ]
    if not isinstance(body, dict) or "properties" not in schema:
        return []
    found = [f"{at}.{k}" for k in body if k not in schema["properties"]]
    for key, value in body.items():
        if key in schema["properties"]:
            found += _undeclared(value, schema["properties"][key], components, f"{at}.{key}")
    return found


def assert_documented(master: InProcess, method: str, path: str, r: httpx.Response) -> None:
    """``r`` is what the document says the route answers: valid against its schema,
    every key declared by its model."""
    document = master.app.openapi()
    responses = document["paths"][path][method]["responses"]
    assert str(r.status_code) in responses, (r.status_code, list(responses))
    schema = responses[str(r.status_code)]["content"]["application/json"]["schema"]
    validator = Draft202012Validator({**schema, "components": document["components"]})
    errors = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(r.json())
    ]
    assert errors == [], errors
    components = document["components"]["schemas"]
    assert _undeclared(r.json(), schema, components, "answer") == []


async def test_create_and_run_schedule_answer_their_documented_models(master: InProcess) -> None:
    h = auth(ADMIN)
    base = f"/api/v1/automations/{plugins.SCRAPE}/schedules"
    body = {"id": "hourly", "cron": "0 * * * *", "payload": {"url": "https://x/1"}, "group": "g"}
    created = await master.client.post(base, json=body, headers=h)
    assert created.status_code == 201, created.text
    assert_documented(master, "post", "/api/v1/automations/{automation_type}/schedules", created)
    every = {"id": "often", "every_seconds": 90, "payload": {"url": "https://x/2"}}
    created = await master.client.post(base, json=every, headers=h)
    assert_documented(master, "post", "/api/v1/automations/{automation_type}/schedules", created)
    ran = await master.client.post(f"{base}/hourly/run", headers=h)
    assert ran.status_code == 202, ran.text
    route = "/api/v1/automations/{automation_type}/schedules/{schedule_id}/run"
    assert_documented(master, "post", route, ran)


async def test_submits_answer_their_documented_models(master: InProcess) -> None:
    h = auth(ADMIN)
    base = f"/api/v1/automations/{plugins.SCRAPE}/tasks"
    one = await master.client.post(base, json={"payload": {"url": "https://x/1"}}, headers=h)
    assert one.status_code == 202, one.text
    assert_documented(master, "post", "/api/v1/automations/{automation_type}/tasks", one)
    tasks = [{"payload": {"url": "https://x/2"}}, {"payload": {"nope": 1}}]
    batch = await master.client.post(f"{base}/batch", json={"tasks": tasks}, headers=h)
    assert batch.status_code == 202, batch.text
    assert [sorted(r) for r in batch.json()["results"]][1] == ["detail", "error"]
    assert_documented(master, "post", "/api/v1/automations/{automation_type}/tasks/batch", batch)


async def test_every_worker_answers_its_documented_model(master: InProcess) -> None:
    """``GET /workers`` (JSON made once per read) says what the model says, and the
    same as the route FastAPI answers through the model."""
    b = master.backend
    pool = {
        "engine": "chromium", "size": 2, "max_uses": 50, "warm": 1, "idle": 1, "in_use": 0,
        "acquired": 3, "launched": 1, "retired": 0, "crashed": 0, "launch_failures": 0,
        "launch_seconds_last": 0.8, "launch_seconds_avg": 0.8, "error": None,
    }  # fmt: skip
    frame = stats_frame(
        ts=1.0,
        slots=[],
        counters=TypeCounters(completed=3, failed=1),
        per_second=0.5,
        cpu_percent=2.0,
        rss_bytes=1 << 20,
        browser_pools=[pool],
    )
    await b.workers.register(plugins.SCRAPE, "w1", {"host": "h1", "pid": 42})
    state = {
        "state": "RUNNING", "last_seen": f"{clock.now():.3f}", "last_error": "", "applied_gen": "0",
        "slots": "2", "host": "h1", "pid": "42", "started_at": "1.500", "version": "9.9",
    }  # fmt: skip
    await b.workers.set_state(plugins.SCRAPE, "w1", state)
    await b.workers.put_stats(plugins.SCRAPE, "w1", frame)
    await b.workers.register(plugins.SCRAPE, "w2", {"host": "h2"})  # no heartbeat yet
    h = auth(ADMIN)
    every = await master.client.get("/api/v1/workers", headers=h)
    assert every.status_code == 200, every.text
    assert {w["worker_id"] for w in every.json()} == {"w1", "w2"}
    assert_documented(master, "get", "/api/v1/workers", every)
    typed = await master.client.get(f"/api/v1/automations/{plugins.SCRAPE}/workers", headers=h)

    def by_id(views: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {v["worker_id"]: {k: x for k, x in v.items() if k != "seen_ago"} for v in views}

    assert by_id(every.json()) == by_id(typed.json())  # seen_ago: read at another time
    one = await master.client.get(f"/api/v1/automations/{plugins.SCRAPE}/workers/w1", headers=h)
    assert one.json()["browser_pools"] == [pool] and one.json()["tasks"]["completed"] == 3
    assert_documented(
        master, "get", "/api/v1/automations/{automation_type}/workers/{worker_id}", one
    )


async def test_catalog_entries_declare_their_fixed_fields(master: InProcess) -> None:
    h = auth(ADMIN)
    every = await master.client.get("/api/v1/catalog", headers=h)
    assert plugins.SCRAPE in every.json()
    assert_documented(master, "get", "/api/v1/catalog", every)
    one = await master.client.get(f"/api/v1/catalog/{plugins.SCRAPE}", headers=h)
    assert one.json()["queue"]["name"] == plugins.SCRAPE
    assert_documented(master, "get", "/api/v1/catalog/{automation_type}", one)
