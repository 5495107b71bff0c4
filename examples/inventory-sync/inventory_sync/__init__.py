"""inventory-sync: read stock levels from an API that needs a short-lived token.

The fleet shares one access token. The patterns worth copying:

- ``ctx.kv``: the token is cached fleet-wide with a TTL a little shorter than its life;
- ``ctx.lock``: when it is missing, exactly one slot in the whole fleet refreshes
  it while the others wait on the lock and then find the new one in the cache
  (check, lock, check again);
- ``ctx.counter``: requests in flight across the fleet, and refreshes so far;
- ``ctx.events``: a ``inventory-sync.token-refreshed`` signal other code can react to.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel, Field

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register

TOKEN_NS = "inventory-sync"
TOKEN_KEY = "access-token"
REFRESH_LOCK = "inventory-sync:token-refresh"
INFLIGHT = "inventory-sync:inflight"
REFRESHES = "inventory-sync:token-refreshes"
REFRESHED_TOPIC = "inventory-sync.token-refreshed"


class InventoryConfig(BaseConfig):
    """Where the API is and how to log in to it."""

    api_url: str = "http://127.0.0.1:8765/api"
    client_id: str = "demo"
    client_secret: str = "demo-secret"
    request_timeout_seconds: float = Field(default=10.0, gt=0)


class StockCheck(BaseModel):
    """Look up one SKU."""

    sku: str


class StockLevel(BaseModel):
    """The stock of one SKU, as the API reported it."""

    sku: str
    quantity: int


class TokenRejected(RuntimeError):
    """The API refused a cached token (revoked early); the task is retried."""


async def access_token(ctx: Context[InventoryConfig], client: httpx.AsyncClient) -> str:
    """The fleet's current API token, refreshing it under a lock when it is missing.

    Raises:
        TimeoutError: Another holder kept the refresh lock too long.
        httpx.HTTPError: The token endpoint failed.
    """
    cache = ctx.kv(TOKEN_NS)
    token: str | None = await cache.get(TOKEN_KEY)
    if token:
        return token
    async with ctx.lock(REFRESH_LOCK, hold_seconds=30, wait_seconds=15) as acquired:
        if not acquired:
            raise TimeoutError("waited 15 s for the token refresh lock")
        # Whoever held the lock before us probably refreshed it already.
        token = await cache.get(TOKEN_KEY)
        if token:
            return token
        config = ctx.config
        response = await client.post(
            f"{config.api_url}/token",
            json={"client_id": config.client_id, "client_secret": config.client_secret},
        )
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        token = str(body["access_token"])
        # Expire the cached copy before the real one so nobody sends a dying token.
        ttl = max(1.0, float(body["expires_in"]) - 5)
        await cache.set(TOKEN_KEY, token, ttl_seconds=ttl)
        refreshes = await ctx.counter(REFRESHES).incr()
        await ctx.events.publish(
            REFRESHED_TOPIC, {"worker_id": ctx.worker_id, "refreshes": refreshes}
        )
        ctx.logger.info("refreshed the API token (refresh #%d)", refreshes)
        return token


async def forget_token(ctx: Context[InventoryConfig], token: str) -> None:
    """Drop ``token`` from the cache, unless another slot already replaced it."""
    cache = ctx.kv(TOKEN_NS)
    if await cache.get(TOKEN_KEY) == token:
        await cache.delete(TOKEN_KEY)


@register("inventory-sync")
class InventorySync(BatchAutomation[InventoryConfig]):
    """One stock lookup per task, sharing one API token across the fleet."""

    Config = InventoryConfig
    TaskPayload = StockCheck
    Output = StockLevel

    async def run_one(self, task: Task[StockCheck], ctx: Context[InventoryConfig]) -> None:
        inflight = ctx.counter(INFLIGHT)
        await inflight.incr()
        try:
            async with httpx.AsyncClient(timeout=ctx.config.request_timeout_seconds) as client:
                token = await access_token(ctx, client)
                response = await client.get(
                    f"{ctx.config.api_url}/stock/{task.payload.sku}",
                    headers={"Authorization": f"Bearer {token}"},
                )
                if response.status_code == 401:
                    await forget_token(ctx, token)
                    raise TokenRejected("the API refused the cached token")
                response.raise_for_status()
                body = response.json()
            await ctx.emit(StockLevel(sku=task.payload.sku, quantity=int(body["quantity"])))
        finally:
            await inflight.decr()
