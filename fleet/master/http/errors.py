"""The one place where Fleet's errors become HTTP answers.

Services raise the exception tree of :mod:`fleet.core.errors`; this module maps each
kind to its status and body, and :func:`install_error_handlers` registers the map on
the app. Starlette finds a handler by the exception's MRO, so the most specific kind
wins: a ``NotFound`` is a 404 although it is also a ``FleetError`` (a 422).
"""

from __future__ import annotations

import json
import logging
import math
import secrets
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from fleet.core.errors import (
    BackendBusy,
    BackendError,
    BackendUnavailable,
    Conflict,
    FleetError,
    Forbidden,
    InvalidInput,
    NotFound,
    Refused,
    RetryLater,
    TooLarge,
    Unsupported,
)
from fleet.master.http.disconnect import ClientGone, gone

log = logging.getLogger("fleet.master.app")

#: The status of each refusal, the only table of it (docs/architecture.md).
REFUSAL_STATUS: dict[type[Refused], int] = {
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    Unsupported: 501,
    RetryLater: 503,
}

OutageHook = Callable[[Request, Exception], None]


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: a 422 may echo an input holding a
    lone surrogate (``"\\ud800"`` is valid JSON text), which UTF-8 cannot encode."""

    def render(self, content: object) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


def finite_json(value: Any) -> Any:
    """``value`` with NaN/Infinity floats replaced by their names, so that error
    answers echoing bad input can always be encoded."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def validation_response(errors: list[dict[str, Any]]) -> JSONResponse:
    """The 422 of FastAPI-shaped ``errors``."""
    return AsciiJSONResponse({"detail": finite_json(jsonable_encoder(errors))}, status_code=422)


def status_of(exc: Refused) -> int:
    """The HTTP status of a refusal (by the most specific kind it is)."""
    for cls in type(exc).__mro__:
        if cls in REFUSAL_STATUS:
            return REFUSAL_STATUS[cls]
    return 400


def refusal_response(exc: Refused) -> JSONResponse:
    """``{"detail": message + hint}`` with the refusal's status."""
    return JSONResponse({"detail": exc.detail}, status_code=status_of(exc))


def fleet_error_response(exc: FleetError) -> JSONResponse:
    """Any other ``FleetError``: a backend's is a 500 naming only a log reference (the
    driver's text can name the backend's address and its scripts); the rest are
    input the master refused, a 422 at the error's field."""
    if isinstance(exc, BackendError):
        ref = secrets.token_hex(6)
        log.error("backend error [%s]: %s", ref, exc)
        detail = f"backend error (logged on the master as [{ref}])"
        return JSONResponse({"detail": detail}, status_code=500)
    loc: list[str] = ["body", *exc.field.split(".")] if exc.field else ["body"]
    return validation_response([{"type": "value_error", "loc": loc, "msg": exc.message}])


def install_error_handlers(app: FastAPI, on_outage: OutageHook) -> None:
    """Register the map on ``app``; ``on_outage`` hears of each ``BackendUnavailable``
    (the master logs an outage once, and watches for its end)."""

    async def on_request_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return validation_response(list(exc.errors()))

    async def on_invalid_input(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, InvalidInput)
        return validation_response(list(exc.errors))

    async def on_refused(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, Refused)
        return refusal_response(exc)

    async def on_unavailable(request: Request, exc: Exception) -> JSONResponse:
        on_outage(request, exc)
        return JSONResponse({"detail": "the backend is unavailable; retry later"}, status_code=503)

    async def on_busy(request: Request, exc: Exception) -> JSONResponse:
        # Every backend connection stayed in use for the pool wait: this master is
        # overloaded, the backend is up; no outage is logged.
        return JSONResponse(
            {"detail": "the master is busy (every backend connection in use); retry later"},
            status_code=503,
            headers={"Retry-After": "1"},
        )

    async def on_fleet_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, FleetError)
        return fleet_error_response(exc)

    app.add_exception_handler(RequestValidationError, on_request_validation)
    app.add_exception_handler(InvalidInput, on_invalid_input)
    app.add_exception_handler(Refused, on_refused)
    app.add_exception_handler(BackendUnavailable, on_unavailable)
    app.add_exception_handler(BackendBusy, on_busy)
    app.add_exception_handler(ClientGone, gone)
    app.add_exception_handler(FleetError, on_fleet_error)
