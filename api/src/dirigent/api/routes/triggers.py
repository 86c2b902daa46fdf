"""Read views of a namespace's triggers: schedules and their firings, webhooks and their
deliveries, listed by name in keyset pages like pipelines (a webhook's token is never shown:
the engine keeps only its hash, and the view carries its prefix)."""

from __future__ import annotations

from fastapi import APIRouter

from dirigent.api.deps import CanGetSchedules, CanGetWebhooks, EngineDep, Limit, Namespace
from dirigent.api.models import DeliveryView, FiringView, ScheduleView, WebhookView
from dirigent.api.problems import existing
from dirigent.api.routes.named import Name, NamedReads, add_named_reads

router = APIRouter(prefix="/namespaces/{namespace}", tags=["triggers"])

add_named_reads(
    router,
    NamedReads(
        plural="schedules",
        kind="schedule",
        model=ScheduleView,
        page=lambda engine, ns, after, limit: engine.schedules(ns, cursor=after, limit=limit),
        one=lambda engine, ns, name: engine.schedule(ns, name),
        list_summary="List schedules by name",
        get_summary="One schedule's state",
    ),
    operation="Schedule",
)
add_named_reads(
    router,
    NamedReads(
        plural="webhooks",
        kind="webhook",
        model=WebhookView,
        page=lambda engine, ns, after, limit: engine.webhooks(ns, cursor=after, limit=limit),
        one=lambda engine, ns, name: engine.webhook(ns, name),
        list_summary="List webhooks by name (tokens never shown)",
        get_summary="One webhook's state",
    ),
    operation="Webhook",
)


@router.get(
    "/schedules/{name}/firings", operation_id="listScheduleFirings", summary="Recent firings"
)
async def list_firings(
    engine: EngineDep, _: CanGetSchedules, namespace: Namespace, name: Name, limit: Limit = 50
) -> list[FiringView]:
    existing(await engine.schedule(namespace, name), "schedule", name, namespace)
    return await engine.firings(namespace, name, limit=limit)


@router.get(
    "/webhooks/{name}/deliveries", operation_id="listWebhookDeliveries", summary="Recent deliveries"
)
async def list_deliveries(
    engine: EngineDep, _: CanGetWebhooks, namespace: Namespace, name: Name, limit: Limit = 50
) -> list[DeliveryView]:
    existing(await engine.webhook(namespace, name), "webhook", name, namespace)
    return await engine.deliveries(namespace, name, limit=limit)
