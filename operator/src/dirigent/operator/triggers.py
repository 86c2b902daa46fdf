"""Schedule and Webhook resources: engine rows owned by their resource, tied to a Pipeline.

Invariants:
- a trigger whose Pipeline does not exist (or is deactivated) in the engine is Ready=False,
  reason PipelineNotFound; it is reconciled again the moment that Pipeline becomes Ready
  (``registry`` looks its dependents up in an index keyed by namespace and pipeline name),
  never by a timer;
- a Webhook's token reaches the engine as ``secret_values["token"]`` (see ``tokens``), and
  its optional HMAC secret as ``secret_values["hmacSecret"]``;
- an engine that does not store a kind yet (``apply.kind.unsupported``) is reported as
  Ready=False, reason Unsupported, not as a problem with the resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dirigent.engine import ProblemsError
from dirigent.engine.shapes.manifests.schedule import Schedule
from dirigent.engine.shapes.manifests.webhook import Webhook
from dirigent.engine.shapes.problems import Problem

from .bodies import problems_status, to_manifest
from .conditions import condition, set_condition
from .context import Context, Reconciled
from .kube import ObjectRef
from .tokens import ROTATE_ANNOTATION, TokenSecretNotOwned, ensure_token, secret_name

__all__ = ["delete_trigger", "reconcile_trigger"]

HMAC_FIELD = "hmacSecret"


def _outcome(
    body: Mapping[str, Any],
    ok: bool,
    reason: str,
    message: str,
    extra: Mapping[str, Any] | None = None,
    problems: list[Problem] | None = None,
    result: str | None = None,
) -> Reconciled:
    generation = body["metadata"].get("generation")
    conditions = (body.get("status") or {}).get("conditions")
    status = {
        "observedGeneration": generation,
        "problems": problems_status(problems or []),
        "conditions": set_condition(
            conditions, condition("Ready", ok, reason, message, generation)
        ),
        **(extra or {}),
    }
    return Reconciled(status, ok, result or ("ok" if ok else "invalid"))


async def _webhook_secrets(
    ctx: Context, body: Mapping[str, Any], manifest: Webhook, extra: dict[str, Any]
) -> tuple[dict[str, str] | None, str | None, bool]:
    """The secret values for apply, a missing-secret message, and whether a rotation happened."""
    ref = ObjectRef.of(body)
    annotations = body["metadata"].get("annotations") or {}
    try:
        token = await ensure_token(ctx.kube, ref, annotations)
    except TokenSecretNotOwned as refused:
        return None, str(refused), False
    extra["tokenSecret"] = secret_name(ref.name)
    extra["path"] = f"{ctx.settings.hook_base_path.rstrip('/')}/{{token}}"
    values = {"token": token.value}
    hmac = manifest.spec.hmac_secret_ref
    if hmac is not None:
        found = await ctx.kube.secret(ref.namespace, hmac.name)
        what = "does not exist" if found is None else found.missing(hmac.key)
        if found is None or what is not None:
            return None, f"Secret {hmac.name} (spec.hmacSecretRef) {what} in {ref.namespace}", False
        values[HMAC_FIELD] = found.data[hmac.key]
    return values, None, token.rotated


async def reconcile_trigger(ctx: Context, body: Mapping[str, Any]) -> Reconciled:
    ref = ObjectRef.of(body)
    manifest, problems = to_manifest(body)
    if manifest is None or not isinstance(manifest, Schedule | Webhook):
        return _outcome(body, False, "Invalid", problems[0].render(), problems=problems)
    pipeline = manifest.spec.pipeline
    found = await ctx.engine.pipelines.get(ref.namespace, pipeline)
    if found is None or not found.active:
        message = (
            f"Pipeline {pipeline} is not active in namespace {ref.namespace}; "
            "this is reconciled again as soon as it is"
        )
        return _outcome(body, False, "PipelineNotFound", message)
    extra: dict[str, Any] = {}
    values: dict[str, str] | None = None
    rotated = False
    if isinstance(manifest, Webhook):
        values, missing, rotated = await _webhook_secrets(ctx, body, manifest, extra)
        if missing is not None:
            return _outcome(body, False, "SecretMissing", missing, extra)
    try:
        await ctx.engine.manifests.apply(
            manifest, ref.namespace, secret_values=values, owner_uid=ref.uid
        )
    except ProblemsError as err:
        if any(p.code == "apply.kind.unsupported" for p in err.problems):
            message = f"this engine does not store {ref.kind} resources yet"
            return _outcome(body, False, "Unsupported", message, extra, result="error")
        return _outcome(body, False, "Invalid", err.problems[0].render(), extra, err.problems)
    view = (
        await ctx.engine.triggers.schedule(ref.namespace, ref.name)
        if ref.kind == "Schedule"
        else None
    )
    next_fire = view.next_fire_at if view is not None else None
    if next_fire is not None:
        extra["nextFire"] = next_fire.isoformat().replace("+00:00", "Z")
    outcome = _outcome(
        body, True, "Applied", f"{ref.kind} is active for pipeline {pipeline}", extra
    )
    if rotated:
        return Reconciled(outcome.status, True, "ok", annotations={ROTATE_ANNOTATION: None})
    return outcome


async def delete_trigger(ctx: Context, body: Mapping[str, Any]) -> None:
    ref = ObjectRef.of(body)
    ctx.metrics.observe(ref.kind, ref.namespace, ref.name, None)
    try:
        await ctx.engine.manifests.delete(ref.kind, ref.namespace, ref.name, "Retain")
    except ProblemsError as err:
        # An engine that never stored this kind holds nothing to delete.
        if not any(p.code == "delete.kind.unsupported" for p in err.problems):
            raise
