"""RBAC rules of every dirigent identity, written once for the chart and for config/rbac.

Why here: the chart (``files/rbac/*.yaml``, read by ``templates/rbac.yaml``) and the
kustomize config (``config/rbac``) must grant exactly the same verbs; both are generated
from these lists and drift-checked. Least privilege, per process:

- operator: the four kinds (watch, patch status, finalizers), Secrets (a Connection's
  secretKeyRefs, a Webhook's token Secret), Events, kopf's peering objects, its own
  validating webhook configuration, and CRD / namespace discovery kopf does at start-up.
- api: authenticates callers with TokenReview and authorises them with SubjectAccessReview
  (docs/security.md), and reads the four kinds.
- worker: Jobs, pods and pod logs, only in the namespaces where docker.run runs (a Role
  per namespace, never cluster-wide).
- people: viewer / editor / admin, aggregated into view / edit / admin.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ROLES", "rules"]

Rule = dict[str, list[str]]

GROUP = "dirigent.dev"
KINDS = ["pipelines", "schedules", "webhooks", "connections"]
READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete", "deletecollection"]

# Sub-resources the API authorises as verbs on dirigent.dev (docs/security.md).
RUN_ACTIONS = ["pipelines/run"]
RUN_CONTROL = ["runs/cancel", "runs/retry"]


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Rule:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


ROLES: dict[str, list[Rule]] = {
    "operator": [
        _rule([GROUP], KINDS, [*READ, "patch", "update"]),
        _rule([GROUP], [f"{k}/status" for k in KINDS], ["get", "patch", "update"]),
        _rule([GROUP], [f"{k}/finalizers" for k in KINDS], ["update"]),
        _rule([""], ["secrets"], [*READ, "create", "update", "patch"]),
        _rule(["", "events.k8s.io"], ["events"], ["create", "patch"]),
        _rule(["kopf.dev"], ["clusterkopfpeerings", "kopfpeerings"], [*READ, "patch"]),
        _rule(
            ["admissionregistration.k8s.io"],
            ["validatingwebhookconfigurations"],
            [*READ, "create", "patch", "update"],
        ),
        _rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], READ),
        _rule([""], ["namespaces"], READ),
    ],
    "api": [
        _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
        _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
        _rule([GROUP], KINDS, READ),
    ],
    "worker": [
        _rule(["batch"], ["jobs"], [*READ, "create", "delete"]),
        _rule([""], ["pods"], READ),
        _rule([""], ["pods/log"], ["get"]),
    ],
    "viewer": [
        _rule([GROUP], [*KINDS, "runs"], READ),
        _rule([GROUP], [f"{k}/status" for k in KINDS], ["get"]),
    ],
    "editor": [
        _rule([GROUP], [*KINDS, "runs"], READ),
        _rule([GROUP], ["pipelines", "schedules", "webhooks"], WRITE),
        _rule([GROUP], RUN_ACTIONS, ["create"]),
        _rule([GROUP], RUN_CONTROL, ["create", "update"]),
    ],
    "admin": [
        _rule([GROUP], [*KINDS, "runs"], [*READ, *WRITE]),
        _rule([GROUP], [f"{k}/status" for k in KINDS], ["get", "update", "patch"]),
        _rule([GROUP], RUN_ACTIONS, ["create"]),
        _rule([GROUP], RUN_CONTROL, ["create", "update"]),
    ],
}

AGGREGATE_TO = {"viewer": "view", "editor": "edit", "admin": "admin"}


def rules(role: str) -> list[Any]:
    return [dict(r) for r in ROLES[role]]
