"""Bearer tokens and what each kind may do (rest-api.md "Tokens and scopes").

Three kinds of token: ``admin`` may do everything; ``read`` may do every GET;
``scoped`` may read and submit for the types it lists. The pure part
(:class:`TokenTable`, :func:`allowed`) is independent of HTTP; the FastAPI
dependencies at the bottom turn its answers into 401 and 403.

Tokens are compared in constant time against *every* known token (no early
exit on a match) and are never logged or echoed in error messages.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from fastapi import HTTPException, Request

from fleet.settings import Settings


class Kind(StrEnum):
    """The kind of a known token."""

    ADMIN = "admin"
    READ = "read"
    SCOPED = "scoped"


#: What a route asks of its caller.
#:
#: * ``read``: a GET not tied to one type (catalog list, workers, pools, events);
#: * ``list``: a GET listing types, whose answer is filtered to a scoped token's types;
#: * ``read_type``: a GET about one type;
#: * ``submit``: submitting tasks to one type;
#: * ``admin``: anything that changes state other than a submit.
Action = Literal["read", "list", "read_type", "submit", "admin"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the token's kind and, for a scoped token, its types."""

    kind: Kind
    types: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_admin(self) -> bool:
        return self.kind is Kind.ADMIN

    def sees_type(self, automation_type: str) -> bool:
        """True if type-filtered listings should include ``automation_type``."""
        return self.kind is not Kind.SCOPED or automation_type in self.types


def _digest(token: str) -> bytes:
    # Hashing first makes every comparison the same length, so compare_digest
    # leaks not even the length of a known token.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenTable:
    """Every token the master knows, stored only as SHA-256 digests.

    Args:
        admin: The admin token (None: no admin token is accepted).
        read: Read-only tokens.
        scopes: Scoped token -> automation types it may read and submit to.
    """

    def __init__(
        self,
        admin: str | None = None,
        read: list[str] | tuple[str, ...] = (),
        scopes: dict[str, list[str]] | None = None,
    ) -> None:
        entries: list[tuple[bytes, Principal]] = []
        if admin:
            entries.append((_digest(admin), Principal(Kind.ADMIN)))
        for token in read:
            if token:
                entries.append((_digest(token), Principal(Kind.READ)))
        for token, types in (scopes or {}).items():
            if token:
                entries.append((_digest(token), Principal(Kind.SCOPED, frozenset(types))))
        self._entries = entries

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenTable:
        """The table for ``FLEET_ADMIN_TOKEN``, ``FLEET_READ_TOKENS`` and ``FLEET_TOKEN_SCOPES``."""
        return cls(settings.admin_token, settings.read_tokens, settings.token_scopes)

    def identify(self, token: str) -> Principal | None:
        """The principal of ``token``, or None if it is unknown.

        Every known token is compared, whatever matched first; when one token is
        listed under several kinds the most powerful kind wins.
        """
        candidate = _digest(token)
        found: list[Principal] = []
        for digest, principal in self._entries:
            if hmac.compare_digest(digest, candidate):
                found.append(principal)
        if not found:
            return None
        rank = {Kind.ADMIN: 0, Kind.READ: 1, Kind.SCOPED: 2}
        return min(found, key=lambda p: rank[p.kind])


def allowed(principal: Principal, action: Action, automation_type: str | None = None) -> bool:
    """Whether ``principal`` may perform ``action`` (on ``automation_type``).

    Args:
        principal: The caller.
        action: What the route asks (see :data:`Action`).
        automation_type: The type the route is about, for ``read_type``/``submit``.

    Returns:
        True if allowed; the caller answers 403 otherwise.
    """
    if principal.kind is Kind.ADMIN:
        return True
    if principal.kind is Kind.READ:
        return action in ("read", "list", "read_type")
    # Scoped: read and submit for its own types; type listings are filtered.
    if action == "list":
        return True
    if action in ("read_type", "submit"):
        return automation_type is not None and automation_type in principal.types
    return False


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


_DENIED = {
    "read": "this token may not read fleet-wide resources",
    "list": "this token may not list automations",
    "read_type": "this token may not read this automation type",
    "submit": "this token may not submit to this automation type",
    "admin": "this operation needs the admin token",
}


def authenticate(request: Request) -> Principal:
    """The caller of ``request``.

    Raises:
        HTTPException: 401 if the token is missing or unknown.
    """
    tokens: TokenTable = request.app.state.fleet.tokens
    token = bearer_token(request.headers.get("authorization"))
    principal = tokens.identify(token) if token is not None else None
    if principal is None:
        detail = "missing bearer token" if token is None else "unknown token"
        raise HTTPException(401, detail=detail, headers={"WWW-Authenticate": "Bearer"})
    return principal


def authorize(request: Request, action: Action, automation_type: str | None = None) -> Principal:
    """Authenticate, then check ``action``.

    Raises:
        HTTPException: 401 (see :func:`authenticate`) or 403 if not allowed.
    """
    principal = authenticate(request)
    if not allowed(principal, action, automation_type):
        raise HTTPException(403, detail=_DENIED[action])
    return principal


# FastAPI dependencies, one per route class. The per-type ones read the path
# parameter ``automation_type`` from the request rather than declaring it: the
# route declares (and validates) it already, and a dependency parameter of its
# own would be resolved a second time on every request. They are ``async`` so
# FastAPI calls them on the event loop instead of hopping to a worker thread.


def _path_type(request: Request) -> str | None:
    value = request.path_params.get("automation_type")
    return value if isinstance(value, str) else None


async def read_access(request: Request) -> Principal:
    """Dependency: any GET not tied to one type."""
    return authorize(request, "read")


async def list_access(request: Request) -> Principal:
    """Dependency: a type listing (scoped tokens see their own types only)."""
    return authorize(request, "list")


async def type_read_access(request: Request) -> Principal:
    """Dependency: a GET about one type (the route's ``automation_type``)."""
    return authorize(request, "read_type", _path_type(request))


async def submit_access(request: Request) -> Principal:
    """Dependency: submitting tasks to one type (the route's ``automation_type``)."""
    return authorize(request, "submit", _path_type(request))


async def admin_access(request: Request) -> Principal:
    """Dependency: any other change of state."""
    return authorize(request, "admin")
