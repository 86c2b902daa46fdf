"""The validating admission webhook: ``kubectl apply`` of a bad manifest is refused at once.

It runs the validation the engine's apply runs, offline and against the catalog, and
answers with every problem (location, code, message) in one refusal. What it checks
against is the cluster as the request sees it, not the engine: a Pipeline may require a
Connection applied in the same ``kubectl apply`` that the operator has not synced yet, and a
Schedule may name a Pipeline applied a second earlier. So references are checked against
the resources that exist (kopf indexes), and their absence is left to the reconcile, which
reports it in status.

Only spec changes are judged: an UPDATE that leaves ``spec`` alone (kopf's own annotations,
finalizers, labels) is always allowed, so an object admitted while the operator was down can
still be finalized and deleted.

Failure policy: Ignore. When the operator is down, the apiserver admits dirigent resources
without asking; they are validated by the reconcile when the operator returns, an invalid
Pipeline is Ready=False with its problems, and the engine keeps running its last good
version. Fail would instead block every apply (and every GitOps sync) of the four kinds for
as long as the operator is away.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from dirigent.engine import (
    ProblemsError,
    check_against_catalog,
    check_pipeline,
    check_schedule_against,
    check_webhook_against,
)
from dirigent.engine.shapes.manifests.connection import Connection
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.manifests.schedule import Schedule
from dirigent.engine.shapes.manifests.webhook import Webhook
from dirigent.engine.shapes.problems import Problem, sort_problems

from .bodies import to_manifest
from .context import Context
from .pipelines import parsed

__all__ = ["judge", "spec_changed"]

_UNKNOWN_CONNECTION = "pipeline.connection.unknown"


def spec_changed(
    operation: str | None, body: Mapping[str, Any], old: Mapping[str, Any] | None
) -> bool:
    """Whether the request is one admission must judge."""
    if operation not in ("CREATE", "UPDATE"):
        return False
    if body.get("metadata", {}).get("deletionTimestamp"):
        return False
    return operation == "CREATE" or old is None or old.get("spec") != body.get("spec")


async def judge(
    ctx: Context,
    body: Mapping[str, Any],
    namespace: str,
    *,
    connections: Collection[str],
    pipeline_body: Mapping[str, Any] | None,
) -> list[Problem]:
    """Every problem with the object, in a stable order; empty when it may be admitted."""
    manifest, problems = to_manifest(body)
    if manifest is None:
        return sort_problems(problems)
    if isinstance(manifest, Pipeline):
        problems = check_pipeline(manifest) + _against_catalog(ctx, manifest, connections)
        if any(p.code == _UNKNOWN_CONNECTION for p in problems):
            # The index may trail a Connection created a moment ago in the same apply.
            listed = await ctx.kube.names("Connection", namespace)
            problems = check_pipeline(manifest) + _against_catalog(ctx, manifest, listed)
    elif isinstance(manifest, Connection):
        problems = await _connection_problems(ctx, manifest, namespace)
    else:
        target = parsed(pipeline_body) if pipeline_body is not None else None
        if target is not None and isinstance(manifest, Webhook):
            problems = check_webhook_against(manifest, target)
        elif target is not None and isinstance(manifest, Schedule):
            problems = check_schedule_against(manifest, target)
    return sort_problems(problems)


def _against_catalog(
    ctx: Context, manifest: Pipeline, connections: Collection[str]
) -> list[Problem]:
    # ``requires.pipelines`` is left to the reconcile, as a trigger's pipeline is: a Pipeline
    # may require one applied later in the same sync, and is re-reconciled once it is Ready.
    return check_against_catalog(
        manifest,
        ctx.engine.catalog,
        connections=connections,
        enabled_unsafe=ctx.engine.enabled_unsafe,
        storage_schemes=ctx.engine.catalog.storage_schemes,
    )


async def _connection_problems(ctx: Context, manifest: Connection, namespace: str) -> list[Problem]:
    # A dry-run apply without the secret values: the Secrets are read at reconcile (and may
    # be applied after the Connection), so only their absence is not a problem here.
    try:
        await ctx.engine.manifests.apply(manifest, namespace, dry_run=True)
    except ProblemsError as err:
        return [p for p in err.problems if p.code != "connection.secret.missing"]
    return []
