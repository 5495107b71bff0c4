"""Fixtures of the worker tests."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend


@pytest.fixture
async def mem() -> AsyncIterator[Backend]:
    """A fresh in-process memory backend."""
    backend = await open_backend(f"memory://worker-test-{uuid.uuid4().hex}")
    try:
        yield backend
    finally:
        await backend.close()
