"""Assembles the REST API: routers, Problem handlers, metrics, state. Nothing else lives here.

``create_app(engine, auth=...)`` is the one way to build it; the OpenAPI document comes from
the same assembly without an engine (``dirigent.api.openapi``), so the committed document and
the served one cannot differ.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, FastAPI

from dirigent.api import problems
from dirigent.api.auth import Auth, StreamBudget
from dirigent.api.guard import RequestGuard
from dirigent.api.metrics import ApiMetrics, MetricsMiddleware
from dirigent.api.openapi import install_document
from dirigent.api.problems import PROBLEM_RESPONSES
from dirigent.api.routes import (
    artifacts,
    backfill,
    catalog,
    connections,
    health,
    pipelines,
    reports,
    runs,
    system,
    triggers,
)
from dirigent.api.routes.hooks import hooks_router
from dirigent.api.streams import RunFeeds, StreamSettings
from dirigent.engine import Engine, EngineSettings

API_PREFIX = "/api/v1"


def assemble(extra_routers: Sequence[APIRouter] = ()) -> FastAPI:
    """The application's routes and handlers, without any state (what OpenAPI describes)."""
    app = FastAPI(
        title="dirigent",
        version="v1",
        description="The dirigent REST API: pipelines, runs, logs and event streams.",
        docs_url=None,
        redoc_url=None,
    )
    problems.install(app)
    v1 = APIRouter(prefix=API_PREFIX, responses=PROBLEM_RESPONSES)
    for resource in (
        pipelines,
        runs,
        artifacts,
        connections,
        triggers,
        catalog,
        system,
        reports,
        backfill,
    ):
        v1.include_router(resource.router)
    app.include_router(v1)
    app.include_router(health.router)
    # At the root, outside /api/v1: the webhook intake POST /hooks/{token} (routes/hooks.py),
    # authenticated by its token rather than a principal, and any router a caller adds.
    for router in extra_routers:
        app.include_router(router)
    install_document(app)
    return app


def create_app(
    engine: Engine,
    *,
    auth: Auth,
    metrics: ApiMetrics | None = None,
    streams: StreamBudget | None = None,
    stream_settings: StreamSettings | None = None,
    extra_routers: Sequence[APIRouter] = (),
) -> FastAPI:
    """The API on ``engine``; ``auth`` decides who may do what (StaticToken or ClusterAuth)."""
    app = assemble([hooks_router(engine), *extra_routers])
    app.state.engine = engine
    app.state.auth = auth
    app.state.metrics = metrics or ApiMetrics()
    app.state.streams = streams or StreamBudget()
    app.state.stream_settings = stream_settings or StreamSettings()
    app.state.feeds = RunFeeds(engine, poll=app.state.stream_settings.poll)
    # A test may build the app around no engine at all: the default limit then.
    settings = getattr(engine, "settings", None) or EngineSettings()
    app.add_middleware(RequestGuard, auth=auth, max_body=settings.api_max_body)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    return app
