"""Every refusal is a Problem: one body shape for every non-2xx, whoever refused.

The handlers installed here turn each way a request can fail into ``application/problem+json``
(``ProblemDocument``): the engine's ``ProblemsError`` (status from the code: ``*.not_found`` is
404, a state conflict 409, anything else 422), request validation (422, one problem per bad
field), routing (404 unknown route, 405 wrong method), authentication (401) and authorisation
(403) raised as ``ApiProblem``, a database that is down (503), and anything unexpected (500,
logged with its traceback, never sent). A client parses failures exactly once.

The exception tree::

    ApiProblem                    raised by routes and auth: status, code, detail, params
    (handled, not defined here)   ProblemsError, EngineUnavailable, RequestValidationError,
                                  starlette HTTPException, Exception
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, TypeVar

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from dirigent.api.metrics import route_template
from dirigent.api.models import PROBLEM_JSON, ProblemDocument
from dirigent.engine.shapes.problems import EngineUnavailable, Problem, ProblemsError, location

log = structlog.get_logger("dirigent.api")
T = TypeVar("T")

CONFLICTS = frozenset(
    {
        "run.pipeline.inactive",
        "run.concurrency.skipped",
        "retry.run.cancelled",
        "retry.step.not_failed",
        "pipeline.delete.runs_in_flight",
    }
)
_ROUTING_CODES = {404: "route.not_found", 405: "method.not_allowed"}


class ApiProblem(Exception):
    """A refusal decided by the API itself (not found, unauthorised, over budget, ...)."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.params = params or {}
        self.headers = headers


def not_found(what: str, name: object, namespace: str | None = None) -> ApiProblem:
    where = f" in namespace {namespace}" if namespace else ""
    return ApiProblem(
        404,
        f"{what}.not_found",
        f"{what} {name} does not exist{where}",
        params={"name": str(name)},
    )


def existing(found: T | None, what: str, name: object, namespace: str | None = None) -> T:
    """``found``, or the 404 Problem for ``what`` ``name`` when there is none."""
    if found is None:
        raise not_found(what, name, namespace)
    return found


def problem_response(
    request: Request,
    status: int,
    code: str,
    detail: str,
    *,
    params: dict[str, Any] | None = None,
    problems: list[Problem] | None = None,
    headers: Mapping[str, str] | None = None,
    instance: str | None = None,
) -> JSONResponse:
    body = ProblemDocument(
        title=HTTPStatus(status).phrase,
        status=status,
        detail=detail,
        code=code,
        params=params or {},
        problems=problems or [],
        instance=instance or request.url.path,
    )
    return JSONResponse(
        body.model_dump(mode="json"), status_code=status, media_type=PROBLEM_JSON, headers=headers
    )


def status_for(problems: list[Problem]) -> int:
    codes = {p.code for p in problems}
    if codes and all(c.endswith("not_found") for c in codes):
        return 404
    if codes & CONFLICTS:
        return 409
    return 422


async def _on_problems(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemsError)
    first = exc.problems[0] if exc.problems else Problem(code="request.refused", message=str(exc))
    return problem_response(
        request,
        status_for(exc.problems),
        first.code if len(exc.problems) == 1 else "request.problems",
        first.message if len(exc.problems) == 1 else exc.summary,
        params=dict(first.params) if len(exc.problems) == 1 else {},
        problems=exc.problems,
    )


async def _on_api_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiProblem)
    return problem_response(
        request, exc.status, exc.code, exc.detail, params=exc.params, headers=exc.headers
    )


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        Problem(
            code="request.invalid",
            message=str(err.get("msg", "invalid value")),
            location=location(*[p for p in err.get("loc", ()) if isinstance(p, str | int)]),
        )
        for err in exc.errors()
    ]
    detail = problems[0].render() if len(problems) == 1 else f"{len(problems)} problems"
    return problem_response(request, 422, "request.invalid", detail, problems=problems)


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = _ROUTING_CODES.get(exc.status_code, f"http.{exc.status_code}")
    detail = (
        f"no route {request.method} {request.url.path}; see /openapi.json"
        if exc.status_code in _ROUTING_CODES
        else str(exc.detail)
    )
    return problem_response(request, exc.status_code, code, detail, headers=exc.headers)


class BodyTooLarge(HTTPException):
    """Raised while a route reads a body past the limit (FastAPI re-raises HTTP exceptions
    from its body parsing; anything else it would answer as a 400)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")
        self.limit = limit


def too_large(request: Request, limit: int) -> JSONResponse:
    return problem_response(
        request,
        413,
        "request.too_large",
        f"the request body is larger than this server takes ({limit} bytes; "
        "DIRIGENT_API_MAX_BODY sets the limit)",
        params={"limit": limit},
    )


async def _on_too_large(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BodyTooLarge)
    return too_large(request, exc.limit)


async def _on_unavailable(request: Request, exc: Exception) -> JSONResponse:
    return problem_response(request, 503, "engine.unavailable", str(exc))


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    # The route's template, never the path: /hooks/{token} would log the webhook's secret.
    log.exception(
        "api.unexpected_error", route=route_template(request.scope), error=type(exc).__name__
    )
    return problem_response(
        request,
        500,
        "server.error",
        "the server failed to answer; the error is in its log",
    )


def install(app: FastAPI) -> None:
    """Answer every refusal of ``app`` with a Problem."""
    app.add_exception_handler(ProblemsError, _on_problems)
    app.add_exception_handler(ApiProblem, _on_api_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(HTTPException, _on_http)
    app.add_exception_handler(BodyTooLarge, _on_too_large)
    app.add_exception_handler(EngineUnavailable, _on_unavailable)
    app.add_exception_handler(Exception, _on_unexpected)


_DESCRIPTIONS = {
    400: "The request body is not parseable.",
    401: "No valid bearer token.",
    403: "The principal may not do this.",
    404: "No such resource.",
    409: "The resource is in a state that refuses this.",
    413: "The body is larger than this endpoint takes.",
    422: "The request or its subject is invalid.",
    429: "Too many open streams for this principal.",
    503: "The database or the cluster does not answer.",
}


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses for these Problem statuses (the document rewrites their media type)."""
    return {s: {"model": ProblemDocument, "description": _DESCRIPTIONS[s]} for s in statuses}


# The refusals every operation under /api/v1 may answer.
PROBLEM_RESPONSES = documented(400, 401, 403, 404, 422, 503)
