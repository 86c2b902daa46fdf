"""``POST /hooks/{token}``: webhook intake, outside ``/api/v1`` and without authentication.

The token in the path is the credential; everything else — lookup by hash, the rate limit
before the body is read, the body cap, HMAC, mapping, recording — is the engine's
(``Engine.receive_webhook``). The route only hands it the raw stream and the headers.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from dirigent.engine import Engine


def hooks_router(engine: Engine) -> APIRouter:
    router = APIRouter(tags=["hooks"])

    @router.post(
        "/hooks/{token}",
        status_code=202,
        summary="Start the webhook's pipeline from a JSON payload.",
        responses={
            202: {"description": "Accepted: {runId}."},
            404: {"description": "No webhook answers at this address."},
        },
    )
    async def receive(token: str, request: Request) -> JSONResponse:
        answer = await engine.receive_webhook(token, headers=request.headers, body=request.stream())
        return JSONResponse(
            answer.body(),
            status_code=answer.status_code,
            headers=answer.headers(),
            media_type="application/json" if answer.run_id else "application/problem+json",
        )

    return router
