"""Webhook subscriptions over REST (an in-process master on a memory backend): the
secret shown once and masked after, the filters and changes, the log's pages, and bad
input answered 422 naming the field (a URL that is not http(s), an unknown or missing
event, a masked secret sent back, over-long values), an unknown id 404."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.core.webhooks import Delivery
from tests.master.conftest import ADMIN, InProcess, auth, master  # noqa: F401  (fixture)

H = auth(ADMIN)
GOOD = {"url": "http://127.0.0.1:9/in", "events": ["run.completed", "task.dead"]}


async def test_the_secret_is_shown_once_then_masked(master: InProcess) -> None:  # noqa: F811
    http = master.client
    r = await http.post("/api/v1/webhooks", json={**GOOD, "types": ["a"]}, headers=H)
    assert r.status_code == 201, r.text
    made = r.json()
    secret = made["secret"]
    assert secret.startswith("whsec_") and len(secret) > 40 and made["id"].startswith("wh_")
    assert made["events"] == ["run.completed", "task.dead"] and made["types"] == ["a"]
    listed = (await http.get("/api/v1/webhooks", headers=H)).json()["webhooks"]
    assert [w["id"] for w in listed] == [made["id"]]
    for shown in (listed[0], (await http.get(f"/api/v1/webhooks/{made['id']}", headers=H)).json()):
        assert shown["secret"] != secret and secret[6:-4] not in shown["secret"]
        assert shown["secret"].endswith(secret[-4:]) and "*" in shown["secret"]
    # the mask sent back as a secret is refused, naming it
    r = await http.post("/api/v1/webhooks", json={**GOOD, "secret": listed[0]["secret"]}, headers=H)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "secret"], r.text
    assert "masked" in r.json()["detail"][0]["msg"]
    # a secret of one's own is kept as given
    own = "whsec_" + "QUJD" * 8
    r = await http.post("/api/v1/webhooks", json={**GOOD, "secret": own}, headers=H)
    assert r.status_code == 201 and r.json()["secret"] == own


async def test_change_delete_and_the_log(master: InProcess) -> None:  # noqa: F811
    http = master.client
    made = (await http.post("/api/v1/webhooks", json=GOOD, headers=H)).json()
    url = f"/api/v1/webhooks/{made['id']}"
    r = await http.patch(url, json={"enabled": False, "events": ["tier.changed"]}, headers=H)
    assert r.status_code == 200, r.text
    assert r.json()["enabled"] is False and r.json()["events"] == ["tier.changed"]
    assert r.json()["url"] == GOOD["url"] and "*" in r.json()["secret"]
    hooks = master.backend.webhooks
    for i in range(5):
        at = 100.0 + i
        await hooks.log(
            made["id"], Delivery(f"evt_{i}", "run.completed", "pending", 0, None, None, at, at)
        )
    page = (await http.get(f"{url}/deliveries?limit=2", headers=H)).json()
    assert [d["event_id"] for d in page["deliveries"]] == ["evt_4", "evt_3"]
    assert page["deliveries"][0]["status"] == "pending" and page["next"] == "2"
    last = (await http.get(f"{url}/deliveries?limit=2&cursor=4", headers=H)).json()
    assert [d["event_id"] for d in last["deliveries"]] == ["evt_0"] and last["next"] is None
    r = await http.post(f"{url}/test", headers=H)
    assert r.status_code == 200 and r.json()["queued"] is True, r.text
    depths = await master.backend.queues.depths("fleet-webhooks")
    assert depths.pending == 1  # the test delivery, queued even though disabled
    assert (await http.delete(url, headers=H)).json() == {"id": made["id"], "deleted": True}
    for r in (
        await http.get(url, headers=H),
        await http.delete(url, headers=H),
        await http.get(f"{url}/deliveries", headers=H),
        await http.patch(url, json={"enabled": True}, headers=H),
    ):
        assert r.status_code == 404, r.text


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({**GOOD, "url": "ftp://hooks.example.test/in"}, ["body", "url"]),
        ({**GOOD, "url": "file:///etc/passwd"}, ["body", "url"]),
        ({**GOOD, "url": "hooks.example.test/in"}, ["body", "url"]),
        ({**GOOD, "url": "http:///no-host"}, ["body", "url"]),
        ({**GOOD, "url": "https://h.test/" + "a" * 2100}, ["body", "url"]),
        ({**GOOD, "events": []}, ["body", "events"]),
        ({**GOOD, "events": ["run.completed", "run.exploded"]}, ["body", "events", 1]),
        ({"url": GOOD["url"]}, ["body", "events"]),
        ({**GOOD, "secret": "whsec_********abcd"}, ["body", "secret"]),
        ({**GOOD, "secret": "whsec_short"}, ["body", "secret"]),
        ({**GOOD, "description": "d" * 501}, ["body", "description"]),
        ({**GOOD, "types": ["t" * 201]}, ["body", "types", 0]),
        ({**GOOD, "extra": 1}, ["body", "extra"]),
    ],
)
async def test_bad_input_is_a_422_naming_the_field(
    master: InProcess,  # noqa: F811
    body: dict[str, Any],
    loc: list[Any],
) -> None:
    r = await master.client.post("/api/v1/webhooks", json=body, headers=H)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc, r.text
    assert await master.backend.webhooks.all() == []


async def test_a_patch_is_checked_too(master: InProcess) -> None:  # noqa: F811
    made = (await master.client.post("/api/v1/webhooks", json=GOOD, headers=H)).json()
    r = await master.client.patch(
        f"/api/v1/webhooks/{made['id']}", json={"events": ["nope"]}, headers=H
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "events", 0]


async def test_a_read_token_cannot_subscribe(master: InProcess) -> None:  # noqa: F811
    r = await master.client.post("/api/v1/webhooks", json=GOOD)
    assert r.status_code == 401


async def test_a_patch_changes_only_what_it_names(master: InProcess) -> None:  # noqa: F811
    body = {**GOOD, "types": ["a", "a", "b"], "description": "ops"}
    made = (await master.client.post("/api/v1/webhooks", json=body, headers=H)).json()
    assert made["types"] == ["a", "b"]
    url = f"/api/v1/webhooks/{made['id']}"
    r = await master.client.patch(url, json={"enabled": None, "runs": ["r1"]}, headers=H)
    assert r.status_code == 200, r.text
    shown = r.json()
    assert shown["enabled"] is True and shown["runs"] == ["r1"] and shown["types"] == ["a", "b"]
    assert shown["description"] == "ops" and shown["events"] == GOOD["events"]
    r = await master.client.patch(url, json={"types": None, "description": None}, headers=H)
    assert r.json()["types"] is None and r.json()["description"] == ""
    stored = await master.backend.webhooks.get(made["id"])
    assert stored is not None and stored.secret == made["secret"] and stored.runs == ("r1",)
