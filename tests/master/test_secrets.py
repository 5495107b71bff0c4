"""Secrets stay secret: SecretStr fields, keys naming a secret and URL credentials are
masked in every answer for every token; only the admin sees them with reveal=true;
a masked value saved back keeps the secret."""

from __future__ import annotations

from typing import Any

from fleet.master.secrets import MASK, mask_config, mask_url_credentials, unmask_patch
from tests.master.conftest import ADMIN, READ, InProcess, auth

GHOST = "ghost-secrets"
SCHEMA = {
    "type": "object",
    "properties": {
        "client_secret": {"type": "string", "format": "password", "writeOnly": True},
        "proxy_url": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "proxy_provider_config": {"type": "object", "default": {}},
        "slots": {"type": "integer", "default": 1},
    },
    "additionalProperties": False,
}
CONFIG = {
    "client_secret": "s3cr3t-value",
    "proxy_url": "http://alice:pr0xy-pass@10.0.0.1:8080,http://bob:other-pass@10.0.0.2:8080",
    "proxy_provider_config": {"template": "http://u-{session}:gate-pass@gw:7000", "token": "t0k"},
    "slots": 2,
}
SECRETS = ("s3cr3t-value", "pr0xy-pass", "other-pass", "gate-pass", "t0k")


def test_masking_rules() -> None:
    masked = mask_config(CONFIG, SCHEMA)
    assert masked["client_secret"] == MASK and masked["slots"] == 2
    assert (
        masked["proxy_url"] == f"http://alice:{MASK}@10.0.0.1:8080,http://bob:{MASK}@10.0.0.2:8080"
    )
    assert masked["proxy_provider_config"] == {
        "template": f"http://u-{{session}}:{MASK}@gw:7000",
        "token": MASK,
    }
    assert mask_url_credentials("see https://x.test/a@b and ftp://u:p@h") == (
        f"see https://x.test/a@b and ftp://u:{MASK}@h"
    )
    assert unmask_patch(masked, CONFIG) == CONFIG
    assert unmask_patch({"client_secret": "new"}, CONFIG) == {"client_secret": "new"}


async def setup(master: InProcess) -> None:
    entry = {"type": GHOST, "kind": "BatchAutomation", "config": SCHEMA,
             "queue": {"name": GHOST, "payload": {"type": "object"}}, "stream": None,
             "pools": {}}  # fmt: skip
    await master.backend.catalog_put(GHOST, entry)
    await master.backend.config_set(GHOST, CONFIG)
    await master.backend.worker_register(GHOST, "w1", {"host": "h"})
    assert await master.backend.worker_config_put(GHOST, "w1", CONFIG, 1)


def no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, secret


async def test_every_token_sees_masks(master: InProcess) -> None:
    await setup(master)
    base = f"/api/v1/automations/{GHOST}"
    for token in (READ, ADMIN):
        for path in ("/config", "/workers/w1", "/workers"):
            r = await master.client.get(base + path, headers=auth(token))
            assert r.status_code == 200, r.text
            no_secret(r.text)
        r = await master.client.get("/api/v1/workers", headers=auth(token))
        no_secret(r.text)
    r = await master.client.get(f"{base}/config?reveal=true", headers=auth(READ))
    assert r.status_code == 403
    r = await master.client.get(f"{base}/config?reveal=true", headers=auth(ADMIN))
    assert r.json()["config"] == CONFIG


async def test_saving_masked_values_back_keeps_the_secrets(master: InProcess) -> None:
    await setup(master)
    path = f"/api/v1/automations/{GHOST}/config"
    shown: dict[str, Any] = (await master.client.get(path, headers=auth(ADMIN))).json()["config"]
    r = await master.client.patch(path, json={**shown, "slots": 3}, headers=auth(ADMIN))
    assert r.status_code == 200, r.text
    no_secret(r.text)
    assert await master.backend.config_get(GHOST) == {**CONFIG, "slots": 3}


def test_log_lines_never_carry_url_passwords() -> None:
    import logging

    from fleet.core.redact import RedactingFormatter

    record = logging.LogRecord(
        "fleet", logging.WARNING, __file__, 1,
        "proxy %s failed: %s", ("http://u:hunter2@p:1", "connect to socks5://a:b@c refused"),
        None,
    )  # fmt: skip
    line = RedactingFormatter("%(message)s").format(record)
    assert "hunter2" not in line and ":b@" not in line
    assert "http://u:********@p:1" in line


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
