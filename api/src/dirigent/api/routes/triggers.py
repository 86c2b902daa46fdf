"""Read views of a namespace's triggers: a schedule and its firings, a webhook and its
deliveries (the webhook's token is never shown: the engine keeps only its hash)."""

from __future__ import annotations

from fastapi import APIRouter

from dirigent.api.deps import (
    CanGetSchedules,
    CanGetWebhooks,
    EngineDep,
    Limit,
    Namespace,
    TriggerName,
)
from dirigent.api.models import DeliveryView, FiringView, ScheduleView, WebhookView
from dirigent.api.problems import not_found

router = APIRouter(prefix="/namespaces/{namespace}", tags=["triggers"])


@router.get("/schedules/{name}", operation_id="getSchedule", summary="One schedule's state")
async def get_schedule(
    engine: EngineDep, _: CanGetSchedules, namespace: Namespace, name: TriggerName
) -> ScheduleView:
    found = await engine.schedule(namespace, name)
    if found is None:
        raise not_found("schedule", name, namespace)
    return found


@router.get(
    "/schedules/{name}/firings", operation_id="listScheduleFirings", summary="Recent firings"
)
async def list_firings(
    engine: EngineDep,
    _: CanGetSchedules,
    namespace: Namespace,
    name: TriggerName,
    limit: Limit = 50,
) -> list[FiringView]:
    if await engine.schedule(namespace, name) is None:
        raise not_found("schedule", name, namespace)
    return await engine.firings(namespace, name, limit=limit)


@router.get("/webhooks/{name}", operation_id="getWebhook", summary="One webhook's state")
async def get_webhook(
    engine: EngineDep, _: CanGetWebhooks, namespace: Namespace, name: TriggerName
) -> WebhookView:
    found = await engine.webhook(namespace, name)
    if found is None:
        raise not_found("webhook", name, namespace)
    return found


@router.get(
    "/webhooks/{name}/deliveries", operation_id="listWebhookDeliveries", summary="Recent deliveries"
)
async def list_deliveries(
    engine: EngineDep, _: CanGetWebhooks, namespace: Namespace, name: TriggerName, limit: Limit = 50
) -> list[DeliveryView]:
    if await engine.webhook(namespace, name) is None:
        raise not_found("webhook", name, namespace)
    return await engine.deliveries(namespace, name, limit=limit)
