"""Process settings from the environment (prefix ``FLEET_``).

The variables are read by a few lines of our own rather than pydantic-settings:
that library (with python-dotenv, which it imports whether or not a ``.env`` file
is used) cost ~30 ms of every ``fleet worker`` start, a tenth of it, for a prefix
match and a case fold (``bench/README.md``, round four, fifth session).
"""

from __future__ import annotations

import json
import os
from collections.abc import Container
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleet.backends import DEFAULT_BACKEND_URL
from fleet.heap import DEFAULT_THRESHOLD

#: Where CLI client commands look for the master unless ``FLEET_MASTER_URL`` says otherwise.
DEFAULT_MASTER_URL = "http://127.0.0.1:8000"


#: The variables' common prefix (matched in any case, as the field names are).
ENV_PREFIX = "FLEET_"


def environment_values(fields: Container[str]) -> dict[str, str]:
    """The ``FLEET_<FIELD>`` variables of the environment named after one of
    ``fields``, by field name, as the raw strings (the model parses them)."""
    cut = len(ENV_PREFIX)
    found: dict[str, str] = {}
    for name, value in os.environ.items():
        if name[:cut].upper() == ENV_PREFIX:
            field = name[cut:].lower()
            if field in fields:
                found[field] = value
    return found


class Settings(BaseModel):
    """Everything a master, worker or CLI client reads from ``FLEET_*`` variables.

    ``Settings()`` reads the environment (a variable's name in any case); keyword
    arguments win over it. A value that does not parse raises pydantic's
    ``ValidationError`` naming the field. Lists are comma-separated, the token
    scopes JSON; other variables are read as pydantic reads a string of the type.

    Attributes:
        backend_url: ``FLEET_BACKEND_URL`` (workers need nothing else).
        admin_token: ``FLEET_ADMIN_TOKEN``: may do everything.
        read_tokens: ``FLEET_READ_TOKENS``: comma-separated; every GET.
        token_scopes: ``FLEET_TOKEN_SCOPES``: JSON ``{"<token>": ["<type>", ...]}``.
        idempotency_ttl_seconds: Lifetime of idempotency keys.
        max_body_bytes / max_batch_body_bytes: Request size limits (413 above).
        metrics_public: Serve ``/metrics`` without a token.
        sweep_seconds: Master sweeper period.
        history_interval_seconds: ``FLEET_HISTORY_INTERVAL_SECONDS``: how often the
            master records every type's history (docs/operations.md#history).
        heartbeat_seconds: Worker heartbeat period.
        gc_threshold: ``FLEET_GC_THRESHOLD``: a worker's or master's young-generation
            garbage collection threshold, set with the imports frozen (0: Python's
            own; ``fleet/heap.py``).
        master_url: Where CLI client commands find the master.
        host / port: Where the master listens.
        header_timeout_seconds / body_timeout_seconds: How long a client may take
            to send its request headers / body before it is disconnected.
        max_connections: The most client connections the master holds (None: the
            file limit minus a reserve); see ``fleet/master/http/server_protocol.py``.
        max_header_bytes / max_headers: ``FLEET_MAX_HEADER_BYTES`` /
            ``FLEET_MAX_HEADERS``: the most bytes of a request's line and header
            fields, and the most header fields; past either the master answers 431
            while the headers still arrive (``fleet/master/http/server_protocol.py``).
        max_schedules: ``FLEET_MAX_SCHEDULES``: the most schedules one type may have
            (a create past it answers 409).
        trusted_proxies: ``FLEET_TRUSTED_PROXIES``: comma-separated addresses of
            reverse proxies whose ``X-Forwarded-For`` names the client (empty: the
            peer address is the client, whatever a header says).
    """

    model_config = ConfigDict(extra="ignore")

    backend_url: str = DEFAULT_BACKEND_URL
    admin_token: str | None = None
    read_tokens: list[str] = Field(default_factory=list)
    token_scopes: dict[str, list[str]] = Field(default_factory=dict)
    idempotency_ttl_seconds: float = Field(default=86_400.0, gt=0)
    max_body_bytes: int = Field(default=1 << 20, gt=0)
    max_batch_body_bytes: int = Field(default=32 << 20, gt=0)
    metrics_public: bool = False
    sweep_seconds: float = Field(default=10.0, gt=0)
    history_interval_seconds: float = Field(default=10.0, gt=0)
    heartbeat_seconds: float = Field(default=5.0, gt=0)
    gc_threshold: int = Field(default=DEFAULT_THRESHOLD, ge=0)
    master_url: str = DEFAULT_MASTER_URL
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    body_timeout_seconds: float = Field(default=60.0, gt=0)
    max_connections: int | None = Field(default=None, ge=16)
    max_header_bytes: int = Field(default=16 << 10, ge=1024)
    max_headers: int = Field(default=100, ge=8)
    max_schedules: int = Field(default=1000, ge=1)
    trusted_proxies: list[str] = Field(default_factory=list)

    def __init__(self, **values: Any) -> None:
        super().__init__(**{**environment_values(type(self).model_fields), **values})

    @field_validator("read_tokens", "trusted_proxies", mode="before")
    @classmethod
    def _split_tokens(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [t.strip() for t in value.split(",") if t.strip()]
        return value

    @field_validator("token_scopes", mode="before")
    @classmethod
    def _parse_scopes(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
        return value
