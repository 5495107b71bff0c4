"""A crawler's per-host limits are its groups' limits, one source for the fleet: a PATCH
of ``per_host_rate`` / ``per_host_concurrency`` is stored as the type's group defaults
before it answers (every reserve reads them), the schema's defaults (2, "1/s") hold
before any PATCH, and a per-worker override of them is refused (422)."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.backends.base import Backend
from fleet.core.catalog import describe
from fleet.core.errors import InvalidInput
from fleet.crawl import CrawlConfig, Crawler, Link
from fleet.master.services.config_ops import (
    fleet_wide_errors,
    patch_type_config,
    patch_worker_config,
)


class Hosts(Crawler[CrawlConfig]):
    async def parse(self, page: Any, ctx: Any) -> Any:
        yield Link(page.url)


Hosts.automation_type = "hosts-crawl"


async def test_a_patch_is_every_hosts_limit(backend: Backend) -> None:
    entry = describe(Hosts)
    await patch_type_config(backend, "hosts-crawl", entry, {})
    limits, _ = await backend.groups.defaults("hosts-crawl")
    assert (limits.concurrency, limits.rate) == (2, "1/s")  # the schema's defaults
    await patch_type_config(
        backend, "hosts-crawl", entry, {"per_host_rate": "5 / s", "per_host_concurrency": 3}
    )
    limits, _ = await backend.groups.defaults("hosts-crawl")
    assert (limits.concurrency, limits.rate) == (3, "5/s")
    with pytest.raises(InvalidInput):
        await patch_type_config(backend, "hosts-crawl", entry, {"group_rate": "9/s"})
    limits, _ = await backend.groups.defaults("hosts-crawl")
    assert limits.rate == "5/s"  # nothing stored


async def test_no_worker_has_its_own(backend: Backend) -> None:
    for field, value in (("per_host_rate", "9/s"), ("per_host_concurrency", 9)):
        (error,) = fleet_wide_errors({field: value})
        assert error["loc"] == ["body", field] and "fleet-wide" in error["msg"]
        with pytest.raises(InvalidInput):
            await patch_worker_config(backend, "hosts-crawl", "w1", describe(Hosts), {field: value})
