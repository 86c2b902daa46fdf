"""The instance: its workers registry and what is installed."""

from __future__ import annotations

from fastapi import APIRouter

from dirigent.api.deps import After, CanGetSystem, CanListWorkers, EngineDep, Limit
from dirigent.api.models import Page, SystemInfo, WorkerView

router = APIRouter(tags=["system"])


@router.get("/workers", operation_id="listWorkers", summary="The workers registry")
async def list_workers(
    engine: EngineDep, _: CanListWorkers, limit: Limit = 50, after: After = None
) -> Page[WorkerView]:
    return await engine.workers.page(cursor=after, limit=limit)


@router.get("/system/info", operation_id="getSystemInfo", summary="What this instance runs")
async def system_info(engine: EngineDep, _: CanGetSystem) -> SystemInfo:
    return await engine.system.info()
