"""Who decides where a docker.run Job runs, as whom, and what it may be labelled: the
installation, never the step.

Why: a namespace is a tenant. A step that could name any namespace or ServiceAccount could
run a container next to another team's data, or with a token that reads the cluster's
Secrets; a step that could set any label could have its pod selected by someone else's
Service or NetworkPolicy (``app: postgres``), or pass for one of dirigent's own Jobs.

**Placement** (``DIRIGENT_KUBE_PLACEMENT``, a JSON object; key: the pipeline's namespace, or
``"*"`` for every namespace not listed)::

    {"team-a": {"namespace": "team-a-jobs",          # where its Jobs go (default: its own)
                "namespaces": ["team-a-batch"],      # others a step may name (glob patterns)
                "serviceAccount": "dirigent-job",    # what Jobs run as (token not mounted)
                "serviceAccounts": ["team-a-deployer"]},  # a step may name (token mounted)
     "*": {}}

With no entry (the default), a pipeline's Jobs run in its own namespace under that
namespace's ``default`` ServiceAccount with no token mounted, and a step may name neither.
At apply the block knows no pipeline namespace, so a step naming a ``namespace`` or
``serviceAccount`` that no entry allows is refused there; the per-namespace check is made
again when the Job is created, with the pipeline's namespace known.

**Labels.** Keys under dirigent's or Kubernetes' own domains (``dirigent.dev``,
``kubernetes.io``, ``k8s.io``, and their subdomains) and the Job controller's ``job-name``
and ``controller-uid`` are refused. Other keys an installation allow-lists
(``DIRIGENT_KUBE_ALLOWED_LABELS``, glob patterns) are kept as written; any other plain key
is written under ``author.dirigent.dev/`` (``app`` becomes ``author.dirigent.dev/app``), and a
prefixed key that is not allow-listed is refused. **Annotations** under the Kubernetes
domains (AppArmor, seccomp and the like are set this way) are refused unless allow-listed
(``DIRIGENT_KUBE_ALLOWED_ANNOTATIONS``); the annotations dirigent sets itself are refused.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import Field

from dirigent.blocks.base import Config
from dirigent.sdk import BlockFailure, ErrorClass, Issue, Message

__all__ = [
    "ANNOTATION_RESERVED",
    "AUTHOR_PREFIX",
    "LABEL_PREFIXED",
    "LABEL_RESERVED",
    "NAMESPACE_REFUSED",
    "OWN_ANNOTATIONS",
    "SERVICE_ACCOUNT_REFUSED",
    "Placed",
    "Placement",
    "allowed_anywhere",
    "author_labels",
    "metadata_problems",
    "place",
    "placement_for",
]

AUTHOR_PREFIX = "author.dirigent.dev/"
RESERVED_DOMAINS = ("dirigent.dev", "kubernetes.io", "k8s.io")
RESERVED_NAMES = frozenset({"job-name", "controller-uid"})
OWN_ANNOTATIONS = frozenset({"dirigent.dev/installation", "dirigent.dev/network-destinations"})

NAMESPACE_REFUSED = Message(
    "docker.namespace.refused",
    "{where}the installation does not let pipelines{of} run Jobs in namespace "
    "'{namespace}'{allowed}; leave 'namespace' out (Jobs run where the installation places "
    "them) or ask for it in DIRIGENT_KUBE_PLACEMENT",
)
SERVICE_ACCOUNT_REFUSED = Message(
    "docker.service_account.refused",
    "{where}the installation does not let pipelines{of} run Jobs as "
    "ServiceAccount '{service_account}'{allowed}; leave 'serviceAccount' out (Jobs run as the "
    "installation's default, with no token) or ask for it in DIRIGENT_KUBE_PLACEMENT",
)
LABEL_RESERVED = Message(
    "docker.label.reserved",
    "label '{key}' is under a domain dirigent or Kubernetes keeps for itself; choose another key",
)
LABEL_PREFIXED = Message(
    "docker.label.prefixed",
    "label '{key}' has a prefix the installation does not allow (DIRIGENT_KUBE_ALLOWED_"
    "LABELS); use a plain key, written on the Job as '{prefix}<key>'",
)
ANNOTATION_RESERVED = Message(
    "docker.annotation.reserved",
    "annotation '{key}' is one dirigent sets, or under a Kubernetes domain the installation "
    "does not allow (DIRIGENT_KUBE_ALLOWED_ANNOTATIONS)",
)


class Placement(Config):
    """What one tenant namespace's Jobs get (see the module docstring)."""

    namespace: str | None = Field(default=None, description="Default: the pipeline's own.")
    namespaces: list[str] = Field(default_factory=list, description="A step may name these.")
    service_account: str | None = Field(
        default=None, description="What Jobs run as, token not mounted; default: 'default'."
    )
    service_accounts: list[str] = Field(
        default_factory=list, description="A step may name these; their token is mounted."
    )


