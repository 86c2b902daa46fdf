"""What the person running dirigent decides for every docker.run Job: ``DIRIGENT_KUBE_*``.

Why one settings object: the same values must hold wherever the block runs — in a worker
(creating Jobs) and in the process that applies pipelines (``check_config`` refuses there
what no tenant may ask) — so every process reads them from the same environment variables,
once, when docker.run is first used. None of them can be set by a step.

- ``KUBECONFIG`` / ``CONTEXT`` / ``IN_CLUSTER`` / ``QPS`` / ``BURST``: how this process
  reaches its own cluster, and how fast.
- ``INSTALLATION``: this installation's name, on every Job (label ``dirigent.dev/
  installation``) and in its name, so two installations sharing a namespace never adopt,
  probe or delete each other's Jobs. Empty: an unnamed installation (one per namespace).
- ``PLACEMENT``: per tenant namespace, where its Jobs run and as whom (``tenancy``).
- ``DEFAULT_REQUESTS`` / ``DEFAULT_LIMITS``: each resource a step does not declare.
- ``TMP_SIZE``: the size limit of the ``emptyDir`` at ``/tmp`` (the root is read-only).
- ``ALLOWED_LABELS`` / ``ALLOWED_ANNOTATIONS``: keys a step may write as is (``tenancy``).
- ``LOG_LIMIT``: the most of a pod's log read back (and stored).
- ``POD_DEFAULTS``: pod spec fields for Jobs in this process's own cluster (a node
  selector, tolerations, host network), never overriding what the block sets.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dirigent.blocks.kubernetes.connection import ClusterAccess
from dirigent.blocks.kubernetes.tenancy import Placed, Placement
from dirigent.sdk import Size

__all__ = ["DEFAULT_LIMITS", "DEFAULT_REQUESTS", "KubeSettings", "PodPolicy"]

DEFAULT_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
DEFAULT_LIMITS = {"cpu": "1", "memory": "512Mi"}
DEFAULT_TMP = Size(1 << 30)
# A label value: at most 63 characters, alphanumerics with - _ . inside.
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")


class PodPolicy:
    """What one Job gets from the installation: identity, account, resources, /tmp, labels."""

    def __init__(
        self,
        *,
        installation: str = "",
        placed: Placed | None = None,
        requests: dict[str, str] | None = None,
        limits: dict[str, str] | None = None,
        tmp_size: Size | None = DEFAULT_TMP,
        allowed_labels: tuple[str, ...] = (),
    ) -> None:
        self.installation = installation
        self.service_account = placed.service_account if placed else None
        self.mount_token = placed.mount_token if placed else False
        self.requests = dict(DEFAULT_REQUESTS if requests is None else requests)
        self.limits = dict(DEFAULT_LIMITS if limits is None else limits)
        self.tmp_size = tmp_size
        self.allowed_labels = allowed_labels

    @property
    def name_part(self) -> str:
        """What a named installation adds to its Job names: a short digest of its name."""
        if not self.installation:
            return ""
        return hashlib.sha256(self.installation.encode()).hexdigest()[:8] + "-"


class KubeSettings(BaseSettings):
    """The ``DIRIGENT_KUBE_*`` settings (the module docstring says what each decides)."""

    model_config = SettingsConfigDict(env_prefix="DIRIGENT_KUBE_", extra="ignore")

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool | None = None
    qps: float = Field(default=20.0, gt=0)
    burst: int = Field(default=40, ge=1)
    installation: str = Field(default="", description="This installation's name (a label value).")
    placement: dict[str, Placement] = Field(
        default_factory=dict, description="Pipeline namespace (or '*') -> placement."
    )
    default_requests: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_REQUESTS))
    default_limits: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_LIMITS))
    tmp_size: Size | None = Field(default=DEFAULT_TMP, description="/tmp emptyDir limit.")
    allowed_labels: list[str] = Field(default_factory=list)
    allowed_annotations: list[str] = Field(default_factory=list)
    log_limit: Size = Field(default=Size(16 << 20), description="Most of a pod log read.")
    pod_defaults: dict[str, Any] = Field(
        default_factory=dict, description="Pod spec fields every Job gets unless it sets them."
    )

    @field_validator("installation")
    @classmethod
    def _a_label_value(cls, value: str) -> str:
        if not LABEL_VALUE.match(value):
            raise ValueError(
                "DIRIGENT_KUBE_INSTALLATION must be a Kubernetes label value: at most 63 "
                "letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
            )
        return value

    def connection(self) -> ClusterAccess:
        in_cluster = self.in_cluster
        if in_cluster is None:
            in_cluster = "KUBERNETES_SERVICE_HOST" in os.environ and not self.kubeconfig
        return ClusterAccess(
            in_cluster=in_cluster,
            kubeconfig_path=None if in_cluster else self.kubeconfig or os.environ.get("KUBECONFIG"),
            context=self.context,
            qps=self.qps,
            burst=self.burst,
        )

    def pod_policy(self, placed: Placed | None = None) -> PodPolicy:
        return PodPolicy(
            installation=self.installation,
            placed=placed,
            requests=self.default_requests,
            limits=self.default_limits,
            tmp_size=self.tmp_size,
            allowed_labels=tuple(self.allowed_labels),
        )
