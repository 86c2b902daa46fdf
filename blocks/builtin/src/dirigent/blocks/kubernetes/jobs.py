"""The Job a ``docker.run`` attempt becomes, and how its state reads.

One Job per attempt, named from the attempt's durable id, so the name is the idempotency
key: an ``execute`` replayed after a crash finds the Job it created instead of creating a
second. ``backoffLimit: 0`` because retries are the engine's (every attempt is visible);
a restricted security context; no service-account token unless a service account is named;
``activeDeadlineSeconds`` from the step's ``timeout`` (and ``deadline``), never from config,
so the step has one limit and Kubernetes keeps it.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from typing import Any

from pydantic import Field

from dirigent.blocks.base import Config
from dirigent.sdk import Duration, JsonValue, StepContext

__all__ = [
    "DockerConfig",
    "active_deadline_seconds",
    "job_manifest",
    "job_name",
    "labels_for",
    "owner_reference",
    "secret_manifest",
    "with_pod_defaults",
]

LABEL = "dirigent.dev"
CONTAINER = "main"


class Resources(Config):
    requests: dict[str, str] = Field(default_factory=dict, description="e.g. {cpu: 100m}")
    limits: dict[str, str] = Field(default_factory=dict, description="e.g. {memory: 256Mi}")


class DockerConfig(Config):
    image: str
    command: list[str] | None = Field(default=None, description="Overrides the entrypoint.")
    args: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict, description="Literal values.")
    env_from_params: dict[str, str] = Field(
        default_factory=dict, description="Env var -> run param name."
    )
    connection: str | None = Field(default=None, description="Connection for envFromConnection.")
    env_from_connection: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Env var -> field of the connection; the values go in a Secret the Job owns "
            "(read by secretKeyRef), never in the Job's spec."
        ),
    )
    cluster: str | None = Field(
        default=None,
        description=(
            "A connection of kind kubernetes: the cluster the Job runs in. Default: the "
            "worker's own (in-cluster, or DIRIGENT_KUBE_KUBECONFIG / KUBECONFIG)."
        ),
    )
    namespace: str | None = Field(default=None, description="Default: the pipeline's.")
    resources: Resources = Field(default_factory=Resources)
    ttl_after_finished: Duration = Field(
        default=Duration.of(hours=1), description="ttlSecondsAfterFinished."
    )
    service_account: str | None = Field(
        default=None, description="Runs as it, with its token mounted; default: none."
    )
    run_as_user: int = Field(default=65532, ge=1, description="A non-root uid.")
    image_pull_policy: str | None = None
    annotations: dict[str, str] = Field(default_factory=dict, description="On Job and pod.")
    labels: dict[str, str] = Field(default_factory=dict)
    image_pull_grace: Duration = Field(
        default=Duration.of(minutes=2), description="How long an image pull may fail."
    )
    log_tail: int = Field(default=4096, ge=0, description="Log bytes kept in the output.")


def job_name(ctx: StepContext) -> str:
    """Stable per attempt; a DNS label."""
    return f"dirigent-{ctx.run_id}-{ctx.attempt_id}"


def labels_for(ctx: StepContext) -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": "dirigent",
        f"{LABEL}/pipeline": ctx.pipeline,
        f"{LABEL}/run": str(ctx.run_id),
        f"{LABEL}/step": ctx.step,
        f"{LABEL}/attempt": str(ctx.attempt_id),
    }


def _env(config: DockerConfig, ctx: StepContext) -> list[dict[str, Any]]:
    """Literal and param values inline; connection fields only as references to the Secret."""
    values: dict[str, dict[str, Any]] = {}
    for var, param in config.env_from_params.items():
        value: JsonValue = ctx.params.get(param)
        text = value if isinstance(value, str) else "" if value is None else str(value)
        values[var] = {"value": text}
    for var in config.env_from_connection:
        ref = {"name": job_name(ctx), "key": var}
        values[var] = {"valueFrom": {"secretKeyRef": ref}}
    values.update({var: {"value": value} for var, value in config.env.items()})
    return [{"name": k, **v} for k, v in sorted(values.items())]


def secret_manifest(
    config: DockerConfig, ctx: StepContext, namespace: str, connection: dict[str, Any]
) -> dict[str, Any] | None:
    """The Secret holding the attempt's ``envFromConnection`` values, named like its Job.

    Why a Secret: a Job's spec is readable by anyone who may list Jobs and is kept in its
    history, so a connection's secret never goes there; the pod reads it by ``secretKeyRef``.
    None when the step takes nothing from a connection.
    """
    if not config.env_from_connection:
        return None
    data = {
        var: base64.b64encode(str(connection.get(field, "")).encode()).decode()
        for var, field in config.env_from_connection.items()
        if var not in config.env  # a literal value wins, as in the env list
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": job_name(ctx), "namespace": namespace, "labels": labels_for(ctx)},
        "data": data,
    }


def owner_reference(job: dict[str, Any]) -> dict[str, Any]:
    """The Job as the owner of its Secret: the garbage collector deletes one with the other."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
    }


def job_manifest(config: DockerConfig, ctx: StepContext, namespace: str) -> dict[str, Any]:
    labels = {**config.labels, **labels_for(ctx)}
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": config.image,
        "env": _env(config, ctx),
        "resources": config.resources.model_dump(),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": config.run_as_user,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if config.command is not None:
        container["command"] = config.command
    if config.args is not None:
        container["args"] = config.args
    if config.image_pull_policy is not None:
        container["imagePullPolicy"] = config.image_pull_policy
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": config.service_account is not None,
        "containers": [container],
    }
    if config.service_account is not None:
        pod_spec["serviceAccountName"] = config.service_account
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "ttlSecondsAfterFinished": int(config.ttl_after_finished.total_seconds()),
        "template": {
            "metadata": {"labels": labels, "annotations": dict(config.annotations)},
            "spec": pod_spec,
        },
    }
    deadline = active_deadline_seconds(ctx)
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(ctx),
            "namespace": namespace,
            "labels": labels,
            "annotations": dict(config.annotations),
        },
        "spec": spec,
    }


def active_deadline_seconds(ctx: StepContext) -> int | None:
    """The step's limits as the Job's own: its ``timeout``, or what is left of its
    ``deadline`` if that ends sooner, in whole seconds rounded up (at least 1).

    Kubernetes then stops the container itself when the step's time is up, so the limit
    holds even while no worker is there to cancel the Job.
    """
    limits: list[float] = []
    if ctx.timeout is not None:
        limits.append(ctx.timeout.total_seconds())
    if ctx.deadline is not None:
        limits.append((ctx.deadline - dt.datetime.now(dt.UTC)).total_seconds())
    if not limits:
        return None
    return max(math.ceil(min(limits)), 1)


def with_pod_defaults(job: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """``job`` with the worker's pod spec defaults added where the Job sets nothing."""
    pod_spec = job["spec"]["template"]["spec"]
    for key, value in defaults.items():
        pod_spec.setdefault(key, value)
    return job


def parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
