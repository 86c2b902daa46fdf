"""What a run wrote down: artifact metadata, paged, and each artifact's content, streamed.

The content route opens the object before it answers, so every failure has its status: no
such artifact or no object behind it is 404, a Range past the end is 416 (with
``Content-Range: bytes */<size>``), a store that does not answer is a 503 Problem. Only then
does it stream, 200 or 206 with ``Content-Length``, ``Content-Range``, ``Accept-Ranges`` and
the content's SHA-256 as ``ETag``. A store failing mid-stream (after its own retries) ends the
response short of its ``Content-Length``, which a client sees as a broken download, never as
a complete one nor a response that hangs.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from dirigent.api.deps import After, ArtifactId, CanGetRuns, EngineDep, Limit, Namespace, RunId
from dirigent.api.models import ArtifactView, Page, ProblemDocument
from dirigent.api.problems import ApiProblem, not_found
from dirigent.sdk import (
    InvalidRange,
    ObjectNotFound,
    ObjectReader,
    StorageRefused,
    StorageUnavailable,
)

router = APIRouter(prefix="/namespaces/{namespace}/runs/{run_id}/artifacts", tags=["artifacts"])

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


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
    return found[0]  # the content is never opened, so it holds nothing


@router.get(
    "/{artifact_id}/content",
    operation_id="getRunArtifactContent",
    summary="One artifact's content, in its own content type (Range: bytes=... for a part)",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"application/octet-stream": {"schema": {"type": "string"}}}},
        206: {"description": "The range asked for (Content-Range says which)."},
        404: {"model": ProblemDocument, "description": "No such artifact, or its object is gone."},
        416: {"model": ProblemDocument, "description": "The range starts past the end."},
        503: {"model": ProblemDocument, "description": "The artifact store does not answer."},
    },
)
async def get_artifact_content(
    engine: EngineDep,
    _: CanGetRuns,
    namespace: Namespace,
    run_id: RunId,
    artifact_id: ArtifactId,
    range: Annotated[
        str | None, Header(description="bytes=<first>-<last>, bytes=<first>- or bytes=-<n>")
    ] = None,
) -> StreamingResponse:
    found = await engine.runs.artifact(namespace, run_id, artifact_id)
    if found is None:
        raise not_found("artifact", artifact_id, namespace)
    view, content = found
    wanted = byte_range(range, view.size)
    offset, length = wanted or (0, None)
    stack = AsyncExitStack()
    try:
        reader = await stack.enter_async_context(content.open(offset, length))
    except ObjectNotFound:
        raise ApiProblem(
            404,
            "artifact.content.not_found",
            f"artifact {artifact_id} of run {run_id} is recorded, but its object is gone "
            "from the artifact store (removed by hand, or by a retention outside dirigent)",
        ) from None
    except InvalidRange:
        raise unsatisfiable(view.size) from None
    except (StorageUnavailable, StorageRefused) as err:
        raise ApiProblem(
            503, "storage.unavailable", f"the artifact store cannot serve this artifact: {err}"
        ) from None
    return StreamingResponse(
        _stream(reader, stack),
        status_code=206 if wanted is not None else 200,
        media_type=view.content_type,
        headers=_headers(reader, view.digest, partial=wanted is not None),
        # Also runs when the body was never started (a client gone before the first byte).
        background=BackgroundTask(stack.aclose),
    )


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``(offset, length)`` of a single ``bytes=`` range, or None to send everything.

    A header that is not one well-formed byte range is ignored, as RFC 9110 allows (several
    ranges are answered whole); a well-formed one that selects nothing is a 416.
    """
    match = _RANGE.match(header.strip()) if header else None
    if match is None or match.group(1) == match.group(2) == "":
        return None
    first, last = match.group(1), match.group(2)
    if first == "":  # the last n bytes
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise unsatisfiable(size)
        return max(0, size - suffix), min(suffix, size)
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        raise unsatisfiable(size)
    return start, min(end, size - 1) - start + 1


def unsatisfiable(size: int) -> ApiProblem:
    return ApiProblem(
        416,
        "artifact.range.unsatisfiable",
        f"the range starts past the end of the content ({size} bytes)",
        params={"size": size},
        headers={"Content-Range": f"bytes */{size}"},
    )


def _headers(reader: ObjectReader, digest: str, *, partial: bool) -> dict[str, str]:
    headers = {
        "Content-Length": str(reader.length),
        "Accept-Ranges": "bytes",
        "ETag": f'"{digest}"',
    }
    if partial:
        last = reader.offset + reader.length - 1
        headers["Content-Range"] = f"bytes {reader.offset}-{last}/{reader.info.size}"
    return headers


async def _stream(reader: ObjectReader, stack: AsyncExitStack) -> AsyncIterator[bytes]:
    try:
        async for chunk in reader.chunks(64 * 1024):
            yield chunk
    finally:
        await stack.aclose()
