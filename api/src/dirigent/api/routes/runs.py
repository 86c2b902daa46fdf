"""Runs of a namespace: listing with filters, detail, grids, cancel, retry, logs, events."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from dirigent.api.auth import Auth, Permission, Principal, StreamBudget
from dirigent.api.deps import (
    After,
    CanCancelRuns,
    CanGetRuns,
    CanListRuns,
    CanRetryRuns,
    EngineDep,
    LastEventId,
    Limit,
    Namespace,
    PipelineName,
    RequiredIdempotencyKey,
    RunId,
    StepQuery,
    Streams,
    Timestamp,
)
from dirigent.api.models import (
    AttemptView,
    CancelReceipt,
    CancelRequest,
    FailureView,
    ItemView,
    LogView,
    Page,
    RetryReceipt,
    RetryRequest,
    RunDetail,
    RunStatus,
    RunSummary,
)
from dirigent.api.problems import documented, not_found
from dirigent.api.streams import Access, Position, follow_logs, run_events
from dirigent.engine import Engine, RunFilter
from dirigent.engine.shapes.views import decode_key
from dirigent.sdk import STEP_NAME_PATTERN

router = APIRouter(prefix="/namespaces/{namespace}/runs", tags=["runs"])

TriggerKind = Literal["manual", "api", "schedule", "webhook", "backfill", "pipeline", "cli"]
SSE = {200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}}, **documented(429)}


@router.get("", operation_id="listRuns", summary="List runs, newest first, with filters")
async def list_runs(
    engine: EngineDep,
    _: CanListRuns,
    namespace: Namespace,
    pipeline: Annotated[PipelineName | None, Query(max_length=63)] = None,
    status: RunStatus | None = None,
    trigger: TriggerKind | None = None,
    created_after: Timestamp | None = None,
    created_before: Timestamp | None = None,
    limit: Limit = 50,
    after: After = None,
) -> Page[RunSummary]:
    where = RunFilter(pipeline, status, trigger, created_after, created_before)
    return await engine.runs.page(namespace, where, cursor=after, limit=limit)


@router.get("/{run_id}", operation_id="getRun", summary="A run and its DAG view")
async def get_run(
    engine: EngineDep, _: CanGetRuns, namespace: Namespace, run_id: RunId
) -> RunDetail:
    found = await engine.runs.get(namespace, run_id)
    if found is None:
        raise not_found("run", run_id, namespace)
    return found


@router.get("/{run_id}/items", operation_id="listRunItems", summary="A step's fan-out grid")
async def list_items(
    engine: EngineDep,
    _: CanGetRuns,
    namespace: Namespace,
    run_id: RunId,
    step: Annotated[str, Query(max_length=63, pattern=STEP_NAME_PATTERN)],
    limit: Limit = 50,
    after: After = None,
) -> Page[ItemView]:
    return await engine.runs.items(namespace, run_id, step, cursor=after, limit=limit)


@router.get("/{run_id}/attempts", operation_id="listRunAttempts", summary="A run's attempts")
async def list_attempts(
    engine: EngineDep,
    _: CanGetRuns,
    namespace: Namespace,
    run_id: RunId,
    step: StepQuery = None,
    limit: Limit = 50,
    after: After = None,
) -> Page[AttemptView]:
    return await engine.runs.attempts(namespace, run_id, step, cursor=after, limit=limit)


@router.get(
    "/{run_id}/failures", operation_id="listRunFailures", summary="The last failure of each step"
)
async def list_failures(
    engine: EngineDep, _: CanGetRuns, namespace: Namespace, run_id: RunId
) -> list[FailureView]:
    return await engine.runs.failures(namespace, run_id)


@router.post(
    "/{run_id}/$cancel", operation_id="cancelRun", summary="Cancel a run", responses=documented(409)
)
async def cancel_run(
    engine: EngineDep,
    principal: CanCancelRuns,
    namespace: Namespace,
    run_id: RunId,
    body: CancelRequest | None = None,
) -> CancelReceipt:
    reason = (body or CancelRequest()).reason
    told = await engine.runs.cancel(namespace, run_id, reason=f"{reason} ({principal.name})")
    status = await engine.runs.status(namespace, run_id) or "unknown"
    return CancelReceipt(run_id=run_id, status=status, remotes_told=told)


@router.post(
    "/{run_id}/$retry",
    operation_id="retryRun",
    summary="Retry a failed step, or exactly its failed items (Idempotency-Key required)",
    status_code=201,
    responses=documented(409),
)
async def retry_run(
    engine: EngineDep,
    _: CanRetryRuns,
    namespace: Namespace,
    run_id: RunId,
    body: RetryRequest,
    idempotency_key: RequiredIdempotencyKey,
) -> RetryReceipt:
    done = await engine.runs.retry(namespace, run_id, body.step, idempotency_key=idempotency_key)
    return RetryReceipt(
        run_id=run_id, step=body.step, attempt_ids=list(done.attempt_ids), created=done.created
    )


@router.get(
    "/{run_id}/$logs",
    operation_id="listRunLogs",
    summary="A run's log lines by id; follow=sse tails them as server-sent events",
    response_model=Page[LogView],
    responses=SSE,
)
async def list_logs(
    request: Request,
    engine: EngineDep,
    principal: CanGetRuns,
    streams: Streams,
    namespace: Namespace,
    run_id: RunId,
    follow: Literal["sse"] | None = None,
    limit: Limit = 50,
    after: After = None,
    last_event_id: LastEventId = None,
) -> Page[LogView] | StreamingResponse:
    if follow is None:
        return await engine.runs.logs(namespace, run_id, cursor=after, limit=limit)
    cursor = after or last_event_id
    # A cursor we never sent is refused before the stream opens.
    log = decode_key(cursor, int) or 0
    await _require_run(engine, namespace, run_id)
    settings, feeds = request.app.state.stream_settings, request.app.state.feeds
    access = _access(request, namespace)
    frames = follow_logs(feeds, namespace, run_id, log, settings, access)
    return _stream(streams, principal, frames)


@router.get(
    "/{run_id}/$events",
    operation_id="streamRunEvents",
    summary="The whole run as one SSE stream: attempt, step, run and log events",
    responses=SSE,
    response_class=StreamingResponse,
)
async def stream_events(
    request: Request,
    engine: EngineDep,
    principal: CanGetRuns,
    streams: Streams,
    namespace: Namespace,
    run_id: RunId,
    last_event_id: LastEventId = None,
) -> StreamingResponse:
    start = Position.parse(last_event_id)
    await _require_run(engine, namespace, run_id)
    settings, feeds = request.app.state.stream_settings, request.app.state.feeds
    frames = run_events(feeds, namespace, run_id, start, settings, _access(request, namespace))
    return _stream(streams, principal, frames)


def _access(request: Request, namespace: str) -> Access:
    """The stream's access, asked again while it is open: is the token still valid, and may
    its principal still get runs here (a revoked RoleBinding, an expired token)."""
    auth: Auth = request.app.state.auth
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    permission = Permission("get", "runs")

    async def check() -> str | None:
        principal = await auth.authenticate(token.strip()) if scheme.lower() == "bearer" else None
        if principal is None:
            return "the token that opened this stream is no longer accepted"
        if not await auth.authorize(principal, permission, namespace):
            return f"{principal.name} may no longer {permission} in namespace {namespace}"
        return None

    return check


async def _require_run(engine: Engine, namespace: str, run_id: int) -> None:
    if await engine.runs.status(namespace, run_id) is None:
        raise not_found("run", run_id, namespace)


def _stream(
    streams: StreamBudget, principal: Principal, frames: AsyncGenerator[bytes, None]
) -> StreamingResponse:
    """Count the stream against the principal's budget for as long as it is open."""
    streams.take(principal)

    async def held() -> AsyncGenerator[bytes, None]:
        try:
            async with contextlib.aclosing(frames):
                async for chunk in frames:
                    yield chunk
        finally:
            streams.give_back(principal)

    return EventStream(held())


class EventStream(StreamingResponse):
    """A stream whose generator is closed when the response ends, however it ends.

    A client that goes away leaves the generator suspended at a ``yield``; closing it here
    runs its ``finally`` (stop the subscription, give the budget back) at once rather than
    whenever the garbage collector gets to it.
    """

    def __init__(self, frames: AsyncGenerator[bytes, None]) -> None:
        super().__init__(
            frames,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._frames = frames

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._frames.aclose()