@dataclass(frozen=True)
class Placed:
    """Where one Job goes and as whom."""

    namespace: str
    service_account: str | None
    mount_token: bool


def _matches(value: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


def placement_for(placements: Mapping[str, Placement], namespace: str) -> Placement:
    """The pipeline namespace's entry, else ``"*"``'s, else nothing allowed."""
    return placements.get(namespace) or placements.get("*") or Placement()


def _allowed(patterns: list[str]) -> str:
    return f" (allowed: {', '.join(patterns)})" if patterns else " (none may be named)"


def place(
    namespace: str | None,
    service_account: str | None,
    pipeline_namespace: str,
    placements: Mapping[str, Placement],
) -> Placed:
    """Where the step's Job runs and as whom; BlockFailure (rejected) for what is not allowed."""
    entry = placement_for(placements, pipeline_namespace)
    home = entry.namespace or pipeline_namespace
    of = f" of namespace '{pipeline_namespace}'"
    if namespace is not None and namespace != home and not _matches(namespace, entry.namespaces):
        raise BlockFailure(
            NAMESPACE_REFUSED,
            error_class=ErrorClass.REJECTED,
            where="config.namespace: ",
            of=of,
            namespace=namespace,
            allowed=_allowed([home, *entry.namespaces]),
        )
    if service_account is None:
        return Placed(namespace or home, entry.service_account, mount_token=False)
    if not _matches(service_account, entry.service_accounts):
        raise BlockFailure(
            SERVICE_ACCOUNT_REFUSED,
            error_class=ErrorClass.REJECTED,
            where="config.serviceAccount: ",
            of=of,
            service_account=service_account,
            allowed=_allowed(entry.service_accounts),
        )
    return Placed(namespace or home, service_account, mount_token=True)


def allowed_anywhere(
    namespace: str | None, service_account: str | None, placements: Mapping[str, Placement]
) -> list[Issue]:
    """Apply-time refusals: a namespace or ServiceAccount no tenant may name."""
    issues = []
    entries = list(placements.values())
    if namespace is not None and not any(_matches(namespace, e.namespaces) for e in entries):
        issues.append(
            Issue.of(
                NAMESPACE_REFUSED,
                location=("namespace",),
                where="",
                of="",
                namespace=namespace,
                allowed=" (no pipeline may name one)",
            )
        )
    if service_account is not None and not any(
        _matches(service_account, e.service_accounts) for e in entries
    ):
        issues.append(
            Issue.of(
                SERVICE_ACCOUNT_REFUSED,
                location=("serviceAccount",),
                where="",
                of="",
                service_account=service_account,
                allowed=" (no pipeline may name this one)",
            )
        )
    return issues


def _reserved(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if not prefix:
        return name in RESERVED_NAMES
    return any(prefix == d or prefix.endswith("." + d) for d in RESERVED_DOMAINS)


def metadata_problems(
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    allowed_labels: Iterable[str],
    allowed_annotations: Iterable[str],
) -> list[Issue]:
    """Labels and annotations a step may not set, each located at its key."""
    issues = []
    for key in labels:
        if _reserved(key):
            issues.append(Issue.of(LABEL_RESERVED, location=("labels", key), key=key))
        elif "/" in key and not _matches(key, allowed_labels):
            issues.append(
                Issue.of(LABEL_PREFIXED, location=("labels", key), key=key, prefix=AUTHOR_PREFIX)
            )
    for key in annotations:
        kubernetes = _reserved(key) and not key.startswith("dirigent.dev/")
        if key in OWN_ANNOTATIONS or (kubernetes and not _matches(key, allowed_annotations)):
            issues.append(Issue.of(ANNOTATION_RESERVED, location=("annotations", key), key=key))
    return issues


def author_labels(labels: Mapping[str, str], allowed: Iterable[str]) -> dict[str, str]:
    """The step's labels as the Job carries them: allow-listed keys as written, plain keys
    under ``author.dirigent.dev/`` (call after ``metadata_problems`` found none)."""
    patterns = list(allowed)
    return {
        key if _matches(key, patterns) else AUTHOR_PREFIX + key: value
        for key, value in labels.items()
    }
