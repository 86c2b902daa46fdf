"""Refusing cheaply: a stranger or an oversized body is turned away before a route runs.

FastAPI reads and parses a request body before it resolves a route's dependencies, so
without this a 4 MB body with no token was parsed (and answered 422) before anyone asked
who sent it. ``RequestGuard`` is plain ASGI in front of the app:

- under ``/api/v1`` the bearer token is authenticated first (401 Problem otherwise); the
  principal rides in the request state, and the route's permission check reuses it;
- a body larger than ``max_body`` is refused with 413: at once when ``Content-Length``
  says so, or as soon as the streamed bytes pass the limit. ``/hooks/...`` is left to the
  webhook intake, which streams deliveries against its own limit (``webhook_max_body``).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dirigent.api.auth import Auth
from dirigent.api.problems import BodyTooLarge, problem_response, too_large

API_PREFIX = "/api/v1"
HOOKS_PREFIX = "/hooks/"


class RequestGuard:
    def __init__(self, app: ASGIApp, *, auth: Auth, max_body: int) -> None:
        self.app = app
        self.auth = auth
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(HOOKS_PREFIX):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if scope["path"].startswith(API_PREFIX):
            principal = await self._authenticate(request)
            if principal is None:
                await _unauthenticated(request)(scope, receive, send)
                return
            scope.setdefault("state", {})["principal"] = principal
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await too_large(request, self.max_body)(scope, receive, send)
            return
        await self.app(scope, _limited(receive, self.max_body), send)

    async def _authenticate(self, request: Request) -> Any:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return await self.auth.authenticate(token.strip())


def _unauthenticated(request: Request) -> JSONResponse:
    return problem_response(
        request,
        401,
        "auth.unauthenticated",
        "send a valid bearer token (Authorization: Bearer <token>)",
        headers={"WWW-Authenticate": "Bearer"},
    )


def _limited(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(limit)
        return message

    return counted
