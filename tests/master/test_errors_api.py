"""A type's error groups over REST against a live master (real HTTP), on SQLite and
Redis: the page newest first with its cursor, one group with its traceback and
snapshots, the snapshot bodies (HTML as sandboxed text, the PNG), the 404s (unknown type,
group, snapshot, a snapshot without a screenshot) and 422s (bad cursor, bad ids), the
read token of another type refused; the answers are the documented models."""

from __future__ import annotations

import httpx

from fleet.backends.base import Backend
from fleet.core.error_groups import GroupDelta, Sample, Snapshot, SnapshotMeta
from fleet.core.records import now
from tests.master import live_backend
from tests.master.conftest import ADMIN, READ, InProcess, auth
from tests.master.plugins import SCRAPE
from tests.master.test_contract import assert_documented

backend_url, live, http, backend = (
    live_backend.backend_url,
    live_backend.live,
    live_backend.http,
    live_backend.backend,
)

A = f"/api/v1/automations/{SCRAPE}/errors"
G1, G2 = "00000000000000a1", "00000000000000b2"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
HTML = b"<html><body><script>alert(1)</script><p>price: none</p></body></html>"


async def seed(b: Backend) -> None:
    at = now()
    sample = Sample("task-1", "ValueError: no price at https://shop.test/1", "Traceback ...")
    await b.errors.record(
        SCRAPE,
        [
            GroupDelta(G1, "ValueError", "no price at <url>", "shop.py:parse", 300, at - 60,
                       at, ("shop.test",), sample),
            GroupDelta(G2, "KeyError", "<str>", "shop.py:item", 2, at - 90, at - 30),
        ],
    )  # fmt: skip
    meta = SnapshotMeta("ab12", at, task_id="task-1", url="https://shop.test/1",
                        html_bytes=len(HTML), png_bytes=len(PNG))  # fmt: skip
    assert await b.errors.put(SCRAPE, G1, Snapshot(meta, HTML, PNG))
    only_html = SnapshotMeta("cd34", at - 1, html_bytes=len(HTML))
    assert await b.errors.put(SCRAPE, G1, Snapshot(only_html, HTML, None))


async def test_pages_one_group_and_bodies(http: httpx.AsyncClient, backend: Backend) -> None:
    await seed(backend)
    h = auth(READ)
    r = await http.get(A, params={"limit": 1}, headers=h)
    assert r.status_code == 200, r.text
    first = r.json()
    assert [i["group"] for i in first["items"]] == [G1] and first["cursor"]
    item = first["items"][0]
    assert (item["count"], item["exception"], item["message"]) == (
        300,
        "ValueError",
        "no price at <url>",
    )
    assert item["domains"] == ["shop.test"] and item["sample_task_id"] == "task-1"
    assert "traceback" not in item and "snapshots" not in item
    r = await http.get(A, params={"limit": 1, "cursor": first["cursor"]}, headers=h)
    assert [i["group"] for i in r.json()["items"]] == [G2] and r.json()["cursor"] is None

    r = await http.get(f"{A}/{G1}", headers=h)
    assert r.status_code == 200, r.text
    g = r.json()
    assert g["traceback"] == "Traceback ..."
    assert [s["id"] for s in g["snapshots"]] == ["ab12", "cd34"]
    assert g["snapshots"][0]["png_bytes"] == len(PNG) and g["snapshots"][1]["png_bytes"] == 0

    r = await http.get(f"{A}/{G1}/snapshots/ab12/html", headers=h)
    assert r.status_code == 200 and r.content == HTML
    assert r.headers["content-type"].startswith("text/plain")
    assert r.headers["content-security-policy"].startswith("sandbox")
    r = await http.get(f"{A}/{G1}/snapshots/ab12/screenshot", headers=h)
    assert r.status_code == 200 and r.content == PNG and r.headers["content-type"] == "image/png"
    r = await http.get(f"{A}/{G1}/snapshots/cd34/screenshot", headers=h)
    assert r.status_code == 404 and "screenshot" in r.json()["detail"]


async def test_refusals(http: httpx.AsyncClient, backend: Backend) -> None:
    await seed(backend)
    h = auth(ADMIN)
    for path, status, word in [
        ("/api/v1/automations/nope/errors", 404, "nope"),
        (f"{A}/{'f' * 16}", 404, "error group"),
        (f"{A}/{G1}/snapshots/ffff/html", 404, "snapshot"),
        (f"{A}?cursor=garbage", 422, "cursor"),
        (f"{A}?limit=0", 422, "limit"),
        (f"{A}/NOTHEX", 422, "group"),
    ]:
        r = await http.get(path, headers=h)
        assert r.status_code == status, (path, r.text)
        assert word in r.text, (path, r.text)
    assert (await http.get(A)).status_code == 401


async def test_answers_are_documented(master: InProcess) -> None:
    await seed(master.backend)
    h = auth(ADMIN)
    r = await master.client.get(A, headers=h)
    assert_documented(master, "get", "/api/v1/automations/{automation_type}/errors", r)
    r = await master.client.get(f"{A}/{G1}", headers=h)
    assert_documented(master, "get", "/api/v1/automations/{automation_type}/errors/{group}", r)
