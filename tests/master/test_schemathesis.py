"""Schemathesis against a live master: no 5xx, and every answer is documented.

A real uvicorn master on the memory backend (admin token, the test
automations registered, so that submits to ``m-scrape`` validate payloads
against its real ``TaskPayload``) is driven by schemathesis from its own
``/api/v1/openapi.json``. Every operation gets a few schema-valid and a few
schema-invalid requests, half of them aimed at the registered type. Each
answer must not be a server error, its status must be one the document
declares for the operation, and its content type and body must conform.
"""

from __future__ import annotations

import time
from typing import Any

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.master.conftest import ADMIN, auth, memory_url
from tests.master.plugins import LOOP, SCRAPE

#: An endless event stream: covered by test_metrics_events instead.
SKIP = {"GET /api/v1/events"}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
#: Examples per operation and generation mode (the whole run stays well under 40 s).
EXAMPLES = 6


def _strategy(operation: Any) -> Any:
    """Positive and negative cases; those with a type parameter also aimed at real types."""
    params = {p.name for p in operation.path_parameters}
    choices = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        choices.append(operation.as_strategy(mode))
        if "automation_type" in params:
            for name in (SCRAPE, LOOP):
                fixed = {"automation_type": name}
                choices.append(operation.as_strategy(mode, path_parameters=fixed))
    return st.one_of(choices)


def test_schemathesis_finds_no_server_error(live_factory: Any) -> None:
    live = live_factory(memory_url(), sweeper=False)
    schema = schemathesis.openapi.from_url(f"{live.url}/api/v1/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    operations = [op for op in operations if op.label not in SKIP]
    # run pause and resume (issue 45) made it 61; error groups 65; webhooks 72
    assert len(operations) == 72
    started = time.monotonic()
    calls = 0
    with requests.Session() as session:
        for operation in operations:

            @settings(
                max_examples=EXAMPLES * 2,
                deadline=None,
                derandomize=True,
                database=None,
                phases=[Phase.generate, Phase.shrink],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=_strategy(operation))
            def one(case: Any) -> None:
                nonlocal calls
                calls += 1
                case.call_and_validate(
                    base_url=live.url, session=session, headers=auth(ADMIN), checks=CHECKS
                )

            one()
    assert calls >= len(operations) * EXAMPLES
    assert time.monotonic() - started < 40
