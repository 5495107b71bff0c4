"""A backend error the master did not expect is a 500 whose text names no backend
address, script or driver (issue 40, finding 7): the detail is in the master's log
under a reference the answer gives."""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
import pytest
import redis

from fleet.backends import open_backend
from fleet.core.catalog import catalog_entry
from tests.master.conftest import ADMIN, auth
from tests.master.plugins import SCRAPE, Scraper


async def test_a_backend_error_is_a_500_with_a_reference_only(
    live_factory: Any, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="fleet")
    side = await open_backend(redis_url)
    try:
        await side.catalog.put(SCRAPE, catalog_entry(Scraper))
    finally:
        await side.close()
    # A key of the type's queue holding the wrong kind of value: every read of it fails.
    raw = redis.Redis.from_url(redis_url)
    raw.set(f"fleet:queue:{SCRAPE}:counters", "not a hash")
    raw.close()
    master = live_factory(redis_url, sweeper=False)
    async with httpx.AsyncClient(base_url=master.url, headers=auth(ADMIN), timeout=30) as client:
        r = await client.get(f"/api/v1/automations/{SCRAPE}/queue")
    assert r.status_code == 500, r.text
    detail = r.json()["detail"]
    for leak in ("redis", "WRONGTYPE", "127.0.0.1", str(redis_url.rsplit(":", 1)[-1]), "fleet_"):
        assert leak not in detail, detail
    ref = re.search(r"\[([0-9a-f]{12})\]", detail)
    assert ref is not None, detail
    logged = [rec.getMessage() for rec in caplog.records if ref.group(1) in rec.getMessage()]
    assert logged and "WRONGTYPE" in logged[0], logged
