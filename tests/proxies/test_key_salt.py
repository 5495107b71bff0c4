"""Proxy keys reveal nothing (issue 24, 2): the digest of a user name in a key is keyed
with a salt the backend makes once and every connection to it shares, so every worker
keys a proxy alike, while a reader of keys cannot check guessed user names against them
(the bare SHA-256 it used to be could be). On memory, SQLite and Redis."""

from __future__ import annotations

import hashlib

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.proxy import ProxyHandle, ProxyPolicy, proxy_key, proxy_key_salt

URLS = ["http://apikey-abc@gate.test:7000", "bob:hunter2@gate.test:7000"]


async def test_one_salt_per_backend_shared_by_every_connection(
    backend: Backend, backend_url: str
) -> None:
    salt = await proxy_key_salt(backend.kv)
    assert len(salt) == 32 and await proxy_key_salt(backend.kv) == salt
    other = backend if backend_url.startswith("memory") else await open_backend(backend_url)
    try:
        # Two "workers" (two connections) report the same proxy: one key, one health.
        a = ProxyHandle(urls=URLS, health=backend.proxies, policy=ProxyPolicy(cooldown_seconds=60))
        b = ProxyHandle(urls=URLS, health=other.proxies, policy=ProxyPolicy(cooldown_seconds=60))
        assert await a.ensure() == URLS[0]
        await a.release()  # one after the other: b has no load to spread
        assert await b.ensure() == URLS[0]
        assert a.key == b.key == proxy_key(URLS[0], salt)
        await a.report_bad("refused")
        await b.release()
        assert await b.ensure() == URLS[1]  # b sees the cool-down a reported
        await a.close()
        await b.close()
    finally:
        if other is not backend:
            await other.close()
    keys = {p.key for p in await backend.proxies.listing()}
    assert keys == {proxy_key(URLS[0], salt), proxy_key(URLS[1], salt)}
    for user in ("apikey-abc", "bob"):
        guess = hashlib.sha256(user.encode()).hexdigest()[:10]
        assert not any(guess in k or user in k for k in keys)
    assert not any("hunter2" in k for k in keys)
