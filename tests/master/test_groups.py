"""The groups routes and ``group`` on submit: effective limits, overrides, pause,
paging, validation (422, never a 500), scopes, and /metrics."""

from __future__ import annotations

from urllib.parse import quote

from fleet.core.flow import GroupSettings
from tests.master.conftest import ADMIN, READ, SCOPED, InProcess, auth
from tests.master.plugins import LOOP, SCRAPE

H = auth(ADMIN)
BASE = f"/api/v1/automations/{SCRAPE}"


async def submit(master: InProcess, url: str, group: str | None) -> str:
    body: dict[str, object] = {"payload": {"url": url}}
    if group is not None:
        body["group"] = group
    r = await master.client.post(f"{BASE}/tasks", json=body, headers=H)
    assert r.status_code == 202, r.text
    task_id: str = r.json()["task_id"]
    return task_id


async def test_submit_with_a_group_and_list_it(master: InProcess) -> None:
    for i in range(3):
        await submit(master, f"https://a.example/{i}", "a.example")
    await submit(master, "https://b.example/", "b.example")
    await submit(master, "https://plain/", None)
    r = await master.client.get(f"{BASE}/groups", headers=auth(READ))
    assert r.status_code == 200
    body = r.json()
    assert [(g["group"], g["pending"], g["running"]) for g in body["groups"]] == [
        ("a.example", 3, 0),
        ("b.example", 1, 0),
    ]
    assert body["next"] is None
    assert body["defaults"] == {"concurrency": None, "rate": None}
    reserved = await master.backend.queues.reserve(SCRAPE, k=10)
    assert {r.body.group for r in reserved} == {"a.example", "b.example", None}


async def test_batch_submit_carries_groups(master: InProcess) -> None:
    tasks = [{"payload": {"url": f"u{i}"}, "group": f"g{i % 2}"} for i in range(6)]
    r = await master.client.post(f"{BASE}/tasks/batch", json={"tasks": tasks}, headers=H)
    assert r.status_code == 202
    groups = (await master.client.get(f"{BASE}/groups", headers=H)).json()["groups"]
    assert [(g["group"], g["pending"]) for g in groups] == [("g0", 3), ("g1", 3)]


async def test_bad_groups_are_422_and_store_nothing(master: InProcess) -> None:
    for bad in ["", "x" * 201, "line\nbreak", "tab\there", 7]:
        r = await master.client.post(
            f"{BASE}/tasks", json={"payload": {"url": "u"}, "group": bad}, headers=H
        )
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["detail"][0]["loc"][-1] == "group"
    tasks = [
        {"payload": {"url": "ok"}, "group": "fine"},
        {"payload": {"url": "u"}, "group": "a\x00"},
    ]
    r = await master.client.post(f"{BASE}/tasks/batch", json={"tasks": tasks}, headers=H)
    results = r.json()["results"]
    assert results[0]["queued"] is True and "error" in results[1]
    assert (await master.backend.queues.depths(SCRAPE)).pending == 1


async def test_effective_limits_follow_the_type_config_and_overrides(master: InProcess) -> None:
    r = await master.client.patch(
        f"{BASE}/config", json={"group_concurrency": 3, "group_rate": "10 / sec"}, headers=H
    )
    assert r.status_code == 200, r.text
    await submit(master, "u", "shop.example")
    g = (await master.client.get(f"{BASE}/groups/shop.example", headers=H)).json()
    assert (g["concurrency"], g["rate"], g["paused"], g["settings"]) == (3, "10/s", False, None)
    r = await master.client.put(
        f"{BASE}/groups/shop.example", json={"rate": "1/s", "paused": True}, headers=H
    )
    assert r.status_code == 200, r.text
    g = r.json()
    assert (g["concurrency"], g["rate"], g["paused"]) == (3, "1/s", True)
    assert g["settings"] == {"concurrency": None, "rate": "1/s", "paused": True}
    info = await master.backend.groups.info(SCRAPE, "shop.example")
    assert info.settings == GroupSettings(rate="1/s", paused=True)
    assert await master.backend.queues.reserve(SCRAPE, k=10) == []  # paused, fleet-wide
    r = await master.client.delete(f"{BASE}/groups/shop.example", headers=H)
    assert r.status_code == 200
    assert (r.json()["rate"], r.json()["paused"], r.json()["settings"]) == ("10/s", False, None)
    assert len(await master.backend.queues.reserve(SCRAPE, k=10)) == 1


