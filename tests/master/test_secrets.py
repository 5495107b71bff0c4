"""Secrets stay secret: SecretStr fields, keys naming a secret and URL credentials, in
every form Fleet accepts (a scheme or none, ``@`` or ``:`` in the password, a user name
alone), are masked in every answer for every token (config, worker views, proxy
reasons); only the admin sees them with reveal=true; a masked value saved back keeps
the secret, entry by entry in a proxy list that gained or lost entries, and a mask that
matches nothing stored is refused. Over a real HTTP master on SQLite and Redis."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.errors import InvalidInput
from fleet.core.proxy import ProxyHandle, ProxyPolicy, split_proxy_urls
from fleet.master.services.secrets import MASK, mask_config, mask_credentials, unmask_patch
from tests.conftest import make_backend_url
from tests.master.conftest import ADMIN, READ, SCOPED, auth

GHOST = "ghost-secrets"
SCHEMA = {
    "type": "object",
    "properties": {
        "client_secret": {"type": "string", "format": "password", "writeOnly": True},
        "proxy_url": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "proxy_provider_config": {"type": "object", "default": {}},
        "slots": {"type": "integer", "default": 1},
        # A plugin that wrote credentials down as defaults: the schema shows them too.
        "fallback_proxy": {"type": "string", "default": "carl:pw-default-10@10.0.0.10:3128"},
        "api_key": {"type": "string", "default": "key-default-11"},
        "max_tokens": {"type": "integer", "default": 100},
    },
    "additionalProperties": False,
}
#: One proxy_url entry of every credential form Fleet accepts (the worker reads an entry
#: without a scheme as http://), each with a secret no answer may show.
FORMS = [
    "http://alice:pw-scheme-1@10.0.0.1:8080",  # scheme, user and password
    "bob:pw-bare-2@127.0.0.1:3128",  # no scheme
    "http://carol:p@ss-at-3@10.0.0.3:8080",  # @ in the password
    "http://dave:pa:ss-colon-4@10.0.0.4:8080",  # : in the password
    "http://apikey-user-only-5@10.0.0.5:8080",  # a user name alone (an API key)
    "apikey-bare-only-6@10.0.0.6:3128",  # a user name alone, no scheme
    "socks5://erin:pw-socks-7@10.0.0.7:1080",
    "apikey-bare-noport-8@gate.example",  # no scheme, no port
]
SECRETS = (
    "pw-scheme-1", "pw-bare-2", "ss-at-3", "ss-colon-4", "apikey-user-only-5",
    "apikey-bare-only-6", "pw-socks-7", "apikey-bare-noport-8",
    "s3cr3t-value", "gate-pass", "t0k", "pw-default-10", "key-default-11",
)  # fmt: skip
CONFIG = {
    "client_secret": "s3cr3t-value",
    "proxy_url": ",".join(FORMS),
    "proxy_provider_config": {"template": "http://u-{session}:gate-pass@gw:7000", "token": "t0k"},
    "slots": 2,
}


def no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, secret


# ------------------------------------------------------------ the masking rules


def test_every_credential_form_is_masked_in_a_config() -> None:
    masked = mask_config(CONFIG, SCHEMA)
    assert masked["client_secret"] == MASK and masked["slots"] == 2
    assert split_proxy_urls(masked["proxy_url"]) == [
        f"http://alice:{MASK}@10.0.0.1:8080",
        f"bob:{MASK}@127.0.0.1:3128",
        f"http://carol:{MASK}@10.0.0.3:8080",
        f"http://dave:{MASK}@10.0.0.4:8080",
        f"http://{MASK}@10.0.0.5:8080",  # the user name is the credential: masked
        f"{MASK}@10.0.0.6:3128",
        f"socks5://erin:{MASK}@10.0.0.7:1080",
        f"{MASK}@gate.example",
    ]
    assert masked["proxy_provider_config"] == {
        "template": f"http://u-{{session}}:{MASK}@gw:7000",
        "token": MASK,
    }
    no_secret(repr(masked))
    assert unmask_patch(masked, CONFIG) == CONFIG
    assert unmask_patch({"client_secret": "new"}, CONFIG) == {"client_secret": "new"}


def test_every_credential_form_is_masked_in_free_text() -> None:
    text = " ".join(FORMS) + " and 'user:pw-quoted-9@h.test:1' see https://x.test/a@b"
    shown = mask_credentials(text)
    no_secret(shown)
    assert "pw-quoted-9" not in shown and "alice" not in shown  # user names go too
    assert shown.endswith("see https://x.test/a@b")  # a path is no credential
    assert f"http://{MASK}@10.0.0.3:8080" in shown  # all of "carol:p@ss-at-3", not "ss-at-3@"
    kept = mask_credentials(text, keep_user=True)
    no_secret(kept)
    assert f"http://alice:{MASK}@10.0.0.1:8080" in kept and f"{MASK}@10.0.0.6:3128" in kept
    assert mask_credentials(shown) == shown  # masking twice changes nothing


def test_a_mask_matching_nothing_is_refused_never_stored() -> None:
    shown = mask_config(CONFIG, SCHEMA)["proxy_url"]
    stranger = f"http://mallory:{MASK}@10.0.0.99:8080"
    with pytest.raises(InvalidInput) as info:
        unmask_patch({"proxy_url": f"{shown},{stranger}"}, CONFIG)
    (error,) = info.value.errors
    assert error["loc"] == ["body", "proxy_url"] and error["ctx"] == {"index": len(FORMS)}
    assert f"entry {len(FORMS)}" in error["msg"]
    with pytest.raises(InvalidInput):  # a whole mask with nothing stored under it
        unmask_patch({"client_secret": MASK}, {})
    with pytest.raises(InvalidInput):  # the same user on another port is another proxy
        unmask_patch({"proxy_url": f"http://alice:{MASK}@10.0.0.1:9999"}, CONFIG)


# ------------------------------------------------------------ over a real master


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return make_backend_url(request.param, request, tmp_path)


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Backend]:
    backend = await open_backend(store_url)
    yield backend
    await backend.close()


@pytest.fixture
def live(store_url: str, live_factory: Any) -> Any:
    return live_factory(store_url, sweeper=False, settings={"token_scopes": {SCOPED: [GHOST]}})


async def setup(backend: Backend) -> None:
    entry = {"type": GHOST, "kind": "BatchAutomation", "config": SCHEMA,
             "queue": {"name": GHOST, "payload": {"type": "object"}}, "stream": None,
             "pools": {}}  # fmt: skip
    await backend.catalog.put(GHOST, entry)
    await backend.configs.set(GHOST, CONFIG)
    await backend.configs.set(GHOST, {"proxy_url": FORMS[1]}, "w1")
    await backend.workers.register(GHOST, "w1", {"host": "h"})
    await backend.workers.set_state(
        GHOST,
        "w1",
        {
            "state": "ERROR",
            "last_seen": str(time.time()),
            "last_error": "ConnectError: could not connect through " + " ".join(FORMS),
        },
    )
    await backend.workers.put_stats(GHOST, "w1", {"note": f"via {FORMS[2]}", "proxy": FORMS[5]})
    assert await backend.configs.put_desired(GHOST, "w1", CONFIG, 1)


async def test_every_answer_masks_every_form(live: Any, store: Backend) -> None:
    await setup(store)
    # A plugin's report_bad reason naming every form: stored and listed masked.
    slot = ProxyHandle(urls=FORMS, health=store.proxies, policy=ProxyPolicy(cooldown_seconds=60))
    await slot.ensure()
    await slot.report_bad("refused by " + " ".join(FORMS))
    await slot.close()
    (reported,) = [p for p in await store.proxies.listing() if p.last_reason]
    no_secret(reported.last_reason or "")  # what the backend itself holds
    base = f"/api/v1/automations/{GHOST}"
    async with httpx.AsyncClient(base_url=live.url, timeout=10) as client:
        for token in (READ, SCOPED, ADMIN):
            for path in (f"{base}/config", f"{base}/workers/w1", f"{base}/workers"):
                r = await client.get(path, headers=auth(token))
                assert r.status_code == 200, (token, path, r.text)
                no_secret(r.text)
        r = await client.get(f"/api/v1/catalog/{GHOST}", headers=auth(READ))
        props = r.json()["config"]["properties"]
        assert props["fallback_proxy"]["default"] == f"carl:{MASK}@10.0.0.10:3128"
        assert props["api_key"]["default"] == MASK and props["max_tokens"]["default"] == 100
        for token in (READ, ADMIN):
            paths = ("/api/v1/workers", "/api/v1/proxies", "/api/v1/catalog", "/api/v1/automations")
            for path in (*paths, f"/api/v1/catalog/{GHOST}"):
                r = await client.get(path, headers=auth(token))
                assert r.status_code == 200, (token, path, r.text)
                no_secret(r.text)
        r = await client.get("/api/v1/proxies", headers=auth(READ))
        (listed,) = [p for p in r.json()["proxies"] if p["last_reason"]]
        assert listed["last_reason"].startswith(f"refused by http://{MASK}@10.0.0.1:8080 ")
        view = (await client.get(f"{base}/workers/w1", headers=auth(READ))).json()
        assert f"{MASK}@127.0.0.1:3128" in view["last_error"]
        assert view["config"]["override"] == {"proxy_url": f"bob:{MASK}@127.0.0.1:3128"}
        # Only the admin sees them, and only when asking.
        for token in (READ, SCOPED):
            r = await client.get(f"{base}/config?reveal=true", headers=auth(token))
            assert r.status_code == 403
        r = await client.get(f"{base}/config?reveal=true", headers=auth(ADMIN))
        assert r.json()["config"] == CONFIG and r.json()["schema"] == SCHEMA


async def test_a_masked_list_saved_back_keeps_every_password(live: Any, store: Backend) -> None:
    await setup(store)
    path = f"/api/v1/automations/{GHOST}/config"
    async with httpx.AsyncClient(base_url=live.url, headers=auth(ADMIN), timeout=10) as client:
        shown: dict[str, Any] = (await client.get(path)).json()["config"]
        entries = split_proxy_urls(shown["proxy_url"])
        assert all(MASK in e for e in entries)
        # What the dashboard's form does: the whole list back, one entry appended.
        added = "http://frank:pw-new-9@10.0.0.9:8080"
        r = await client.patch(path, json={**shown, "proxy_url": ",".join([*entries, added])})
        assert r.status_code == 200, r.text
        no_secret(r.text)
        assert "pw-new-9" not in r.text
        assert await store.configs.get(GHOST) == {**CONFIG, "proxy_url": ",".join([*FORMS, added])}
        # Entries dropped and reordered (newline separated): each mask finds its own.
        kept = [entries[6], entries[1], entries[4], added]
        r = await client.patch(path, json={"proxy_url": "\n".join(kept)})
        assert r.status_code == 200, r.text
        stored = (await store.configs.get(GHOST))["proxy_url"]
        assert stored == "\n".join([FORMS[6], FORMS[1], FORMS[4], added])
        # A mask that matches no stored entry: 422 naming it, and nothing stored.
        stranger = f"http://mallory:{MASK}@10.0.0.99:8080"
        r = await client.patch(path, json={"proxy_url": f"{kept[0]},{stranger}"})
        assert r.status_code == 422, r.text
        (error,) = r.json()["detail"]
        assert error["loc"] == ["body", "proxy_url"] and "entry 1" in error["msg"]
        assert (await store.configs.get(GHOST))["proxy_url"] == stored
        r = await client.patch(path, json={"client_secret": MASK, "slots": 4})
        assert r.status_code == 200 and (await store.configs.get(GHOST))["client_secret"] == (
            "s3cr3t-value"
        )
        # A worker's override: its masks stand for what it was shown (merged).
        worker = f"/api/v1/automations/{GHOST}/workers/w1"
        merged = (await client.get(worker)).json()["config"]["merged"]["proxy_url"]
        r = await client.patch(f"{worker}/config", json={"proxy_url": merged})
        assert r.status_code == 200, r.text
        assert await store.configs.get(GHOST, "w1") == {"proxy_url": FORMS[1]}


# ------------------------------------------------------------ log lines


def test_log_lines_never_carry_credentials() -> None:
    import logging

    from fleet.core.redact import RedactingFormatter

    record = logging.LogRecord(
        "fleet", logging.WARNING, __file__, 1,
        "proxy %s failed: %s", ("http://u:hunter2@p:1", "connect to " + " ".join(FORMS)),
        None,
    )  # fmt: skip
    line = RedactingFormatter("%(message)s").format(record)
    assert "hunter2" not in line
    no_secret(line)
    assert f"http://u:{MASK}@p:1" in line


def test_log_messages_cannot_forge_lines() -> None:
    import logging

    from fleet.core.redact import RedactingFormatter

    record = logging.LogRecord(
        "fleet", logging.INFO, __file__, 1, "task %s done", ("evil\n04:00 INFO forged\x1b[2J",),
        None,
    )  # fmt: skip
    line = RedactingFormatter("%(levelname)s %(message)s").format(record)
    assert "\n" not in line and "\x1b" not in line
    assert line == "INFO task evil\\n04:00 INFO forged\\x1b[2J done"
