"""``proxy-secrets``: an automation that names its proxies everywhere it can, for the
test that no credential reaches a worker's log: each attempt logs the slot's proxy
list, reports its proxy bad with a reason naming every URL, and fails with an error
naming every URL (the worker logs the failure)."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register
from fleet.core.proxy import split_proxy_urls

log = logging.getLogger("tests.proxy-secrets")


class Nothing(BaseModel):
    """No payload: the proxies are the whole point."""


@register("proxy-secrets")
class ProxySecrets(BatchAutomation[BaseConfig]):
    """Leaks its proxy URLs into every channel a plugin has."""

    Config = BaseConfig
    TaskPayload = Nothing

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        urls = " ".join(split_proxy_urls(ctx.config.proxy_url))
        log.warning("this slot goes through %s (now %s)", urls, ctx.proxy_url)
        await ctx.proxy.report_bad(f"refused by {urls}")
        raise RuntimeError(f"could not connect through {urls}")
