"""Probes, outside ``/api/v1`` and open: liveness answers while the process is up, readiness
only while the database answers a query."""

from __future__ import annotations

from fastapi import APIRouter

from dirigent.api.deps import EngineDep
from dirigent.api.models import Health

router = APIRouter(prefix="/health", tags=["health"])


@router.get("", operation_id="getHealth", summary="Liveness")
async def health() -> Health:
    return Health()


@router.get(
    "/ready",
    operation_id="getReadiness",
    summary="Readiness: the database answers",
    responses={503: {"description": "The database does not answer."}},
)
async def ready(engine: EngineDep) -> Health:
    await engine.system.ready()
    return Health(checks={"database": "ok"})
