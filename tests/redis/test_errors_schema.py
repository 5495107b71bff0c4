"""The Redis keys of error groups are the documented ones (docs/redis-schema.md, "Error
groups"), seen with a plain client: five keys per type, each with a TTL past the newest
write, the bodies in base64; a purged type leaves none."""

from __future__ import annotations

import base64
import json
from typing import Any

import redis.asyncio as aioredis

from fleet.backends import open_backend
from fleet.core.error_groups import TTL_SECONDS, GroupDelta, Snapshot, SnapshotMeta
from fleet.core.records import now

T = "err-keys"
G = "00000000000000c3"


async def test_error_keys(redis_url: str) -> None:
    b = await open_backend(redis_url)
    raw: Any = aioredis.Redis.from_url(redis_url)
    try:
        await b.errors.record(T, [GroupDelta(G, "E", "m", "f.py:g", 2, now(), now())])
        png = b"\x89PNG\x00\xff"
        await b.errors.put(T, G, Snapshot(SnapshotMeta("a1", now(), png_bytes=len(png)), None, png))
        base = f"fleet:errors:{T}"
        keys = sorted(k.decode() for k in await raw.keys(f"{base}*"))
        assert keys == [base, f"{base}:b", f"{base}:g", f"{base}:m", f"{base}:s"]
        for k in keys:
            ttl = await raw.ttl(k)
            assert TTL_SECONDS < ttl <= TTL_SECONDS + 60, (k, ttl)
        doc = json.loads(await raw.hget(f"{base}:g", G))
        assert (doc["count"], doc["exc"], doc["domains"]) == (2, "E", [])
        assert base64.b64decode(await raw.hget(f"{base}:b", f"{G}/a1:p")) == png
        assert json.loads(await raw.hget(f"{base}:m", f"{G}/a1"))["bytes"] == len(png)
        await b.purge_type(T)
        assert await raw.keys(f"{base}*") == []
    finally:
        await raw.aclose()
        await b.close()
