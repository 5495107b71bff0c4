"""The code samples of spec/automations.md, as written there (plus stubs they assume)."""
# ruff: noqa
from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, ContinuousAutomation, register


# --- stubs the page assumes -------------------------------------------------
class CaptchaConfig(BaseConfig):
    site_key: str = ""


class AccountConfig(BaseConfig):
    domain: str = "example.com"


class Token(BaseModel):
    value: str


class NewAccount(BaseModel):
    email: str


class AccountRequest(BaseModel):
    email: str


@contextlib.asynccontextmanager
async def open_browser(ctx: Any) -> AsyncIterator[Any]:
    yield object()


async def wait_for_token(browser: Any) -> Token:
    return Token(value="t")


async def create_account(payload: Any, ctx: Any) -> NewAccount:
    return NewAccount(email=payload.email)


# --- the samples ------------------------------------------------------------
@register("captcha-solver")
class CaptchaSolver(ContinuousAutomation[CaptchaConfig]):
    Config = CaptchaConfig
    Output = Token

    async def run_slot(self, ctx):
        async with open_browser(ctx) as browser:
            while not ctx.shutdown.is_set():
                token = await wait_for_token(browser)
                await ctx.emit(token)


@register("account-creator")
class AccountCreator(BatchAutomation[AccountConfig]):
    Config = AccountConfig
    TaskPayload = AccountRequest
    Output = NewAccount

    async def run_one(self, task, ctx):
        account = await create_account(task.payload, ctx)
        await ctx.emit(account)
