"""A typed client of the REST API (httpx), the one the CLI and scripts use.

Every method returns the same models the server answers with (``dirigent.api.models``), so
"the client parses what the server writes" holds by construction; every refusal raises
``ApiError`` carrying the server's Problem. Streams are async iterators of ``StreamEvent``;
``watch`` follows a run's ``$events`` to its ``end``, reopening from the last id after an
``expired`` sentinel or a dropped connection, so a watcher sees every event exactly once.

The exception tree::

    ApiError                     a non-2xx answer; ``.problem`` is the ProblemDocument
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from dirigent.api.models import (
    ApplyPlan,
    ArtifactView,
    AttemptView,
    BackfillRequest,
    BackfillResult,
    BlockView,
    CancelReceipt,
    ConnectionView,
    DeliveryView,
    FailureView,
    FiringView,
    Health,
    ItemView,
    LogView,
    Page,
    PipelineDetail,
    PipelineSummary,
    PipelineVersionView,
    ProblemDocument,
    RetryReceipt,
    RunCreatedView,
    RunDetail,
    RunSummary,
    ScheduleView,
    StorageSchemeView,
    SystemInfo,
    ValidationReport,
    WebhookView,
    WorkerView,
)

__all__ = ["ApiError", "Client", "StreamEvent"]

M = TypeVar("M", bound=BaseModel)
V1 = "/api/v1"


class ApiError(Exception):
    def __init__(self, problem: ProblemDocument) -> None:
        super().__init__(f"{problem.status} {problem.code}: {problem.detail}")
        self.problem = problem


@dataclass(frozen=True)
class StreamEvent:
    """One server-sent event: its name (attempt, step, run, log, end, expired), id and data."""

    event: str
    id: str | None
    data: dict[str, Any]


class Client:
    """``async with Client(base_url, token) as api: await api.list_runs("default")``."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    # --- plumbing --------------------------------------------------------------------

    async def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        response = await self.http.request(method, path, **kw)
        if response.status_code >= 400:
            raise ApiError(_problem(response))
        return response

    async def _model(self, model: type[M], method: str, path: str, **kw: Any) -> M:
        return model.model_validate_json((await self._call(method, path, **kw)).content)

    @staticmethod
    def _ns(namespace: str) -> str:
        return f"{V1}/namespaces/{namespace}"

    # --- pipelines -------------------------------------------------------------------

    async def list_pipelines(
        self, namespace: str, *, limit: int = 50, after: str | None = None
    ) -> Page[PipelineSummary]:
        params = _params(limit=limit, after=after)
        path = f"{self._ns(namespace)}/pipelines"
        return await self._model(Page[PipelineSummary], "GET", path, params=params)

    async def get_pipeline(self, namespace: str, name: str) -> PipelineDetail:
        return await self._model(PipelineDetail, "GET", f"{self._ns(namespace)}/pipelines/{name}")

    async def list_versions(
        self, namespace: str, name: str, *, limit: int = 50, after: str | None = None
    ) -> Page[PipelineVersionView]:
        path = f"{self._ns(namespace)}/pipelines/{name}/versions"
        params = _params(limit=limit, after=after)
        return await self._model(Page[PipelineVersionView], "GET", path, params=params)

    async def export(self, namespace: str, name: str, version: int | None = None) -> str:
        path = f"{self._ns(namespace)}/pipelines/{name}/$export"
        return (await self._call("GET", path, params=_params(version=version))).text

    async def validate(self, namespace: str, name: str) -> ValidationReport:
        path = f"{self._ns(namespace)}/pipelines/{name}/$validate"
        return await self._model(ValidationReport, "POST", path)

    async def apply(
        self, namespace: str, document: dict[str, Any], *, dry_run: bool = False
    ) -> ApplyPlan:
        path = f"{self._ns(namespace)}/pipelines/$apply"
        params = {"dry_run": "true"} if dry_run else {}
        return await self._model(ApplyPlan, "POST", path, json=document, params=params)

    async def run(
        self,
        namespace: str,
        pipeline: str,
        params: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> RunCreatedView:
        path = f"{self._ns(namespace)}/pipelines/{pipeline}/$run"
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        body = {"params": params or {}}
        return await self._model(RunCreatedView, "POST", path, json=body, headers=headers)

    # --- runs ------------------------------------------------------------------------

    async def list_runs(
        self,
        namespace: str,
        *,
        pipeline: str | None = None,
        status: str | None = None,
        trigger: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> Page[RunSummary]:
        params = _params(
            pipeline=pipeline,
            status=status,
            trigger=trigger,
            created_after=created_after.isoformat() if created_after else None,
            created_before=created_before.isoformat() if created_before else None,
            limit=limit,
            after=after,
        )
        path = f"{self._ns(namespace)}/runs"
        return await self._model(Page[RunSummary], "GET", path, params=params)

    async def get_run(self, namespace: str, run_id: int) -> RunDetail:
        return await self._model(RunDetail, "GET", f"{self._ns(namespace)}/runs/{run_id}")

    async def list_items(
        self, namespace: str, run_id: int, step: str, *, limit: int = 50, after: str | None = None
    ) -> Page[ItemView]:
        path = f"{self._ns(namespace)}/runs/{run_id}/items"
        params = _params(step=step, limit=limit, after=after)
        return await self._model(Page[ItemView], "GET", path, params=params)

    async def list_attempts(
        self,
        namespace: str,
        run_id: int,
        *,
        step: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> Page[AttemptView]:
        path = f"{self._ns(namespace)}/runs/{run_id}/attempts"
        params = _params(step=step, limit=limit, after=after)
        return await self._model(Page[AttemptView], "GET", path, params=params)

    async def failures(self, namespace: str, run_id: int) -> list[FailureView]:
        path = f"{self._ns(namespace)}/runs/{run_id}/failures"
        response = await self._call("GET", path)
        return TypeAdapter(list[FailureView]).validate_json(response.content)

    async def cancel(self, namespace: str, run_id: int, reason: str | None = None) -> CancelReceipt:
        path = f"{self._ns(namespace)}/runs/{run_id}/$cancel"
        body = {"reason": reason} if reason else {}
        return await self._model(CancelReceipt, "POST", path, json=body)

    async def retry(
        self, namespace: str, run_id: int, step: str, *, idempotency_key: str
    ) -> RetryReceipt:
        path = f"{self._ns(namespace)}/runs/{run_id}/$retry"
        headers = {"Idempotency-Key": idempotency_key}
        return await self._model(RetryReceipt, "POST", path, json={"step": step}, headers=headers)

    async def logs(
        self, namespace: str, run_id: int, *, limit: int = 50, after: str | None = None
    ) -> Page[LogView]:
        path = f"{self._ns(namespace)}/runs/{run_id}/$logs"
        params = _params(limit=limit, after=after)
        return await self._model(Page[LogView], "GET", path, params=params)

    async def list_artifacts(
        self, namespace: str, run_id: int, *, limit: int = 50, after: str | None = None
    ) -> Page[ArtifactView]:
        path = f"{self._ns(namespace)}/runs/{run_id}/artifacts"
        params = _params(limit=limit, after=after)
        return await self._model(Page[ArtifactView], "GET", path, params=params)

    async def artifact_content(self, namespace: str, run_id: int, artifact_id: int) -> bytes:
        path = f"{self._ns(namespace)}/runs/{run_id}/artifacts/{artifact_id}/content"
        return (await self._call("GET", path)).content

    # --- streams ---------------------------------------------------------------------

    async def events(
        self, namespace: str, run_id: int, *, last_event_id: str | None = None
    ) -> AsyncIterator[StreamEvent]:
        """One connection to ``$events``: yields until the server closes it."""
        path = f"{self._ns(namespace)}/runs/{run_id}/$events"
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        async for event in self._sse(path, headers=headers):
            yield event

    async def follow_logs(
        self, namespace: str, run_id: int, *, after: str | None = None
    ) -> AsyncIterator[StreamEvent]:
        path = f"{self._ns(namespace)}/runs/{run_id}/$logs"
        params = _params(follow="sse", after=after)
        async for event in self._sse(path, params=params):
            yield event

    async def watch(self, namespace: str, run_id: int) -> AsyncIterator[StreamEvent]:
        """A run's whole story to its ``end``, reconnecting from the last id as needed."""
        last: str | None = None
        while True:
            try:
                async for event in self.events(namespace, run_id, last_event_id=last):
                    if event.event == "expired":
                        break
                    yield event
                    last = event.id or last
                    if event.event == "end":
                        return
            except (httpx.RemoteProtocolError, httpx.ReadError):
                continue

    async def _sse(self, path: str, **kw: Any) -> AsyncIterator[StreamEvent]:
        timeout = httpx.Timeout(self.http.timeout.connect, read=None)
        async with self.http.stream("GET", path, timeout=timeout, **kw) as response:
            if response.status_code >= 400:
                await response.aread()
                raise ApiError(_problem(response))
            fields: dict[str, str] = {}
            async for line in response.aiter_lines():
                if line.startswith(":"):
                    continue
                if line:
                    name, _, value = line.partition(":")
                    fields[name] = value.removeprefix(" ")
                    continue
                if "event" in fields or "data" in fields:
                    yield StreamEvent(
                        fields.get("event", "message"),
                        fields.get("id"),
                        json.loads(fields.get("data", "null")),
                    )
                fields = {}

    # --- catalog and system ----------------------------------------------------------

    async def list_connections(
        self, namespace: str, *, limit: int = 50, after: str | None = None
    ) -> Page[ConnectionView]:
        path = f"{self._ns(namespace)}/connections"
        params = _params(limit=limit, after=after)
        return await self._model(Page[ConnectionView], "GET", path, params=params)

    async def get_connection(self, namespace: str, name: str) -> ConnectionView:
        path = f"{self._ns(namespace)}/connections/{name}"
        return await self._model(ConnectionView, "GET", path)

    async def list_blocks(self) -> list[BlockView]:
        response = await self._call("GET", f"{V1}/blocks")
        return TypeAdapter(list[BlockView]).validate_json(response.content)

    async def list_storage_schemes(self) -> list[StorageSchemeView]:
        response = await self._call("GET", f"{V1}/storage-schemes")
        return TypeAdapter(list[StorageSchemeView]).validate_json(response.content)

    async def list_workers(self, *, limit: int = 50, after: str | None = None) -> Page[WorkerView]:
        params = _params(limit=limit, after=after)
        return await self._model(Page[WorkerView], "GET", f"{V1}/workers", params=params)

    async def system_info(self) -> SystemInfo:
        return await self._model(SystemInfo, "GET", f"{V1}/system/info")

    async def ready(self) -> Health:
        return await self._model(Health, "GET", "/health/ready")

    # --- triggers (issue 12) ---------------------------------------------------------

    async def list_schedules(
        self, namespace: str, *, limit: int = 50, after: str | None = None
    ) -> Page[ScheduleView]:
        path = f"{self._ns(namespace)}/schedules"
        params = _params(limit=limit, after=after)
        return await self._model(Page[ScheduleView], "GET", path, params=params)

    async def get_schedule(self, namespace: str, name: str) -> ScheduleView:
        return await self._model(ScheduleView, "GET", f"{self._ns(namespace)}/schedules/{name}")

    async def list_firings(self, namespace: str, name: str, *, limit: int = 50) -> list[FiringView]:
        path = f"{self._ns(namespace)}/schedules/{name}/firings"
        response = await self._call("GET", path, params={"limit": limit})
        return TypeAdapter(list[FiringView]).validate_json(response.content)

    async def list_webhooks(
        self, namespace: str, *, limit: int = 50, after: str | None = None
    ) -> Page[WebhookView]:
        path = f"{self._ns(namespace)}/webhooks"
        params = _params(limit=limit, after=after)
        return await self._model(Page[WebhookView], "GET", path, params=params)

    async def get_webhook(self, namespace: str, name: str) -> WebhookView:
        return await self._model(WebhookView, "GET", f"{self._ns(namespace)}/webhooks/{name}")

    async def list_deliveries(
        self, namespace: str, name: str, *, limit: int = 50
    ) -> list[DeliveryView]:
        path = f"{self._ns(namespace)}/webhooks/{name}/deliveries"
        response = await self._call("GET", path, params={"limit": limit})
        return TypeAdapter(list[DeliveryView]).validate_json(response.content)

    # --- backfill (issue 13) ---------------------------------------------------------

    async def backfill(
        self,
        namespace: str,
        pipeline: str,
        *,
        schedule: str,
        start: datetime,
        end: datetime,
        params: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> BackfillResult:
        """One run per window of ``schedule`` in ``[start, end)``; ``dry_run`` creates none."""
        body = BackfillRequest(
            schedule=schedule, start=start, end=end, params=params, dry_run=dry_run
        ).model_dump(mode="json", by_alias=True, exclude_none=True)
        path = f"{self._ns(namespace)}/pipelines/{pipeline}/$backfill"
        return await self._model(BackfillResult, "POST", path, json=body)


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _problem(response: httpx.Response) -> ProblemDocument:
    try:
        return ProblemDocument.model_validate_json(response.content)
    except ValueError:
        return ProblemDocument(
            title=response.reason_phrase,
            status=response.status_code,
            detail=response.text[:200] or response.reason_phrase,
            code=f"http.{response.status_code}",
            instance=response.request.url.path,
        )
