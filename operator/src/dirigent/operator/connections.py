"""Connection resources into the engine: settings in the clear, Secret values sealed.

Invariants:
- the operator is the only reader of Secrets: it reads each ``secretKeyRef`` and hands the
  values to the engine's apply, which seals them; workers never need Secret access;
- a missing Secret or key is Ready=False, reason SecretMissing, naming the reference, and
  nothing is applied (the last synced values stay in use);
- a changed Secret re-syncs every Connection that references it (``registry`` keeps an
  index of references by namespace and Secret name); an unchanged one costs a digest
  comparison in the engine and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dirigent.engine import ProblemsError
from dirigent.engine.shapes.manifests.connection import Connection

from .bodies import problems_status, to_manifest
from .conditions import condition, set_condition
from .context import Context, Reconciled
from .kube import FoundSecret, ObjectRef

__all__ = ["delete_connection", "reconcile_connection", "secret_references"]


def secret_references(body: Mapping[str, Any]) -> list[str]:
    """Names of the Secrets a Connection reads (never raises on a malformed spec)."""
    secrets = (body.get("spec") or {}).get("secrets") or {}
    if not isinstance(secrets, dict):
        return []
    return sorted(
        {
            r["name"]
            for r in secrets.values()
            if isinstance(r, dict) and isinstance(r.get("name"), str)
        }
    )


async def _read_values(
    ctx: Context, namespace: str, manifest: Connection
) -> tuple[dict[str, str], list[str]]:
    values: dict[str, str] = {}
    missing: list[str] = []
    cache: dict[str, FoundSecret | None] = {}
    for field, ref in sorted(manifest.spec.secrets.items()):
        if ref.name not in cache:
            cache[ref.name] = await ctx.kube.secret(namespace, ref.name)
        found = cache[ref.name]
        if found is None:
            missing.append(f"spec.secrets.{field}: Secret {ref.name} does not exist in {namespace}")
        elif (why := found.missing(ref.key)) is not None:
            missing.append(f"spec.secrets.{field}: Secret {ref.name} {why}")
        else:
            values[field] = found.data[ref.key]
    return values, missing


def _status(
    body: Mapping[str, Any], ok: bool, reason: str, message: str, problems: Any = ()
) -> dict[str, Any]:
    generation = body["metadata"].get("generation")
    conditions = (body.get("status") or {}).get("conditions")
    return {
        "observedGeneration": generation,
        "problems": problems_status(list(problems)),
        "conditions": set_condition(
            conditions, condition("Ready", ok, reason, message, generation)
        ),
    }


async def reconcile_connection(ctx: Context, body: Mapping[str, Any]) -> Reconciled:
    ref = ObjectRef.of(body)
    manifest, problems = to_manifest(body)
    if not isinstance(manifest, Connection):
        return Reconciled(
            _status(body, False, "Invalid", problems[0].render(), problems), False, "invalid"
        )
    values, missing = await _read_values(ctx, ref.namespace, manifest)
    if missing:
        return Reconciled(
            _status(body, False, "SecretMissing", "; ".join(missing)), False, "invalid"
        )
    try:
        await ctx.engine.manifests.apply(
            manifest, ref.namespace, secret_values=values, owner_uid=ref.uid
        )
    except ProblemsError as err:
        status = _status(body, False, "Invalid", err.problems[0].render(), err.problems)
        return Reconciled(status, False, "invalid")
    fields = ", ".join(sorted(values)) or "no secret fields"
    return Reconciled(_status(body, True, "Synced", f"synced ({fields})"), True, "ok")


async def delete_connection(ctx: Context, body: Mapping[str, Any]) -> None:
    ref = ObjectRef.of(body)
    ctx.metrics.observe(ref.kind, ref.namespace, ref.name, None)
    await ctx.engine.manifests.delete("Connection", ref.namespace, ref.name)
