"""Pipeline resources into the engine: validate, apply by digest, say so in status.

Invariants:
- an invalid edit never replaces the active version: the engine refuses it as a whole, and
  status says Ready=False (reason Invalid) with every problem while ``engineVersion`` still
  names the version the engine runs;
- the same spec applied twice is one version (the engine applies by digest), so a resume
  after a restart, or a status-only event, costs a digest comparison and no new version;
- deletion honours ``spec.deletionPolicy`` (Retain deactivates and keeps history, Delete
  cancels runs in flight and then deletes history); the finalizer goes even when the engine
  holds no row any more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dirigent.engine import ProblemsError
from dirigent.engine.shapes.manifests.pipeline import Pipeline

from .bodies import problems_status, to_manifest
from .conditions import condition, set_condition
from .context import Context, Reconciled, log
from .kube import ObjectRef

__all__ = ["delete_pipeline", "reconcile_pipeline", "required_connections"]


def _provenance(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = body["metadata"]
    return {
        "door": "kubernetes",
        "uid": meta.get("uid"),
        "generation": meta.get("generation"),
        "resourceVersion": meta.get("resourceVersion"),
    }


async def reconcile_pipeline(ctx: Context, body: Mapping[str, Any]) -> Reconciled:
    """Apply the Pipeline; the status to write, whatever the engine answered."""
    ref = ObjectRef.of(body)
    generation = body["metadata"].get("generation")
    conditions = (body.get("status") or {}).get("conditions")
    manifest, problems = to_manifest(body)
    if manifest is not None:
        try:
            applied = await ctx.engine.manifests.apply(
                manifest, ref.namespace, provenance=_provenance(body), owner_uid=ref.uid
            )
        except ProblemsError as err:
            problems = err.problems
        else:
            ready = condition("Ready", True, "Applied", f"version {applied.version} is active")
            return Reconciled(
                status={
                    "observedGeneration": generation,
                    "engineVersion": applied.version,
                    "digest": applied.digest,
                    "problems": [],
                    "conditions": set_condition(conditions, ready),
                },
                ready=True,
                result="ok",
            )
    current = await ctx.engine.pipelines.get(ref.namespace, ref.name)
    active = current is not None and current.active and current.version is not None
    still = f"version {current.version} stays active" if active and current else "none is active"
    message = f"{len(problems)} problem(s) in this spec; {still}: {problems[0].render()}"
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "problems": problems_status(problems),
        "conditions": set_condition(
            conditions, condition("Ready", False, "Invalid", message, generation)
        ),
    }
    if active and current is not None:
        status["engineVersion"] = current.version
        status["digest"] = current.digest
    log.info("pipeline refused", namespace=ref.namespace, name=ref.name, problems=len(problems))
    return Reconciled(status=status, ready=False, result="invalid")


async def delete_pipeline(ctx: Context, body: Mapping[str, Any]) -> None:
    ref = ObjectRef.of(body)
    policy = (body.get("spec") or {}).get("deletionPolicy", "Retain")
    if policy not in ("Retain", "Delete"):
        policy = "Retain"  # an invalid spec never escalates to deleting history
    deleted = await ctx.engine.manifests.delete("Pipeline", ref.namespace, ref.name, policy)
    ctx.metrics.observe(ref.kind, ref.namespace, ref.name, None)
    if policy == "Delete":
        what = f"cancelled {deleted.runs_cancelled} run(s) in flight, deleted its history"
    else:
        what = "deactivated in the engine, history kept"
    await ctx.kube.event(ref, type_="Normal", reason="Deleted", message=f"{policy}: {what}")
    log.info(
        "pipeline deleted",
        namespace=ref.namespace,
        name=ref.name,
        policy=policy,
        found=deleted.found,
        history_deleted=deleted.history_deleted,
        runs_cancelled=deleted.runs_cancelled,
    )


def _required(body: Mapping[str, Any], what: str) -> list[str]:
    requires = (body.get("spec") or {}).get("requires") or {}
    names = requires.get(what) if isinstance(requires, dict) else None
    return [n for n in names or [] if isinstance(n, str)] if isinstance(names, list) else []


def required_connections(body: Mapping[str, Any]) -> list[str]:
    """The connections a Pipeline names in ``spec.requires.connections`` (never raises)."""
    return _required(body, "connections")


def required_pipelines(body: Mapping[str, Any]) -> list[str]:
    """The other pipelines a Pipeline names in ``spec.requires.pipelines`` (never raises)."""
    own = (body.get("metadata") or {}).get("name")
    return [n for n in _required(body, "pipelines") if n != own]


def parsed(body: Mapping[str, Any]) -> Pipeline | None:
    manifest, _ = to_manifest(body)
    return manifest if isinstance(manifest, Pipeline) else None
