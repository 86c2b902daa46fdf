"""The kopf handlers, registered as closures over one ``Context``: a few lines each.

Each handler turns a Kubernetes event into one reconcile call (``pipelines``, ``triggers``,
``connections``) and writes what it decided; no handler holds engine logic. Indexes answer
"who depends on this?" without listing the cluster:

- ``triggers_by_pipeline``: Schedules and Webhooks by (namespace, pipeline), so a Pipeline
  that becomes Ready (or goes away) re-reconciles the triggers waiting on it;
- ``pipelines_by_connection`` and ``pipelines_by_pipeline``: Pipelines by (namespace,
  required connection or pipeline), so a Connection that syncs, or a Pipeline that becomes
  Ready, re-reconciles the Pipelines refused for lack of it;
- ``connections_by_secret``: Connections by (namespace, Secret), so a changed Secret
  re-syncs only the Connections that read it;
- ``connection_names`` and ``pipeline_bodies``: what admission checks references against.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import kopf

from dirigent.engine.shapes.manifests.base import API_GROUP

from .admission import judge, spec_changed
from .bodies import problem_text
from .connections import delete_connection, reconcile_connection, secret_references
from .context import Context, Reconciled
from .health import keep_checking
from .kube import VERSION, ObjectRef
from .pipelines import (
    delete_pipeline,
    reconcile_pipeline,
    required_connections,
    required_pipelines,
)
from .tokens import secret_name
from .trigger_status import refresh_trigger
from .triggers import delete_trigger, reconcile_trigger

__all__ = ["build_registry"]

Reconcile = Callable[[Context, Mapping[str, Any]], Awaitable[Reconciled]]
KIND_PLURALS = {
    "Pipeline": "pipelines",
    "Schedule": "schedules",
    "Webhook": "webhooks",
    "Connection": "connections",
}


def _plain(body: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(dict(body))
    return out


def _ready(body: Mapping[str, Any]) -> bool:
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def _resync_all(
    ctx: Context, reconcile: Reconcile, bodies: Iterable[Mapping[str, Any]]
) -> None:
    """Reconcile objects outside their own handler (dependents), writing through the API."""
    for body in bodies:
        ref = ObjectRef.of(body)
        async with ctx.serialized(ref):
            async with ctx.measured(ref.kind):
                outcome = await reconcile(ctx, body)
            await ctx.write(ref, outcome)


def build_registry(
    ctx: Context, pipelines: dict[tuple[str, str], ObjectRef]
) -> kopf.OperatorRegistry:
    """Every handler of the operator; ``pipelines`` is kept current for the feedback loop."""
    r = kopf.OperatorRegistry()
    _indexes(r)
    _pipeline_handlers(r, ctx, pipelines)
    _trigger_handlers(r, ctx)
    _connection_handlers(r, ctx)
    if ctx.settings.admission:
        _admission_handlers(r, ctx)

    @kopf.on.login(registry=r)
    def login(**kwargs: Any) -> Any:
        return kopf.login_via_client(**kwargs)

    return r


def _indexes(r: kopf.OperatorRegistry) -> None:
    @kopf.index(API_GROUP, VERSION, "schedules", registry=r, id="schedules_by_pipeline")
    @kopf.index(API_GROUP, VERSION, "webhooks", registry=r, id="webhooks_by_pipeline")
    def by_pipeline(**kw: Any) -> Any:
        target = kw["spec"].get("pipeline")
        return {(kw["namespace"], target): _plain(kw["body"])} if isinstance(target, str) else None

    @kopf.index(API_GROUP, VERSION, "pipelines", registry=r, id="pipelines_by_connection")
    def by_connection(**kw: Any) -> Any:
        body = kw["body"]
        return {(kw["namespace"], c): _plain(body) for c in required_connections(body)}

    @kopf.index(API_GROUP, VERSION, "pipelines", registry=r, id="pipelines_by_pipeline")
    def by_required_pipeline(**kw: Any) -> Any:
        body = kw["body"]
        return {(kw["namespace"], p): _plain(body) for p in required_pipelines(body)}

    @kopf.index(API_GROUP, VERSION, "pipelines", registry=r, id="pipeline_bodies")
    def pipeline_bodies(**kw: Any) -> Any:
        return {(kw["namespace"], kw["name"]): _plain(kw["body"])}

    @kopf.index(API_GROUP, VERSION, "connections", registry=r, id="connections_by_secret")
    def by_secret(**kw: Any) -> Any:
        body = kw["body"]
        return {(kw["namespace"], s): _plain(body) for s in secret_references(body)}

    @kopf.index(API_GROUP, VERSION, "webhooks", registry=r, id="webhooks_by_secret")
    def webhook_secrets(**kw: Any) -> Any:
        # Its HMAC Secret and its token Secret: a change to either re-syncs the Webhook.
        body = kw["body"]
        names = {secret_name(kw["name"])}
        hmac = (kw["spec"].get("hmacSecretRef") or {}).get("name")
        if isinstance(hmac, str):
            names.add(hmac)
        return {(kw["namespace"], s): _plain(body) for s in names}

    @kopf.index(API_GROUP, VERSION, "connections", registry=r, id="connection_names")
    def connection_names(**kw: Any) -> Any:
        return {kw["namespace"]: kw["name"]}


def _dependents(index: kopf.Index[Any, Any], key: tuple[str, str]) -> list[Mapping[str, Any]]:
    return [b for b in index.get(key, []) if not _ready(b)]


def _pipeline_handlers(
    r: kopf.OperatorRegistry, ctx: Context, pipelines: dict[tuple[str, str], ObjectRef]
) -> None:
    @kopf.on.resume(API_GROUP, VERSION, "pipelines", registry=r, id="pipeline")
    @kopf.on.create(API_GROUP, VERSION, "pipelines", registry=r, id="pipeline")
    @kopf.on.update(API_GROUP, VERSION, "pipelines", registry=r, id="pipeline")
    async def pipeline_changed(**kw: Any) -> None:
        # Written under the object's lock, not through kopf's patch: a Connection's or a
        # required Pipeline's re-sync of this one may run at once, and the last to check the
        # engine must be the last to write.
        ref = ObjectRef.of(kw["body"])
        key = (ref.namespace, ref.name)
        pipelines[key] = ref
        async with ctx.serialized(ref):
            async with ctx.measured("Pipeline"):
                outcome = await reconcile_pipeline(ctx, kw["body"])
            await ctx.write(ref, outcome)
        if outcome.ready:
            waiting = _dependents(kw["schedules_by_pipeline"], key)
            waiting += _dependents(kw["webhooks_by_pipeline"], key)
            await _resync_all(ctx, reconcile_trigger, waiting)
            requiring = _dependents(kw["pipelines_by_pipeline"], key)
            await _resync_all(ctx, reconcile_pipeline, requiring)

    @kopf.on.delete(API_GROUP, VERSION, "pipelines", registry=r, id="pipeline-deleted")
    async def pipeline_deleted(**kw: Any) -> None:
        ref = ObjectRef.of(kw["body"])
        key = (ref.namespace, ref.name)
        await delete_pipeline(ctx, kw["body"])
        pipelines.pop(key, None)
        affected = [
            *kw["schedules_by_pipeline"].get(key, []),
            *kw["webhooks_by_pipeline"].get(key, []),
        ]
        await _resync_all(ctx, reconcile_trigger, affected)


def _trigger_handlers(r: kopf.OperatorRegistry, ctx: Context) -> None:
    for plural in ("schedules", "webhooks"):

        @kopf.on.resume(API_GROUP, VERSION, plural, registry=r, id="trigger")
        @kopf.on.create(API_GROUP, VERSION, plural, registry=r, id="trigger")
        @kopf.on.update(API_GROUP, VERSION, plural, registry=r, id="trigger")
        async def trigger_changed(**kw: Any) -> None:
            # Written here rather than through kopf's patch (applied after the handler
            # returns): the Pipeline's re-sync of its dependents writes under the same lock,
            # so whichever of the two checks the engine last also writes last.
            ref = ObjectRef.of(kw["body"])
            async with ctx.serialized(ref):
                async with ctx.measured(ref.kind):
                    outcome = await reconcile_trigger(ctx, kw["body"])
                await ctx.write(ref, outcome)

        @kopf.on.delete(API_GROUP, VERSION, plural, registry=r, id="trigger-deleted")
        async def trigger_deleted(**kw: Any) -> None:
            await delete_trigger(ctx, kw["body"])

        # Failed firings and refused deliveries start no run, so no engine event shows them.
        @kopf.timer(
            API_GROUP,
            VERSION,
            plural,
            registry=r,
            id="trigger-status",
            interval=ctx.settings.resync_seconds,
        )
        async def trigger_status(**kw: Any) -> None:
            body = kw["body"]
            await refresh_trigger(ctx, body["kind"], kw["namespace"], kw["name"], body)


def _connection_handlers(r: kopf.OperatorRegistry, ctx: Context) -> None:
    @kopf.on.resume(API_GROUP, VERSION, "connections", registry=r, id="connection")
    @kopf.on.create(API_GROUP, VERSION, "connections", registry=r, id="connection")
    @kopf.on.update(API_GROUP, VERSION, "connections", registry=r, id="connection")
    async def connection_changed(**kw: Any) -> None:
        # Under the object's lock, reading its Secrets inside it: a Secret's re-sync of this
        # Connection takes the same lock, so whichever runs last read the newest Secret and
        # writes last — the engine never keeps a stale value while status says Synced.
        ref = ObjectRef.of(kw["body"])
        async with ctx.serialized(ref):
            async with ctx.measured("Connection"):
                outcome = await reconcile_connection(ctx, kw["body"])
            await ctx.write(ref, outcome)
        if outcome.ready:
            waiting = _dependents(kw["pipelines_by_connection"], (ref.namespace, ref.name))
            await _resync_all(ctx, reconcile_pipeline, waiting)

    @kopf.on.delete(API_GROUP, VERSION, "connections", registry=r, id="connection-deleted")
    async def connection_deleted(**kw: Any) -> None:
        await delete_connection(ctx, kw["body"])

    @kopf.daemon(
        API_GROUP,
        VERSION,
        "connections",
        registry=r,
        id="connection-health",
        cancellation_timeout=1.0,
    )
    async def connection_checked(**kw: Any) -> None:
        await keep_checking(ctx, kw["body"], kw["stopped"])

    @kopf.on.event("", "v1", "secrets", registry=r, id="secret-changed")
    async def secret_changed(**kw: Any) -> None:
        # Every Secret event arrives here; only those a Connection reads cost anything.
        key = (kw["namespace"], kw["name"])
        readers = list(kw["connections_by_secret"].get(key, []))
        await _resync_all(ctx, reconcile_connection, readers)
        await _resync_all(ctx, reconcile_trigger, list(kw["webhooks_by_secret"].get(key, [])))


def _admission_handlers(r: kopf.OperatorRegistry, ctx: Context) -> None:
    for plural in KIND_PLURALS.values():

        @kopf.on.validate(
            API_GROUP,
            VERSION,
            plural,
            registry=r,
            id=f"validate-{plural}",
            operations=["CREATE", "UPDATE"],
            ignore_failures=True,
        )
        async def validate(**kw: Any) -> None:
            body = kw["body"]
            if not spec_changed(kw.get("operation"), body, kw.get("old")):
                return
            connection_names = kw["connection_names"]
            pipeline_bodies = kw["pipeline_bodies"]
            namespace = body.get("metadata", {}).get("namespace") or ""
            target = (body.get("spec") or {}).get("pipeline")
            found = list(pipeline_bodies.get((namespace, target), [])) if target else []
            problems = await judge(
                ctx,
                body,
                namespace,
                connections=set(connection_names.get(namespace, [])),
                pipeline_body=found[0] if found else None,
            )
            if problems:
                name = body.get("metadata", {}).get("name")
                head = f"{body.get('kind')} {name} has {len(problems)} problem(s):"
                raise kopf.AdmissionError(f"{head}\n{problem_text(problems)}", code=422)
