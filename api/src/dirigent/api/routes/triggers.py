"""Read views of a namespace's triggers: schedules and their firings, webhooks and their
deliveries, listed by name in keyset pages like pipelines (a webhook's token is never shown:
the engine keeps only its hash, and the view carries its prefix)."""

from __future__ import annotations

from fastapi import APIRouter

from dirigent.api.deps import (
    After,
    CanGetSchedules,
    CanGetWebhooks,
    CanListSchedules,
    CanListWebhooks,
    EngineDep,
    Limit,
    Namespace,
    TriggerName,
)
from dirigent.api.models import DeliveryView, FiringView, Page, ScheduleView, WebhookView
from dirigent.api.problems import not_found

router = APIRouter(prefix="/namespaces/{namespace}", tags=["triggers"])


@router.get("/schedules", operation_id="listSchedules", summary="List schedules by name")
async def list_schedules(
    engine: EngineDep,
    _: CanListSchedules,
    namespace: Namespace,
    limit: Limit = 50,
    after: After = None,
) -> Page[ScheduleView]:
    return await engine.schedules(namespace, cursor=after, limit=limit)


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


@router.get(
    "/webhooks", operation_id="listWebhooks", summary="List webhooks by name (tokens never shown)"
)
async def list_webhooks(
    engine: EngineDep,
    _: CanListWebhooks,
    namespace: Namespace,
    limit: Limit = 50,
    after: After = None,
) -> Page[WebhookView]:
    return await engine.webhooks(namespace, cursor=after, limit=limit)


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
