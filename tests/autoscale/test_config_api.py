"""A PATCH of ``slots``/``min_slots``/``max_slots``/``auto_slots`` over the REST API:
bad combinations are a 422 naming the field, whether the master knows the type's
``Config`` class (registered in its process) or only the JSON schema a worker
published; good ones are stored."""

from __future__ import annotations

import pytest

from fleet.core.catalog import catalog_entry
from tests.master.conftest import ADMIN, InProcess, auth, master  # noqa: F401  (fixture)
from tests.master.plugins import SCRAPE, Scraper

H = auth(ADMIN)
#: A type only a worker's catalog entry describes (no class in the master's process).
REMOTE = "remote-scrape"

BAD = [
    ({"slots": "atuo"}, "slots", "auto"),
    ({"slots": -1}, "slots", ""),
    ({"slots": "auto", "min_slots": 8, "max_slots": 4}, "min_slots", "above max_slots"),
    ({"min_slots": 0}, "min_slots", ""),
    ({"auto_slots": {"decrease": 1.5}}, "decrease", ""),
    ({"auto_slots": {"max_lag": 1}}, "max_lag", ""),
]


@pytest.mark.parametrize("automation_type", [SCRAPE, REMOTE])
@pytest.mark.parametrize(("patch", "field", "words"), BAD)
async def test_bad_slot_settings_are_422_naming_the_field(
    master: InProcess,  # noqa: F811
    automation_type: str,
    patch: dict[str, object],
    field: str,
    words: str,
) -> None:
    if automation_type == REMOTE:
        await master.backend.catalog.put(REMOTE, {**catalog_entry(Scraper), "type": REMOTE})
    url = f"/api/v1/automations/{automation_type}/config"
    r = await master.client.patch(url, json=patch, headers=H)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert any(field in [str(p) for p in d["loc"]] or field in d["msg"] for d in detail), detail
    assert any(words in d["msg"] for d in detail), detail
    assert (await master.client.get(url, headers=H)).json()["config"] == {}


@pytest.mark.parametrize("automation_type", [SCRAPE, REMOTE])
async def test_an_auto_config_is_stored(master: InProcess, automation_type: str) -> None:  # noqa: F811
    if automation_type == REMOTE:
        await master.backend.catalog.put(REMOTE, {**catalog_entry(Scraper), "type": REMOTE})
    url = f"/api/v1/automations/{automation_type}/config"
    patch = {"slots": "auto", "min_slots": 2, "max_slots": 40, "auto_slots": {"increase": 2}}
    r = await master.client.patch(url, json=patch, headers=H)
    assert r.status_code == 200, r.text
    assert (await master.client.get(url, headers=H)).json()["config"] == patch
