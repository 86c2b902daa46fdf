"""What the engine answers about triggers, alerts and backfills: one model per shape.

The operator writes Schedule and Webhook status from ``ScheduleView`` and ``WebhookView``;
the API serves the same models. Nothing here carries a token or a secret: a webhook is shown
by the prefix of its token, never the token.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dirigent.engine.problems import Problem


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class ScheduleView(_View):
    namespace: str
    name: str
    pipeline: str
    paused: bool
    next_fire_at: dt.datetime | None
    last_fire_at: dt.datetime | None
    last_run_id: int | None
    last_error: str | None


class FiringView(_View):
    id: int
    scheduled_for: dt.datetime
    fired_at: dt.datetime
    result: str  # fired | failed
    misfire: bool
    run_id: int | None
    message: str | None


class WebhookView(_View):
    namespace: str
    name: str
    pipeline: str
    enabled: bool
    path: str = Field(description="The URL path, with the token shortened to its prefix.")
    last_delivery_at: dt.datetime | None
    last_delivery_result: str | None


class DeliveryView(_View):
    id: int
    received_at: dt.datetime
    result: str  # accepted | refused
    reason: str | None
    status_code: int
    run_id: int | None
    message: str | None


class NotificationView(_View):
    id: int
    run_id: int
    rule: str
    event: str
    notifier: str
    status: str  # queued | running | delivered | failed
    attempts: int
    subject: str
    body: str
    last_error: str | None
    created_at: dt.datetime
    delivered_at: dt.datetime | None


class BackfillWindow(_View):
    start: dt.datetime
    end: dt.datetime
    run_id: int | None = None
    status: str | None = None  # the run's status when created
    problems: list[Problem] = Field(default_factory=list)


class BackfillResult(_View):
    pipeline: str
    schedule: str
    dry_run: bool
    created: int
    refused: int
    windows: list[BackfillWindow]


def row_view(model: type[_View], row: Any) -> Any:
    return model.model_validate(dict(row))
