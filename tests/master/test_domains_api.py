"""A type's domains and their proxy tiers over REST against a live master (real HTTP), on
SQLite and Redis: the page by name (after, limit, next), tier names from the type's
``proxy_tiers``, the counts by kind and by tier, one domain, PUT by name and by index
(with its ``tier`` event), DELETE, the 404s and 422s, the admin token for writes, odd
domain strings, and the ``/metrics`` families."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from fleet.backends.base import Backend
from fleet.core.access.router import DOMAINS_TOPIC
from fleet.core.blocks.verdicts import VerdictKind
from fleet.core.tiers import TierRule
from tests.master import live_backend
from tests.master.conftest import ADMIN, READ, SCOPED, InProcess, auth
from tests.master.plugins import LOOP, SCRAPE
from tests.master.test_contract import assert_documented

# The live master and its backend, on SQLite and Redis (tests/master/live_backend.py).
backend_url, live, http, backend = (
    live_backend.backend_url,
    live_backend.live,
    live_backend.http,
    live_backend.backend,
)

A = f"/api/v1/automations/{SCRAPE}"
TIERS = [
    {"name": "direct", "direct": True},
    {"name": "datacenter", "proxy_url": "http://127.0.0.1:9"},
    {"name": "residential", "proxy_url": "http://127.0.0.1:10"},
]
NAMES = ["direct", "datacenter", "residential"]
#: The rule's numbers (the stored proxy_tiers make it three tiers whatever this says).
RULE = TierRule(tiers=3, escalate_after=3)
#: The domains :func:`seed` records, by name.
ALL = ["a.test", "b.test", "c.test", "d.test", "e.test"]


async def record(
    b: Backend,
    domain: str,
    kind: VerdictKind,
    *,
    tier: int = 0,
    vendor: str | None = None,
    count: int = 1,
    automation_type: str = SCRAPE,
) -> None:
    await b.domains.record(
        automation_type, domain, tier=tier, kind=kind, vendor=vendor, rule=RULE, count=count
    )


async def seed(http: httpx.AsyncClient, b: Backend) -> None:
    """Three tiers stored for SCRAPE, then five domains:

    - ``a.test``: 5 ok at direct;
    - ``b.test``: 3 blocked (akamai) at direct: up to datacenter; 2 ok and a challenge
      (cloudflare) there;
    - ``c.test``: 2 throttled and a captcha (hcaptcha) at direct;
    - ``d.test``: 1 ok; ``e.test``: 1 blocked.
    """
    r = await http.patch(f"{A}/config", json={"proxy_tiers": TIERS}, headers=auth(ADMIN))
    assert r.status_code == 200, r.text
    await record(b, "a.test", "ok", count=5)
    for _ in range(3):
        await record(b, "b.test", "blocked", vendor="akamai")
    await record(b, "b.test", "ok", tier=1, count=2)
    await record(b, "b.test", "challenge", tier=1, vendor="cloudflare")
    await record(b, "c.test", "throttled", count=2)
    await record(b, "C.TEST", "captcha", vendor="hcaptcha")  # kept lower case
    await record(b, "e.test", "blocked")
    await record(b, "d.test", "ok")


async def get(http: httpx.AsyncClient, path: str, token: str = READ, **params: Any) -> Any:
    return await http.get(f"{A}/domains{path}", params=params, headers=auth(token))


async def put(
    http: httpx.AsyncClient, domain: str, body: Any, token: str = ADMIN, base: str = A
) -> httpx.Response:
    return await http.put(f"{base}/domains/{domain}", json=body, headers=auth(token))


async def test_the_page_by_name_with_tier_names_and_counts(
    http: httpx.AsyncClient, backend: Backend
) -> None:
    await seed(http, backend)
    r = await get(http, "")
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["type"] == SCRAPE and page["tiers"] == NAMES and page["next"] is None
    assert [d["domain"] for d in page["items"]] == ALL
    a, b, c, d, e = page["items"]
    assert (a["tier"], a["tier_index"], a["ok"]) == ("direct", 0, 5)
    assert a["blocked"] == {"blocked": 0, "challenge": 0, "captcha": 0, "throttled": 0}
    assert a["by_tier"] == {"direct": {"ok": 5}} and a["last_verdict"] == "ok"
    assert (b["tier"], b["tier_index"], b["changes"]) == ("datacenter", 1, 1)
    assert b["ok"] == 2 and b["blocked"] == {
        "blocked": 3, "challenge": 1, "captcha": 0, "throttled": 0}  # fmt: skip
    assert b["by_tier"] == {"direct": {"blocked": 3}, "datacenter": {"challenge": 1, "ok": 2}}
    assert (b["last_verdict"], b["last_vendor"]) == ("challenge", "cloudflare")
    assert b["window_blocks"] == 1 and b["since"] >= a["since"] > 0
    assert b["last_at"] is not None and b["last_at"] >= b["since"]
    assert c["tier"] == "direct" and c["ok"] == 0
    assert c["blocked"] == {"blocked": 0, "challenge": 0, "captcha": 1, "throttled": 2}
    assert (c["last_verdict"], c["last_vendor"]) == ("captcha", "hcaptcha")
    assert (d["ok"], e["blocked"]["blocked"], e["tier"]) == (1, 1, "direct")
    assert e["window_blocks"] == 1 and e["last_vendor"] is None

    # Pages of two: next is the after of the next page, and the last one says None.
    seen: list[str] = []
    after: str | None = None
    nexts = []
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"after": after} if after else {})
        page = (await get(http, "", **params)).json()
        assert len(page["items"]) <= 2 and page["tiers"] == NAMES
        seen += [d["domain"] for d in page["items"]]
        nexts.append(page["next"])
        if page["next"] is None:
            break
        after = page["next"]
    assert seen == ALL
    assert nexts == ["b.test", "d.test", None]
    # after any string: the domains past it by name (one that was never seen too)
    assert [d["domain"] for d in (await get(http, "", after="c")).json()["items"]] == [
        "c.test", "d.test", "e.test"]  # fmt: skip
    assert (await get(http, "", after="e.test")).json() == {
        "type": SCRAPE, "tiers": NAMES, "items": [], "next": None}  # fmt: skip
    for bad in ({"limit": 0}, {"limit": 501}, {"limit": "x"}, {"after": "x" * 254}):
        assert (await get(http, "", **bad)).status_code == 422, bad
    assert len((await get(http, "", limit=500)).json()["items"]) == 5
    # a token scoped to the type reads it; one scoped elsewhere does not
    assert (await get(http, "", token=SCOPED)).status_code == 200


async def test_one_domain_and_the_404s(http: httpx.AsyncClient, backend: Backend) -> None:
    await seed(http, backend)
    r = await get(http, "/b.test")
    assert r.status_code == 200, r.text
    one = r.json()
    assert (one["domain"], one["tier"], one["ok"]) == ("b.test", "datacenter", 2)
    listed = (await get(http, "", limit=2)).json()["items"][1]
    assert one == listed
    assert (await get(http, "/B.Test")).json()["domain"] == "b.test"  # any case
    r = await get(http, "/nowhere.test")
    assert r.status_code == 404 and "nowhere.test" in r.json()["detail"]
    for path in ("/api/v1/automations/no-such-type/domains",
                 "/api/v1/automations/no-such-type/domains/b.test"):  # fmt: skip
        r = await http.get(path, headers=auth(ADMIN))
        assert r.status_code == 404, (path, r.text)
    r = await put(http, "b.test", {"tier": "direct"}, base="/api/v1/automations/no-such-type")
    assert r.status_code == 404
    r = await http.delete("/api/v1/automations/no-such-type/domains/b.test", headers=auth(ADMIN))
    assert r.status_code == 404
    # A type of the catalog the test never configured: no proxy_tiers, no domain.
    r = await http.get(f"/api/v1/automations/{LOOP}/domains", headers=auth(READ))
    assert r.json() == {"type": LOOP, "tiers": [], "items": [], "next": None}


async def test_put_by_name_and_by_index_publishes_a_tier_event(
    http: httpx.AsyncClient, backend: Backend
) -> None:
    await seed(http, backend)
    async with await backend.events.subscribe(DOMAINS_TOPIC) as sub:

        async def event() -> dict[str, Any]:
            topic, message = await asyncio.wait_for(anext(sub), timeout=10)
            assert topic == DOMAINS_TOPIC
            assert isinstance(message, dict)
            return message

        r = await put(http, "a.test", {"tier": "residential"})
        assert r.status_code == 200, r.text
        assert (r.json()["tier"], r.json()["tier_index"]) == ("residential", 2)
        assert r.json()["ok"] == 5 and r.json()["changes"] == 1  # its verdicts are kept
        assert await event() == {
            "type": SCRAPE, "domain": "a.test", "tier": "residential", "tier_index": 2,
            "change": "set", "kind": None, "vendor": None}  # fmt: skip
        assert (await get(http, "/a.test")).json() == r.json()

        r = await put(http, "b.test", {"tier": 0})  # an index: back to the first tier
        assert r.status_code == 200, r.text
        assert (r.json()["tier"], r.json()["window_blocks"]) == ("direct", 0)
        ev = await event()
        assert (ev["domain"], ev["tier"], ev["tier_index"], ev["change"]) == (
            "b.test", "direct", 0, "set")  # fmt: skip
        got = (await get(http, "/b.test")).json()
        assert got["tier"] == "direct" and got["by_tier"]["datacenter"] == {"challenge": 1, "ok": 2}

        # A domain without a verdict yet: put at a tier, it is known from now on.
        r = await put(http, "New.Test", {"tier": 1})
        assert r.status_code == 200 and r.json()["domain"] == "new.test"
        assert r.json()["tier"] == "datacenter" and r.json()["ok"] == 0
        assert (await event())["domain"] == "new.test"
        assert (await get(http, "/new.test")).json()["tier"] == "datacenter"
        names = [d["domain"] for d in (await get(http, "")).json()["items"]]
        assert names == ["a.test", "b.test", "c.test", "d.test", "e.test", "new.test"]

        # What the workers read moves with it: the backend's own record.
        state = await backend.domains.get(SCRAPE, "a.test")
        assert state is not None and state.tier == 2


async def test_put_refuses_what_the_type_lacks_and_needs_the_admin(
    http: httpx.AsyncClient, backend: Backend
) -> None:
    await seed(http, backend)
    bad_bodies: list[Any] = [
        {"tier": "mobile"},
        {"tier": "Direct"},
        {"tier": 3},
        {"tier": -1},
        {"tier": 1.0},
        {"tier": "1"},
        {"tier": True},
        {"tier": None},
        {"tier": "direct", "force": True},
        {},
        ["direct"],
        "direct",
    ]
    for body in bad_bodies:
        r = await put(http, "b.test", body)
        assert r.status_code == 422, (body, r.text)
    r = await put(http, "b.test", {"tier": "mobile"})
    assert "direct, datacenter, residential" in str(r.json()["detail"])
    assert (await get(http, "/b.test")).json()["tier"] == "datacenter"  # untouched
    assert (await put(http, "x.test", {"tier": 7})).status_code == 422
    assert (await get(http, "/x.test")).status_code == 404  # not created
    # The type without proxy_tiers: only its one tier, by index.
    assert (await put(http, "b.test", {"tier": "direct"}, base=f"/api/v1/automations/{LOOP}")
            ).status_code == 422  # fmt: skip
    r = await put(http, "loop.test", {"tier": 0}, base=f"/api/v1/automations/{LOOP}")
    assert r.status_code == 200 and r.json()["tier"] is None and r.json()["tier_index"] == 0
    assert (await put(http, "loop.test", {"tier": 1}, base=f"/api/v1/automations/{LOOP}")
            ).status_code == 422  # fmt: skip

    # Writes are the admin's: a read or a scoped token reads only.
    for token in (READ, SCOPED):
        r = await put(http, "b.test", {"tier": "direct"}, token=token)
        assert r.status_code == 403, (token, r.text)
        r = await http.delete(f"{A}/domains/b.test", headers=auth(token))
        assert r.status_code == 403, (token, r.text)
    assert (await put(http, "b.test", {"tier": "direct"}, token="wrong")).status_code == 401
    r = await http.put(f"{A}/domains/b.test", json={"tier": "direct"})
    assert r.status_code == 401
    got = (await get(http, "/b.test")).json()
    assert got["tier"] == "datacenter" and got["ok"] == 2


async def test_delete_forgets(http: httpx.AsyncClient, backend: Backend) -> None:
    await seed(http, backend)
    r = await http.delete(f"{A}/domains/B.test", headers=auth(ADMIN))
    assert r.status_code == 200, r.text
    assert r.json() == {"type": SCRAPE, "domain": "b.test", "forgotten": True}
    assert (await get(http, "/b.test")).status_code == 404
    r = await http.delete(f"{A}/domains/b.test", headers=auth(ADMIN))
    assert r.status_code == 404
    names = [d["domain"] for d in (await get(http, "")).json()["items"]]
    assert names == ["a.test", "c.test", "d.test", "e.test"]
    assert await backend.domains.get(SCRAPE, "b.test") is None
    # It starts again at the first tier.
    await record(backend, "b.test", "ok")
    again = (await get(http, "/b.test")).json()
    assert (again["tier"], again["ok"], again["changes"]) == ("direct", 1, 0)


async def test_odd_domain_strings_are_a_422_or_a_404_never_a_500(
    http: httpx.AsyncClient, backend: Backend
) -> None:
    await seed(http, backend)
    odd = [
        "a%20b.test",  # a space
        "a%09b",  # a tab
        "%0A",
        "a%00b",
        "x" * 254,  # longer than a host name
        "x" * 5000,
        "a%2Fb",  # a slash
        "%2E%2E",  # (a literal ".." never reaches the master: clients drop the segment)
        "%2E",
        "%F0%9F%92%A5.test",  # an emoji
        "b%C3%BCcher.test",  # IDN, not punycode
        "%FF%FE",  # not UTF-8
        "a:b",
        "%7F",
        "a%E2%80%8Bb",  # a zero-width space
        "'%3B--",
        "%25",
    ]
    for domain in odd:
        r = await http.get(f"{A}/domains/{domain}", headers=auth(ADMIN))
        assert r.status_code in (404, 422), (domain, r.text)
        r = await http.put(f"{A}/domains/{domain}", json={"tier": "direct"}, headers=auth(ADMIN))
        # A string without spaces or controls is kept as a domain: a PUT creates it, and
        # a DELETE then forgets it.
        created = r.status_code == 200
        assert created or r.status_code in (404, 405, 422), (domain, r.text)
        r = await http.delete(f"{A}/domains/{domain}", headers=auth(ADMIN))
        assert r.status_code in ((200,) if created else (404, 405, 422)), (domain, r.text)
    for after in ("%00", " ", "\u00fc", "\ud7ff"):
        r = await get(http, "", after=after)
        assert r.status_code in (200, 422), (after, r.text)
    # A domain of 253 characters is one; the API answers it.
    longest = "x" * 249 + ".com"
    await record(backend, longest, "ok")
    r = await get(http, f"/{longest}")
    assert r.status_code == 200 and r.json()["domain"] == longest
    # None of it broke the page.
    assert (await get(http, "")).status_code == 200


async def test_metrics_show_each_domains_tier_and_verdicts(
    http: httpx.AsyncClient, backend: Backend
) -> None:
    await seed(http, backend)
    r = await http.get("/metrics", headers=auth(READ))
    assert r.status_code == 200, r.text
    lines = r.text.splitlines()

    def value(name: str, **labels: str) -> float:
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        found = [line for line in lines if line.startswith(f"{name}{{{want}}} ")]
        assert len(found) == 1, (name, labels, [x for x in lines if x.startswith(name)])
        return float(found[0].rsplit(" ", 1)[1])

    assert "# TYPE fleet_domain_tier gauge" in lines
    assert "# TYPE fleet_domain_verdicts gauge" in lines
    assert value("fleet_domain_tier", domain="a.test", type=SCRAPE) == 0
    assert value("fleet_domain_tier", domain="b.test", type=SCRAPE) == 1
    assert value("fleet_domain_verdicts", domain="b.test", kind="blocked", type=SCRAPE) == 3
    assert value("fleet_domain_verdicts", domain="b.test", kind="ok", type=SCRAPE) == 2
    assert value("fleet_domain_verdicts", domain="c.test", kind="throttled", type=SCRAPE) == 2
    assert value("fleet_domain_verdicts", domain="c.test", kind="captcha", type=SCRAPE) == 1
    await put(http, "a.test", {"tier": "residential"})
    r = await http.get("/metrics", headers=auth(READ))
    lines = r.text.splitlines()
    assert value("fleet_domain_tier", domain="a.test", type=SCRAPE) == 2


async def test_every_domain_answer_is_its_documented_model(master: InProcess) -> None:
    h = auth(ADMIN)
    r = await master.client.patch(f"{A}/config", json={"proxy_tiers": TIERS}, headers=h)
    assert r.status_code == 200, r.text
    for _ in range(3):
        await record(master.backend, "b.test", "blocked", vendor="akamai")
    await record(master.backend, "a.test", "ok", count=4)
    base = "/api/v1/automations/{automation_type}/domains"
    r = await master.client.get(f"{A}/domains?limit=1", headers=h)
    assert r.status_code == 200 and r.json()["next"] == "a.test"
    assert_documented(master, "get", base, r)
    r = await master.client.get(f"{A}/domains/b.test", headers=h)
    assert r.json()["tier"] == "datacenter"
    assert_documented(master, "get", base + "/{domain}", r)
    r = await master.client.put(f"{A}/domains/b.test", json={"tier": "direct"}, headers=h)
    assert_documented(master, "put", base + "/{domain}", r)
    r = await master.client.delete(f"{A}/domains/b.test", headers=h)
    assert_documented(master, "delete", base + "/{domain}", r)
    for method, status in (("get", 404), ("put", 422), ("delete", 404)):
        body = {"tier": "mobile"} if method == "put" else None
        r = await master.client.request(method, f"{A}/domains/b.test", headers=h, json=body)
        assert r.status_code == status, (method, r.text)
