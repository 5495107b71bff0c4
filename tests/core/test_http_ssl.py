"""``ctx.http()`` clients share one verifying SSL context per process (making one reads
the CA bundle: about 20 ms of CPU a client otherwise); a caller's own ``verify`` or
``cert`` still gets its own."""

from __future__ import annotations

import ssl

from fleet.core.access.clients import default_ssl_context, exits


def _context(options: dict[str, object]) -> ssl.SSLContext:
    make, _ = exits(dict(options), None)
    transport = make(None)
    context = transport._pool._ssl_context  # type: ignore[attr-defined]
    assert isinstance(context, ssl.SSLContext)
    return context


def test_clients_share_the_default_context() -> None:
    assert _context({}) is _context({}) is default_ssl_context()
    assert default_ssl_context().verify_mode == ssl.CERT_REQUIRED


def test_a_callers_verify_is_its_own() -> None:
    loose = _context({"verify": False})
    assert loose is not default_ssl_context() and loose.verify_mode == ssl.CERT_NONE
    mine = ssl.create_default_context()
    assert _context({"verify": mine}) is mine
