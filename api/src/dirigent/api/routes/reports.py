"""A run's report: the markdown its pipeline's ``report`` section rendered when it finished.

Alerts link here (``run.report_url``), so a person reading an alert reaches the report with
one click; a run whose pipeline declares no report (or whose report did not render) has none.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from dirigent.api.deps import CanGetRuns, EngineDep, Namespace, RunId
from dirigent.api.problems import not_found

router = APIRouter(prefix="/namespaces/{namespace}/runs/{run_id}", tags=["runs"])


@router.get(
    "/report",
    operation_id="getRunReport",
    summary="The run's markdown report",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/markdown": {"schema": {"type": "string"}}}}},
)
async def get_report(
    engine: EngineDep, _: CanGetRuns, namespace: Namespace, run_id: RunId
) -> PlainTextResponse:
    text = await engine.runs.report(namespace, run_id)
    if text is None:
        raise not_found("report", f"of run {run_id}", namespace)
    return PlainTextResponse(text, media_type="text/markdown; charset=utf-8")
