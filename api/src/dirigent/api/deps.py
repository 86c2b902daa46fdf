"""Dependencies of the routes, as named ``Annotated`` aliases.

A route declares what it needs in its signature — the engine, a principal allowed to do one
thing, a namespace, a page — and nothing else; authentication and authorisation happen here,
once, for every route under ``/api/v1``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Header, Path, Query, Request, Security, params
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BeforeValidator

from dirigent.api.auth import Auth, Permission, Principal, StreamBudget
from dirigent.api.problems import ApiProblem
from dirigent.engine import Engine
from dirigent.sdk import ENTITY_NAME_PATTERN, NAMESPACE_PATTERN, STEP_NAME_PATTERN

_bearer = HTTPBearer(auto_error=False, description="A Kubernetes token, or the dev token.")


def _engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def _auth(request: Request) -> Auth:
    auth: Auth = request.app.state.auth
    return auth


def _budget(request: Request) -> StreamBudget:
    budget: StreamBudget = request.app.state.streams
    return budget


EngineDep = Annotated[Engine, Depends(_engine)]
AuthDep = Annotated[Auth, Depends(_auth)]
Streams = Annotated[StreamBudget, Depends(_budget)]


async def _principal(
    request: Request,
    auth: Annotated[Auth, Depends(_auth)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    known: Principal | None = getattr(request.state, "principal", None)
    if known is not None:  # authenticated by the guard before the body was read
        return known
    unauthenticated = ApiProblem(
        401,
        "auth.unauthenticated",
        "send a valid bearer token (Authorization: Bearer <token>)",
        headers={"WWW-Authenticate": "Bearer"},
    )
    if credentials is None or not credentials.credentials:
        raise unauthenticated
    principal = await auth.authenticate(credentials.credentials)
    if principal is None:
        raise unauthenticated
    return principal


def allowed(verb: str, resource: str, subresource: str = "") -> params.Security:
    """A dependency: the principal, once the cluster says it holds this permission here.

    Declared as a ``Security`` whose one scope is the permission (``create pipelines/run``),
    so the OpenAPI document names it on the operation as a role of the bearer scheme, and
    the route table in docs/api.md shows it.
    """
    permission = Permission(verb, resource, subresource)

    async def check(
        request: Request,
        auth: Annotated[Auth, Depends(_auth)],
        principal: Annotated[Principal, Depends(_principal)],
    ) -> Principal:
        await authorize(auth, principal, permission, request.path_params.get("namespace"))
        return principal

    dependency: params.Security = Security(check, scopes=[str(permission)])
    return dependency


async def authorize(
    auth: Auth, principal: Principal, permission: Permission, namespace: str | None
) -> None:
    """Raise the 403 Problem naming ``permission`` unless the principal holds it here."""
    if not await auth.authorize(principal, permission, namespace):
        where = f" in namespace {namespace}" if namespace else ""
        resource = f"{permission.resource}/{permission.subresource}".rstrip("/")
        raise ApiProblem(
            403,
            "auth.forbidden",
            f"{principal.name} may not {permission}{where}",
            params={"verb": permission.verb, "resource": resource},
        )


CanListPipelines = Annotated[Principal, allowed("list", "pipelines")]
CanGetPipelines = Annotated[Principal, allowed("get", "pipelines")]
CanApplyPipelines = Annotated[Principal, allowed("create", "pipelines", "apply")]
CanRunPipelines = Annotated[Principal, allowed("create", "pipelines", "run")]
CanListRuns = Annotated[Principal, allowed("list", "runs")]
CanGetRuns = Annotated[Principal, allowed("get", "runs")]
CanCancelRuns = Annotated[Principal, allowed("update", "runs", "cancel")]
CanRetryRuns = Annotated[Principal, allowed("create", "runs", "retry")]
CanListConnections = Annotated[Principal, allowed("list", "connections")]
CanGetConnections = Annotated[Principal, allowed("get", "connections")]
CanGetSchedules = Annotated[Principal, allowed("get", "schedules")]
CanGetWebhooks = Annotated[Principal, allowed("get", "webhooks")]
CanListSchedules = Annotated[Principal, allowed("list", "schedules")]
CanListWebhooks = Annotated[Principal, allowed("list", "webhooks")]
CanListBlocks = Annotated[Principal, allowed("list", "blocks")]
CanListWorkers = Annotated[Principal, allowed("list", "workers")]
CanGetSystem = Annotated[Principal, allowed("get", "system")]
CanBackfillPipelines = Annotated[Principal, allowed("create", "pipelines", "backfill")]

Namespace = Annotated[
    str, Path(min_length=1, max_length=63, pattern=NAMESPACE_PATTERN, description="A namespace.")
]
PipelineName = Annotated[
    str, Path(min_length=1, max_length=63, pattern=ENTITY_NAME_PATTERN, description="A pipeline.")
]
RunId = Annotated[int, Path(ge=1, le=2**63 - 1, description="A run's id.")]
ArtifactId = Annotated[int, Path(ge=1, le=2**63 - 1, description="An artifact's id.")]
Limit = Annotated[int, Query(ge=1, le=500, description="Rows per page.")]
After = Annotated[
    str | None,
    Query(max_length=512, description="The `next` of the previous page; opaque."),
]
StepQuery = Annotated[
    str | None, Query(max_length=63, pattern=STEP_NAME_PATTERN, description="Only this step.")
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        description="Repeat a request with the same key and get the first answer back.",
    ),
]
RequiredIdempotencyKey = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        description="Required: a repeated request with the same key does not act twice.",
    ),
]
_ISO_8601 = re.compile(
    r"^\d{4}-\d{2}-\d{2}([Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?)?$"
)


def _iso_8601(value: object) -> object:
    # Pydantic would also read "0.5" as a Unix time; the document promises date-time text.
    if isinstance(value, str) and not _ISO_8601.match(value):
        raise ValueError("expected an RFC 3339 date-time such as 2026-01-31T12:00:00Z")
    return value


Timestamp = Annotated[datetime, BeforeValidator(_iso_8601)]
LastEventId = Annotated[
    str | None,
    Header(alias="Last-Event-ID", max_length=512, description="Resume a stream after this id."),
]
