"""The plan of an apply: what a new document changes against the stored current version.

A dry run answers with the action and digest from the real apply (rolled back); this module
adds what a reviewer wants beside them — which steps were added, removed or changed, and
which other top-level spec fields moved. Both sides are canonical documents, so a difference
here is a difference in meaning, never in formatting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dirigent.engine.shapes.manifests.export import canonical_dict
from dirigent.engine.shapes.manifests.loading import Manifest


@dataclass(frozen=True)
class PlanChanges:
    previous_digest: str | None = None
    steps_added: list[str] = field(default_factory=list)
    steps_removed: list[str] = field(default_factory=list)
    steps_changed: list[str] = field(default_factory=list)
    changed_fields: list[str] = field(default_factory=list)


def changes(
    current: dict[str, Any] | None, manifest: Manifest, previous_digest: str | None
) -> PlanChanges:
    new_spec: dict[str, Any] = canonical_dict(manifest).get("spec", {})
    old_spec: dict[str, Any] = (current or {}).get("spec", {})
    old_steps, new_steps = old_spec.get("steps", {}), new_spec.get("steps", {})
    fields = (set(old_spec) | set(new_spec)) - {"steps"}
    return PlanChanges(
        previous_digest=previous_digest,
        steps_added=sorted(set(new_steps) - set(old_steps)),
        steps_removed=sorted(set(old_steps) - set(new_steps)),
        steps_changed=sorted(
            s for s in set(old_steps) & set(new_steps) if old_steps[s] != new_steps[s]
        ),
        changed_fields=sorted(f for f in fields if old_spec.get(f) != new_spec.get(f)),
    )
