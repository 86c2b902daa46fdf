"""Read views of a namespace's triggers: schedules and their firings, webhooks and their
deliveries, listed by name in keyset pages like pipelines (a webhook's token is never shown:
the engine keeps only its hash, and the view carries its prefix)."""

from __future__ import annotations

from fastapi import APIRouter

from dirigent.api.deps import CanGetSchedules, CanGetWebhooks, EngineDep, Limit, Namespace
from dirigent.api.models import DeliveryView, FiringView, ScheduleView, WebhookView
from dirigent.api.problems import existing
from dirigent.api.routes.named import Name, add_named_reads

router = APIRouter(prefix="/namespaces/{namespace}", tags=["triggers"])

add_named_reads(
    router,
    ScheduleView,
    "schedule",
    "List schedules by name",
    "One schedule's state",
    page=lambda e: e.triggers.schedules,
    one=lambda e: e.triggers.schedule,
)
add_named_reads(
    router,
    WebhookView,
    "webhook",
    "List webhooks by name (tokens never shown)",
    "One webhook's state",
    page=lambda e: e.triggers.webhooks,
    one=lambda e: e.triggers.webhook,
)


@router.get(
    "/schedules/{name}/firings", operation_id="listScheduleFirings", summary="Recent firings"
)
async def list_firings(
    engine: EngineDep, _: CanGetSchedules, namespace: Namespace, name: Name, limit: Limit = 50
) -> list[FiringView]:
    existing(await engine.triggers.schedule(namespace, name), "schedule", name, namespace)
    return await engine.triggers.firings(namespace, name, limit=limit)


@router.get(
    "/webhooks/{name}/deliveries", operation_id="listWebhookDeliveries", summary="Recent deliveries"
)
async def list_deliveries(
    engine: EngineDep, _: CanGetWebhooks, namespace: Namespace, name: Name, limit: Limit = 50
) -> list[DeliveryView]:
    existing(await engine.triggers.webhook(namespace, name), "webhook", name, namespace)
    return await engine.triggers.deliveries(namespace, name, limit=limit)
