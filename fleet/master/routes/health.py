"""``/healthz``, ``/readyz`` and ``/metrics`` (outside ``/api/v1``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from fleet.master.http.answers import Health
from fleet.master.http.auth import authorize
from fleet.master.http.models import error_responses
from fleet.master.state import get_backend, master_state

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> dict[str, Any]:
    """The process answers (no auth)."""
    return {"ok": True}


@router.get("/readyz", summary="Readiness", responses={503: {"description": "backend down"}})
async def readyz(request: Request) -> Response:
    """200 if the backend answered a ping at most a second ago, 503 otherwise (no
    auth; however many ask, the backend is pinged at most once a second)."""
    readiness = master_state(request).readiness
    ok = readiness is not None and await readiness.ready()
    return JSONResponse(
        {"ok": ok, "backend": "up" if ok else "down"}, status_code=200 if ok else 503
    )


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses=error_responses(401, 403, 503),
)
async def metrics(request: Request) -> Response:
    """Prometheus text; needs the admin or a read token unless ``FLEET_METRICS_PUBLIC=1``."""
    state = master_state(request)
    if not state.settings.metrics_public:
        authorize(request, "read")
    assert state.metrics is not None
    body = await state.metrics.render(get_backend(request), state.settings.heartbeat_seconds)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
