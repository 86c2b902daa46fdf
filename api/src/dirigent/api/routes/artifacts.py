"""What a run wrote down: artifact metadata, paged, and each artifact's content, streamed."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from dirigent.api.deps import After, ArtifactId, CanGetRuns, EngineDep, Limit, Namespace, RunId
from dirigent.api.models import ArtifactView, Page
from dirigent.api.problems import not_found

router = APIRouter(prefix="/namespaces/{namespace}/runs/{run_id}/artifacts", tags=["artifacts"])


@router.get("", operation_id="listRunArtifacts", summary="A run's artifacts, in write order")
async def list_artifacts(
    engine: EngineDep,
    _: CanGetRuns,
    namespace: Namespace,
    run_id: RunId,
    limit: Limit = 50,
    after: After = None,
) -> Page[ArtifactView]:
    return await engine.runs.artifacts(namespace, run_id, cursor=after, limit=limit)


@router.get("/{artifact_id}", operation_id="getRunArtifact", summary="One artifact's metadata")
async def get_artifact(
    engine: EngineDep, _: CanGetRuns, namespace: Namespace, run_id: RunId, artifact_id: ArtifactId
) -> ArtifactView:
    found = await engine.runs.artifact(namespace, run_id, artifact_id)
    if found is None:
        raise not_found("artifact", artifact_id, namespace)
    return found[0]  # the content iterator is never started, so it holds nothing


@router.get(
    "/{artifact_id}/content",
    operation_id="getRunArtifactContent",
    summary="One artifact's content, in its own content type",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/octet-stream": {"schema": {"type": "string"}}}}},
)
async def get_artifact_content(
    engine: EngineDep, _: CanGetRuns, namespace: Namespace, run_id: RunId, artifact_id: ArtifactId
) -> StreamingResponse:
    found = await engine.runs.artifact(namespace, run_id, artifact_id)
    if found is None:
        raise not_found("artifact", artifact_id, namespace)
    view, content = found
    return StreamingResponse(
        content,
        media_type=view.content_type,
        headers={"ETag": f'"{view.digest}"'},
    )
