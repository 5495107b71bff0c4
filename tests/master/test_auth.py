"""Tokens and scopes: the pure rules, then the 401/403/200 matrix over HTTP."""

from __future__ import annotations

import pytest

from fleet.master.http.auth import Kind, Principal, TokenTable, allowed, bearer_token
from tests.master.conftest import ADMIN, OTHER_SCOPED, READ, SCOPED, InProcess, auth
from tests.master.plugins import SCRAPE


def test_token_table_identifies_each_kind_and_rejects_unknown() -> None:
    table = TokenTable("adm", ["r1", "r2"], {"s1": ["a", "b"]})
    admin = table.identify("adm")
    assert admin is not None and admin.kind is Kind.ADMIN
    read = table.identify("r2")
    assert read is not None and read.kind is Kind.READ
    scoped = table.identify("s1")
    assert scoped is not None and scoped.kind is Kind.SCOPED and scoped.types == {"a", "b"}
    assert table.identify("adm ") is None
    assert table.identify("") is None
    assert table.identify("ad") is None


def test_a_token_listed_twice_gets_its_most_powerful_kind() -> None:
    table = TokenTable("same", ["same"], {"same": ["a"]})
    principal = table.identify("same")
    assert principal is not None and principal.kind is Kind.ADMIN


def test_no_admin_token_configured_accepts_no_admin() -> None:
    assert TokenTable(None).identify("") is None


@pytest.mark.parametrize(
    ("kind", "action", "type_", "expected"),
    [
        (Kind.ADMIN, "admin", None, True),
        (Kind.READ, "read", None, True),
        (Kind.READ, "read_type", "a", True),
        (Kind.READ, "submit", "a", False),
        (Kind.READ, "admin", None, False),
        (Kind.SCOPED, "read_type", "a", True),
        (Kind.SCOPED, "submit", "a", True),
        (Kind.SCOPED, "submit", "b", False),
        (Kind.SCOPED, "read_type", "b", False),
        (Kind.SCOPED, "list", None, True),
        (Kind.SCOPED, "read", None, False),
        (Kind.SCOPED, "admin", None, False),
    ],
)
def test_allowed_matrix(kind: Kind, action: str, type_: str | None, expected: bool) -> None:
    principal = Principal(kind, frozenset({"a"}) if kind is Kind.SCOPED else frozenset())
    assert allowed(principal, action, type_) is expected  # type: ignore[arg-type]


def test_bearer_token_parsing() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer  abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer ") is None
    assert bearer_token(None) is None


SUBMIT = ("POST", f"/api/v1/automations/{SCRAPE}/tasks", {"payload": {"url": "u"}})
# route class -> (method, path, body)
ROUTES = {
    "global_read": ("GET", "/api/v1/pools", None),
    "list": ("GET", "/api/v1/catalog", None),
    "type_read": ("GET", f"/api/v1/automations/{SCRAPE}/queue", None),
    "submit": SUBMIT,
    "admin": ("DELETE", f"/api/v1/automations/{SCRAPE}/dead", None),
    "metrics": ("GET", "/metrics", None),
}
# token -> route class -> status
EXPECTED = {
    None: dict.fromkeys(ROUTES, 401),
    "wrong": dict.fromkeys(ROUTES, 401),
    ADMIN: {
        "global_read": 200,
        "list": 200,
        "type_read": 200,
        "submit": 202,
        "admin": 200,
        "metrics": 200,
    },
    READ: {
        "global_read": 200,
        "list": 200,
        "type_read": 200,
        "submit": 403,
        "admin": 403,
        "metrics": 200,
    },
    SCOPED: {
        "global_read": 403,
        "list": 200,
        "type_read": 200,
        "submit": 202,
        "admin": 403,
        "metrics": 403,
    },
    OTHER_SCOPED: {
        "global_read": 403,
        "list": 200,
        "type_read": 403,
        "submit": 403,
        "admin": 403,
        "metrics": 403,
    },
}


@pytest.mark.parametrize("token", list(EXPECTED), ids=lambda t: str(t))
async def test_auth_matrix(master: InProcess, token: str | None) -> None:
    headers = auth(token) if token else {}
    for route, (method, path, body) in ROUTES.items():
        r = await master.client.request(method, path, json=body, headers=headers)
        assert r.status_code == EXPECTED[token][route], (route, r.text)
        if r.status_code == 401:
            assert r.headers["www-authenticate"] == "Bearer"
        if token and r.status_code in (401, 403):
            assert token not in r.text


async def test_health_needs_no_token_and_scoped_listing_is_filtered(master: InProcess) -> None:
    assert (await master.client.get("/healthz")).status_code == 200
    assert (await master.client.get("/readyz")).status_code == 200
    r = await master.client.get("/api/v1/catalog", headers=auth(SCOPED))
    assert set(r.json()) == {SCRAPE}
    r = await master.client.get("/api/v1/catalog", headers=auth(OTHER_SCOPED))
    assert r.json() == {}


async def test_bad_bearer_scheme_is_401(master: InProcess) -> None:
    r = await master.client.get("/api/v1/catalog", headers={"Authorization": f"Basic {ADMIN}"})
    assert r.status_code == 401
