"""RBAC rules of every dirigent identity, written once for the chart and for config/rbac.

Why here: the chart (``files/rbac/*.yaml``, read by ``templates/rbac.yaml``) and the
kustomize config (``config/rbac``) must grant exactly the same verbs; both are generated
from these lists and drift-checked. Least privilege, per process:

- operator: the four kinds (watch, patch, status), Secrets (a Connection's secretKeyRefs,
  a Webhook's token Secret), Events, the leader Lease, its own admission configurations,
  and CRD / namespace discovery kopf does at start-up.
- api: authenticates callers with TokenReview and authorises them with SubjectAccessReview
  (docs/security.md), and reads the four kinds.
- worker: Jobs, pods and pod logs, and the Secret and NetworkPolicy each Job owns, only in
  the namespaces where docker.run runs (a Role per namespace, never cluster-wide).
- people: viewer / editor / admin, aggregated into view / edit / admin.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ROLES", "rules"]

Rule = dict[str, list[str]]

GROUP = "dirigent.dev"
KINDS = ["pipelines", "schedules", "webhooks", "connections"]
READ = ["get", "list", "watch"]


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Rule:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


ROLES: dict[str, list[Rule]] = {
    # The operator's rules are the ones docs/security.md explains line by line (and that
    # e2e/test_rbac.py runs the operator on): the four kinds, their status, the token
    # Secret's owner reference, Secrets, Events, the leader Lease, its admission
    # configurations (kopf writes a validating and an empty mutating one under one name),
    # and kopf's start-up discovery.
    "operator": [
        _rule([GROUP], KINDS, [*READ, "patch"]),
        _rule([GROUP], [f"{k}/status" for k in KINDS], ["get", "patch"]),
        _rule([GROUP], ["webhooks/finalizers"], ["update"]),
        _rule([""], ["secrets"], [*READ, "create", "patch"]),
        _rule([""], ["events"], ["create", "patch"]),
        _rule(["events.k8s.io"], ["events"], ["create", "patch"]),
        _rule(["coordination.k8s.io"], ["leases"], ["get", "create", "update"]),
        _rule(
            ["admissionregistration.k8s.io"],
            ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
            [*READ, "create", "patch"],
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
        # docker.run's envFromConnection values go in a Secret per Job, owned by the Job.
        _rule([""], ["secrets"], ["create", "patch", "delete"]),
        # ... and its pods' network (none unless the step asks) is a NetworkPolicy per Job.
        _rule(["networking.k8s.io"], ["networkpolicies"], ["create", "patch", "delete"]),
    ],
    # People's roles are additive: viewer aggregates into view, edit and admin; editor into
    # edit and admin; admin into admin only.
    "viewer": [
        _rule([GROUP], KINDS, READ),
        _rule([GROUP], ["runs"], ["get", "list"]),
        # The REST API's cluster-wide reads: the block catalog, the workers registry, system info.
        _rule([GROUP], ["blocks", "workers"], ["list"]),
        _rule([GROUP], ["system"], ["get"]),
    ],
    "editor": [
        _rule([GROUP], KINDS, ["create", "update", "patch", "delete"]),
        _rule([GROUP], ["pipelines/run", "pipelines/apply", "pipelines/backfill"], ["create"]),
        _rule([GROUP], ["runs/cancel"], ["update"]),
        _rule([GROUP], ["runs/retry"], ["create"]),
    ],
    "admin": [
        _rule([GROUP], KINDS, ["deletecollection"]),
        _rule([GROUP], [f"{k}/status" for k in KINDS], ["get", "update", "patch"]),
    ],
}

AGGREGATE_TO = {
    "viewer": ["view", "edit", "admin"],
    "editor": ["edit", "admin"],
    "admin": ["admin"],
}


def rules(role: str) -> list[Any]:
    return [dict(r) for r in ROLES[role]]
