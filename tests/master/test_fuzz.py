"""Random input against every route of the OpenAPI document: never a 5xx.

Hypothesis draws path parameters, query values and JSON bodies (random, and
shaped like a submit) for every operation the master publishes; every answer
must be a status the document declares for the operation, with a body that
matches its schema. test_schemathesis.py drives the same routes from the
OpenAPI document; this test stays for what schemathesis never sends: the
``NaN``/``Infinity`` tokens Python's JSON decoder accepts, integers beyond 64
bits and arbitrary unicode in path segments.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from tests.master.conftest import ADMIN, auth, memory_url
from tests.master.plugins import LOOP, SCRAPE

SKIP = {("get", "/api/v1/events")}  # an endless stream; covered by test_metrics_events

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
submit_like = st.fixed_dictionaries(
    {"payload": st.one_of(json_values, st.fixed_dictionaries({"url": scalars}))},
    optional={
        "priority": scalars,
        "task_id": scalars,
        "max_attempts": scalars,
        "ttl_seconds": scalars,
        "delay_seconds": scalars,
        "idempotency_key": scalars,
        "n": scalars,
        "task_ids": json_values,
        "tasks": st.lists(json_values, max_size=3),
        "slots": scalars,
    },
)
bodies = st.one_of(st.none(), json_values, submit_like)
path_values = st.one_of(
    st.sampled_from([SCRAPE, LOOP, "nope", "w1", "t1"]),
    # "." and ".." are dot segments the client normalises away: another URL.
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12).filter(
        lambda v: v not in (".", "..")
    ),
)


def operations(app: Any) -> list[tuple[str, str, dict[str, Any]]]:
    spec = app.openapi()
    return [
        (method, path, op)
        for path, item in sorted(spec["paths"].items())
        for method, op in sorted(item.items())
        if (method, path) not in SKIP
    ]


def test_no_server_error_on_random_input(live_factory: Any) -> None:
    live = live_factory(memory_url(), sweeper=False)
    components = live.app.openapi()["components"]

    def validator_for(schema: dict[str, Any]) -> Draft202012Validator:
        # "#/components/..." references resolve against this root document.
        return Draft202012Validator({**schema, "components": components})

    with httpx.Client(base_url=live.url, timeout=30) as client:
        ops = operations(live.app)
        # run pause and resume (issue 45) made it 61; error groups 65; webhooks 72
        assert len(ops) == 72

        @settings(
            max_examples=150,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(st.sampled_from(ops), st.data())
        def one(op: tuple[str, str, dict[str, Any]], data: st.DataObject) -> None:
            method, path, spec = op
            params: dict[str, Any] = {}
            for p in spec.get("parameters", []):
                if p["in"] == "path":
                    value = quote(data.draw(path_values).replace("/", "_"), safe="")
                    path = path.replace("{" + p["name"] + "}", value)
                elif p["in"] == "query" and data.draw(st.booleans()):
                    params[p["name"]] = data.draw(
                        st.one_of(st.integers(-5, 20_000), st.text(max_size=5))
                    )
            content = None
            if "requestBody" in spec:
                body = data.draw(bodies)
                content = json.dumps(body).encode() if body is not None else None
            r = client.request(
                method.upper(),
                path,
                params=params,
                content=content,
                headers={**auth(ADMIN), "Content-Type": "application/json"},
            )
            assert r.status_code < 500, (method, path, params, content, r.text)
            documented = spec["responses"].get(str(r.status_code))
            assert documented is not None, (r.status_code, method, path, r.text)
            schema = documented.get("content", {}).get("application/json", {}).get("schema")
            if schema and r.headers.get("content-type", "").startswith("application/json"):
                errors = list(validator_for(schema).iter_errors(r.json()))
                assert not errors, (method, path, r.status_code, errors[0].message)

        one()