async def test_bad_group_settings_are_422(master: InProcess) -> None:
    for body in [{"concurrency": 0}, {"rate": "fast"}, {"rate": "0/s"}, {"paused": "maybe"},
                 {"other": 1}]:  # fmt: skip
        r = await master.client.put(f"{BASE}/groups/g", json=body, headers=H)
        assert r.status_code == 422, (body, r.text)
    r = await master.client.patch(f"{BASE}/config", json={"group_rate": "lots"}, headers=H)
    assert r.status_code == 422
    r = await master.client.patch(f"{BASE}/config", json={"group_concurrency": 0}, headers=H)
    assert r.status_code == 422
    assert (await master.backend.groups.page(SCRAPE)).groups == []


async def test_group_names_with_slashes_and_unknown_groups(master: InProcess) -> None:
    name = "api/key:alpha"
    await submit(master, "u", name)
    r = await master.client.get(f"{BASE}/groups/{quote(name, safe='')}", headers=H)
    assert r.status_code == 200 and r.json()["pending"] == 1, r.text
    r = await master.client.get(f"{BASE}/groups/{quote(name)}", headers=H)
    assert r.status_code == 200 and r.json()["group"] == name
    r = await master.client.get(f"{BASE}/groups/never-seen", headers=H)
    assert r.status_code == 200 and (r.json()["pending"], r.json()["running"]) == (0, 0)


async def test_groups_of_unknown_or_queueless_types(master: InProcess) -> None:
    r = await master.client.get("/api/v1/automations/nope/groups", headers=H)
    assert r.status_code == 404
    r = await master.client.get(f"/api/v1/automations/{LOOP}/groups", headers=H)
    assert r.status_code == 409


async def test_paging_past_a_page(master: InProcess) -> None:
    tasks = [{"payload": {"url": "u"}, "group": f"g{i:04d}"} for i in range(1205)]
    r = await master.client.post(f"{BASE}/tasks/batch", json={"tasks": tasks}, headers=H)
    assert r.status_code == 202
    first = (await master.client.get(f"{BASE}/groups", headers=H)).json()
    assert len(first["groups"]) == 1000 and first["next"] == "g0999"
    rest = (
        await master.client.get(f"{BASE}/groups", params={"after": first["next"]}, headers=H)
    ).json()
    assert [g["group"] for g in rest["groups"]][:2] == ["g1000", "g1001"]
    assert len(rest["groups"]) == 205 and rest["next"] is None
    small = (await master.client.get(f"{BASE}/groups?limit=2", headers=H)).json()
    assert small["next"] == "g0001"


async def test_scopes(master: InProcess) -> None:
    await submit(master, "u", "g")
    assert (await master.client.get(f"{BASE}/groups", headers=auth(SCOPED))).status_code == 200
    r = await master.client.put(f"{BASE}/groups/g", json={"paused": True}, headers=auth(READ))
    assert r.status_code == 403
    r = await master.client.put(f"{BASE}/groups/g", json={"paused": True}, headers=auth(SCOPED))
    assert r.status_code == 403
    r = await master.client.delete(f"{BASE}/groups/g", headers=auth(READ))
    assert r.status_code == 403
    assert (await master.client.get(f"{BASE}/groups")).status_code == 401


async def test_metrics_show_throttles_and_the_busiest_groups(master: InProcess) -> None:
    for i in range(30):
        for _ in range(i % 4 + 1):
            await submit(master, "u", f"g{i:02d}")
    (res,) = await master.backend.queues.reserve(SCRAPE, k=1)
    assert await master.backend.groups.throttle(SCRAPE, res.body.id, res.token, retry_after=60)
    text = (await master.client.get("/metrics", headers=H)).text
    assert f'fleet_tasks_throttled_total{{type="{SCRAPE}"}} 1.0' in text
    assert f'fleet_groups{{type="{SCRAPE}"}} 30.0' in text
    pending = [line for line in text.splitlines() if line.startswith("fleet_group_pending{")]
    assert len(pending) == 20  # bounded: the busiest only
    assert f'fleet_group_pending{{group="g03",type="{SCRAPE}"}} 4.0' in text
