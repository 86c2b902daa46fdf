"""Backfill: one run per window a schedule's cadence already went past (``$backfill``).

The route is a few lines over ``Engine.backfill``: the body names the schedule whose cadence
draws the windows and a half-open ``[from, to)``; the answer lists every window with the run
it became or the problems that refused it (a pipeline's concurrency policy is not overridden).
"""

from __future__ import annotations

from fastapi import APIRouter

from dirigent.api.deps import CanBackfillPipelines, EngineDep, Namespace, PipelineName
from dirigent.api.models import BackfillRequest, BackfillResult

router = APIRouter(prefix="/namespaces/{namespace}/pipelines", tags=["pipelines"])


@router.post(
    "/{name}/$backfill",
    operation_id="backfillPipeline",
    summary="One run per window a schedule's cadence went past in [from, to)",
)
async def backfill_pipeline(
    engine: EngineDep,
    _: CanBackfillPipelines,
    namespace: Namespace,
    name: PipelineName,
    body: BackfillRequest,
) -> BackfillResult:
    return await engine.triggers.backfill(namespace, name, body)
