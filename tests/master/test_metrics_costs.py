"""What each type spent on ``/metrics`` (docs/costs.md), against a live master over real
HTTP, on SQLite and Redis: the gauge family ``fleet_meter{type, meter}`` holds every meter
of each known type's ``type:<type>`` scope (split meters such as ``requests:<tier>``
among them) and nothing of the other scopes (runs, domains, pools, hours) nor of a type
the master does not know; a type never metered has no sample; a later batch shows at the
next scrape."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.meters import MeterBatch, hour_scope
from tests.master import live_backend
from tests.master.conftest import READ, auth
from tests.master.plugins import LOOP, SCRAPE

# The live master and its backend, on SQLite and Redis (tests/master/live_backend.py).
backend_url, live, http, backend = (
    live_backend.backend_url,
    live_backend.live,
    live_backend.http,
    live_backend.backend,
)

#: What SCRAPE's own scope holds after :func:`seed`.
TYPE_METERS = {
    "attempts": 12.0,
    "run_seconds": 30.5,
    "requests": 40.0,
    "requests:direct": 25.0,
    "requests:residential": 15.0,
    "bytes_received": 3_500_000.0,
    "bytes_sent": 20_000.0,
    "bytes:residential": 2_000_000.0,
    "solves": 2.0,
    "solves:capsolver": 2.0,
    "browser_seconds": 7.25,
    "api_credits": 3.0,
    "spend": 1.5,
}


async def seed(b: Backend) -> None:
    """SCRAPE's meters in its type scope, and other amounts in every other kind of scope
    (which ``fleet_meter`` must not show)."""
    await b.meters.add(
        MeterBatch(
            {
                f"type:{SCRAPE}": dict(TYPE_METERS),
                hour_scope(SCRAPE, clock.now()): {"spend": 99.0, "requests": 999.0},
                f"domain:{SCRAPE}:shop.test": {"spend": 77.0, "bytes_received": 5.0},
                "run:r-metrics": {"spend": 55.0, "attempts": 4.0},
                "pool:shoppers": {"spend": 33.0},
                "type:not-a-known-type": {"spend": 11.0},
            }
        )
    )


async def meter_samples(http: httpx.AsyncClient) -> dict[tuple[str, str], float]:
    """``(type, meter) -> value`` of every ``fleet_meter`` sample of a scrape."""
    r = await http.get("/metrics", headers=auth(READ))
    assert r.status_code == 200, r.text
    assert "# TYPE fleet_meter gauge" in r.text.splitlines()
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            if s.name == "fleet_meter":
                assert set(s.labels) == {"type", "meter"}, s
                key = (s.labels["type"], s.labels["meter"])
                assert key not in out, key
                out[key] = s.value
    return out


async def test_fleet_meter_shows_each_types_meters_in_all(
    http: httpx.AsyncClient, backend: Backend
) -> None:
    # Nothing metered yet: the family is there, without a sample.
    assert await meter_samples(http) == {}

    await seed(backend)
    got = await meter_samples(http)
    assert got == {(SCRAPE, name): value for name, value in TYPE_METERS.items()}
    assert not any(t == LOOP for t, _ in got)  # never metered: no sample

    # A later batch (a worker's next flush) is summed and read at the next scrape.
    await backend.meters.add(
        MeterBatch(
            {
                f"type:{SCRAPE}": {"spend": 0.25, "requests:residential": 5.0},
                f"type:{LOOP}": {"attempts": 1.0, "run_seconds": 2.0},
            }
        )
    )
    got = await meter_samples(http)
    assert got[(SCRAPE, "spend")] == pytest.approx(1.75)
    assert got[(SCRAPE, "requests:residential")] == 20.0
    assert got[(SCRAPE, "requests:direct")] == 25.0
    assert got[(LOOP, "attempts")] == 1.0 and got[(LOOP, "run_seconds")] == 2.0
    assert len(got) == len(TYPE_METERS) + 2
