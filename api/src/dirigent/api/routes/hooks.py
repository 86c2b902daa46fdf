"""``POST /hooks/{token}``: webhook intake, outside ``/api/v1`` and without authentication.

The token in the path is the credential; everything else — lookup by hash, the rate limit
before the body is read, the body cap, HMAC, mapping, recording — is the engine's
(``Engine.receive_webhook``). The route only hands it the raw stream and the headers.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from dirigent.api.problems import documented, problem_response
from dirigent.engine import Engine


def hooks_router(engine: Engine) -> APIRouter:
    router = APIRouter(tags=["hooks"])

    @router.post(
        "/hooks/{token}",
        status_code=202,
        operation_id="receiveWebhook",
        summary="Start the webhook's pipeline from a JSON payload.",
        responses={
            202: {"description": "Accepted: {runId}."},
            **documented(401, 404, 413, 422, 429),
        },
    )
    async def receive(token: str, request: Request) -> JSONResponse:
        answer = await engine.triggers.receive_webhook(
            token, headers=request.headers, body=request.stream()
        )
        if answer.run_id is not None:
            return JSONResponse(answer.body(), status_code=answer.status_code)
        # A refusal is the one Problem shape; its instance never repeats the token.
        return problem_response(
            request,
            answer.status_code,
            answer.code or "webhook.refused",
            answer.message or "the webhook refused this delivery",
            headers=answer.headers(),
            instance="/hooks/{token}",
        )

    return router
