"""Identity pools over REST against a live master (real HTTP), on memory, SQLite and
Redis (issue 43, items 2 and 6): explicit and generated creates, a 422 naming the field
with nothing written, 413, 404 with did-you-mean, masking, paging, retire, revive and
delete."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.master.conftest import ADMIN, READ, SCOPED, InProcess, auth, memory_url
from tests.master.test_contract import assert_documented

API = "/api/v1/identities"
SECRET = "s3cret-pw"


@pytest.fixture(params=["memory", "sqlite", "redis"])
def live(request: pytest.FixtureRequest, live_factory: Any, tmp_path: Path) -> Any:
    """A live master on each backend."""
    if request.param == "memory":
        url = memory_url()
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'fleet.db'}"
    else:
        url = request.getfixturevalue("redis_url")
    return live_factory(url, sweeper=False)


@pytest.fixture
def http(live: Any) -> Any:
    with httpx.Client(base_url=live.url, timeout=30) as client:
        yield client


def identity(n: int, **changes: Any) -> dict[str, Any]:
    """An identity with a secret in each place one may hide."""
    base: dict[str, Any] = {
        "id": f"acct-{n}",
        "proxy": f"http://user{n}:{SECRET}@proxy{n}.test:8000",
        "fingerprint": {
            "user_agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
            "headers": [["Accept", "text/html"], ["Authorization", f"Bearer {SECRET}"]],
            "locale": "en-US",
            "timezone": "America/New_York",
            "viewport": {"width": 1280, "height": 800},
            "platform": "Linux x86_64",
        },
        "cookies": [{"name": "sid", "value": f"{SECRET}-{n}", "domain": "shop.test"}],
        "account": {"login": f"bob{n}", "password": SECRET},
    }
    base.update(changes)
    return base


def post(http: httpx.Client, pool: str, body: Any, token: str = ADMIN) -> httpx.Response:
    return http.post(f"{API}/{pool}", json=body, headers=auth(token))


def get(http: httpx.Client, path: str, token: str = ADMIN, **params: Any) -> httpx.Response:
    return http.get(f"{API}{path}", params=params, headers=auth(token))


def test_explicit_create_lists_pages_and_replaces(http: httpx.Client) -> None:
    r = post(http, "shop", {"identities": [identity(n) for n in range(5)]})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "pool": "shop",
        "created": 5,
        "replaced": 0,
        "ids": [f"acct-{n}" for n in range(5)],
    }
    again = post(http, "shop", {"identities": [identity(1, proxy=None), identity(9)]})
    assert again.json()["created"] == 1 and again.json()["replaced"] == 1
    assert get(http, "/shop/acct-1").json()["proxy"] is None  # the document replaced
    pools = get(http, "", token=READ).json()["pools"]
    ready = {"ready": 6, "leased": 0, "cooling": 0, "retired": 0}
    assert pools == [{"pool": "shop", "total": 6, "counts": ready}]
    seen: list[str] = []
    page = get(http, "/shop", token=READ, limit=4).json()
    assert page["counts"] == ready and len(page["items"]) == 4 and page["next"] == "acct-3"
    seen += [i["id"] for i in page["items"]]
    page = get(http, "/shop", token=READ, limit=4, after=page["next"]).json()
    seen += [i["id"] for i in page["items"]]
    assert page["next"] is None
    assert seen == ["acct-0", "acct-1", "acct-2", "acct-3", "acct-4", "acct-9"]


def test_secrets_are_masked_unless_the_admin_reveals(http: httpx.Client) -> None:
    assert post(http, "shop", {"identities": [identity(1)]}).status_code == 200
    for token in (READ, ADMIN):
        for path in ("/shop/acct-1", "/shop"):
            r = get(http, path, token=token)
            assert r.status_code == 200, r.text
            assert SECRET not in r.text, (token, path)
    one = get(http, "/shop/acct-1", token=READ).json()
    assert one["proxy"] == "http://user1:********@proxy1.test:8000"
    assert one["cookies"][0]["value"] == "********" and one["cookies"][0]["name"] == "sid"
    assert one["account"] == {"login": "bob1", "password": "********"}
    assert one["fingerprint"]["headers"] == [["Accept", "text/html"], ["Authorization", "********"]]
    whole = get(http, "/shop/acct-1", reveal="true").json()
    assert whole["proxy"] == f"http://user1:{SECRET}@proxy1.test:8000"
    assert whole["cookies"][0]["value"] == f"{SECRET}-1" and whole["account"]["password"] == SECRET
    assert SECRET in get(http, "/shop", reveal="true").text
    denied = get(http, "/shop/acct-1", token=READ, reveal="true")
    assert denied.status_code == 403 and "admin" in denied.json()["detail"]
    # identities are fleet-wide: a scoped token reads none, a read token writes none
    assert get(http, "", token=SCOPED).status_code == 403
    assert post(http, "shop", {"identities": [identity(2)]}, token=READ).status_code == 403
    assert http.delete(f"{API}/shop/acct-1", headers=auth(READ)).status_code == 403


def test_a_bad_identity_is_a_422_naming_its_field_and_nothing_is_written(
    http: httpx.Client,
) -> None:
    batch = [identity(n) for n in range(5)]
    del batch[3]["cookies"][0]["domain"]
    r = post(http, "shop", {"identities": batch})
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["detail"]] == [
        ["body", "identities", "3", "cookies", "0", "domain"]
    ]
    twice = post(http, "shop", {"identities": [identity(1), identity(2), identity(1)]})
    assert twice.status_code == 422 and twice.json()["detail"][0]["loc"][-2:] == ["2", "id"]
    several = [identity(0, proxy="ftp://x"), identity(1), identity(2, cookies=[{"name": 1}])]
    both = post(http, "shop", {"identities": several}).json()["detail"]
    assert [e["loc"][2:] for e in both] == [["0", "proxy"], ["2", "cookies", "0", "name"]]
    assert post(http, "shop", {}).status_code == 422
    plan = {"identities": [identity(1)], "generate": {"count": 1}}
    assert post(http, "shop", plan).status_code == 422
    assert post(http, "bad name!", {"identities": [identity(1)]}).status_code in (404, 422)
    assert get(http, "").json() == {"pools": []}  # not one of them written
    assert get(http, "/shop").status_code == 404


def test_more_than_a_thousand_is_a_413(http: httpx.Client) -> None:
    many = [{"id": f"i{n}"} for n in range(1001)]
    r = post(http, "shop", {"identities": many})
    assert r.status_code == 413 and "1000" in r.json()["detail"]
    r = post(http, "shop", {"generate": {"count": 1001}})
    assert r.status_code == 413
    assert post(http, "shop", {"identities": many[:1000]}).json()["created"] == 1000
    assert get(http, "").json()["pools"][0]["total"] == 1000


def test_a_create_may_pass_the_default_body_limit(http: httpx.Client) -> None:
    jar = [{"name": f"c{k}", "value": "v" * 2000, "domain": "shop.test"} for k in range(4)]
    many = [identity(n, cookies=jar) for n in range(200)]  # about 1.7 MB, over 1 MiB
    r = post(http, "big", {"identities": many})
    assert r.status_code == 200, r.text[:300]
    assert r.json()["created"] == 200


def test_unknown_pool_and_id_are_404s_with_did_you_mean(http: httpx.Client) -> None:
    assert post(http, "scrapers", {"identities": [identity(1)]}).status_code == 200
    for r in (
        get(http, "/scraper"),
        get(http, "/scraper/acct-1"),
        http.post(f"{API}/scraper/acct-1/retire", headers=auth(ADMIN)),
        http.delete(f"{API}/scraper/acct-1", headers=auth(ADMIN)),
    ):
        assert r.status_code == 404, r.text
        assert r.json()["detail"] == (
            "unknown identity pool 'scraper': it holds no identity; did you mean 'scrapers'?"
        )
    r = get(http, "/scrapers/acct-2")
    assert (
        r.status_code == 404
        and r.json()["detail"] == "unknown identity 'acct-2' in pool 'scrapers'"
    )
    assert get(http, "/elsewhere").json()["detail"].endswith("holds no identity")


def test_retire_revive_delete(http: httpx.Client) -> None:
    ids = [identity(1), identity(2, id="team/alice")]  # a slash in an id
    assert post(http, "shop", {"identities": ids}).status_code == 200
    r = http.post(
        f"{API}/shop/acct-1/retire",
        json={"reason": f"banned via http://u:{SECRET}@p.test:1"},
        headers=auth(ADMIN),
    )
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "retired" and SECRET not in r.text
    assert r.json()["stats"]["last_reason"].startswith("banned via http://********@")
    counts = get(http, "/shop").json()["counts"]
    assert counts == {"ready": 1, "leased": 0, "cooling": 0, "retired": 1}
    r = http.post(f"{API}/shop/acct-1/revive", headers=auth(ADMIN))
    assert r.json()["state"] == "ready"
    assert http.post(f"{API}/shop/acct-1/retire", headers=auth(READ)).status_code == 403
    r = http.post(f"{API}/shop/team%2Falice/retire", headers=auth(ADMIN))  # no body
    assert r.status_code == 200 and r.json()["id"] == "team/alice"
    assert get(http, "/shop/team%2Falice").json()["state"] == "retired"
    r = http.delete(f"{API}/shop/acct-1", headers=auth(ADMIN))
    assert r.json() == {"pool": "shop", "id": "acct-1", "deleted": True}
    assert get(http, "/shop/acct-1").status_code == 404
    assert http.delete(f"{API}/shop/acct-1", headers=auth(ADMIN)).status_code == 404
    assert http.delete(f"{API}/shop/team%2Falice", headers=auth(ADMIN)).status_code == 200
    assert get(http, "").json() == {"pools": []}  # the pool went with its last identity


def test_generate_follows_each_proxys_country(http: httpx.Client) -> None:
    plan = {
        "count": 6,
        "proxies": [f"http://user-{{id}}:{SECRET}@de.test:8000", "http://jp.test:8000"],
        "countries": ["de", "JP"],
        "browsers": ["chrome", "firefox", "safari"],
        "id_prefix": "gen-",
    }
    r = post(http, "gen", {"generate": plan})
    assert r.status_code == 200, r.text
    made = r.json()
    assert made["created"] == 6 and all(i.startswith("gen-") for i in made["ids"])
    for n, identity_id in enumerate(made["ids"]):
        one = get(http, f"/gen/{identity_id}", reveal="true").json()
        fp = one["fingerprint"]
        headers = {name.lower(): value for name, value in fp["headers"]}
        if n % 2 == 0:
            assert one["proxy"] == f"http://user-{identity_id}:{SECRET}@de.test:8000"
            assert (fp["locale"], fp["timezone"]) == ("de-DE", "Europe/Berlin")
            assert headers["accept-language"].startswith("de-DE,de;q=0.9")
        else:
            assert one["proxy"] == "http://jp.test:8000"
            assert (fp["locale"], fp["timezone"]) == ("ja-JP", "Asia/Tokyo")
            assert headers["accept-language"].startswith("ja-JP,ja;q=0.9")
        browser = ("Chrome/", "Firefox/", "Safari/")[n % 3]
        assert browser in fp["user_agent"] and "accept" in headers
        assert fp["viewport"]["width"] > 0 and fp["platform"]
        assert one["cookies"] == [] and one["account"] is None and one["state"] == "ready"
    assert get(http, "/gen").json()["counts"]["ready"] == 6


def test_a_bad_plan_is_a_422_naming_its_field(http: httpx.Client) -> None:
    cases = [
        ({"count": 1, "countries": ["US", "XX"]}, ["generate", "countries", "1"]),
        ({"count": 1, "browsers": ["lynx"]}, ["generate", "browsers", "0"]),
        ({"count": 1, "proxies": ["a", "b"], "countries": ["DE", "FR", "US"]},
         ["generate", "proxies", "0"]),
        ({"count": 1, "proxies": ["http://a:1", "http://b:1"], "countries": ["DE", "FR", "US"]},
         ["generate", "countries"]),
        ({"count": 0}, ["generate", "count"]),
    ]  # fmt: skip
    for plan, loc in cases:
        r = post(http, "gen", {"generate": plan})
        assert r.status_code == 422, (plan, r.text)
        assert r.json()["detail"][0]["loc"] == ["body", *loc], (plan, r.text)
    assert get(http, "").json() == {"pools": []}


def test_generate_without_browserforge_is_a_501(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "browserforge.fingerprints", None)  # import fails
    r = post(http, "gen", {"generate": {"count": 2}})
    assert r.status_code == 501
    assert "fleet-automation[identities]" in r.json()["detail"]
    assert post(http, "gen", {"identities": [identity(1)]}).status_code == 200


async def test_every_identity_answer_is_its_documented_model(master: InProcess) -> None:
    h = auth(ADMIN)
    made = await master.client.post(
        f"{API}/shop", json={"identities": [identity(1), identity(2)]}, headers=h
    )
    assert_documented(master, "post", "/api/v1/identities/{pool}", made)
    generated = await master.client.post(f"{API}/shop", json={"generate": {"count": 1}}, headers=h)
    assert_documented(master, "post", "/api/v1/identities/{pool}", generated)
    for path, route in (
        ("", "/api/v1/identities"),
        ("/shop", "/api/v1/identities/{pool}"),
        ("/shop/acct-1", "/api/v1/identities/{pool}/{identity_id}"),
    ):
        r = await master.client.get(f"{API}{path}", headers=h)
        assert r.status_code == 200, r.text
        assert_documented(master, "get", route, r)
    for action in ("retire", "revive"):
        r = await master.client.post(f"{API}/shop/acct-1/{action}", headers=h)
        assert_documented(
            master, "post", f"/api/v1/identities/{{pool}}/{{identity_id}}/{action}", r
        )
    r = await master.client.delete(f"{API}/shop/acct-1", headers=h)
    assert_documented(master, "delete", "/api/v1/identities/{pool}/{identity_id}", r)
