"""The Job a ``docker.run`` attempt becomes, and how its state reads.

One Job per attempt, named from the attempt's durable id (and a digest of the installation's
name, when it has one), so the name is the idempotency key: an ``execute`` replayed after a
crash finds the Job it created instead of creating a second, and two installations sharing
a namespace never meet on one name. ``backoffLimit: 0`` because retries are the engine's
(every attempt is visible); ``activeDeadlineSeconds`` from the step's ``timeout`` (and
``deadline``), never from config, so the step has one limit and Kubernetes keeps it.

A pod gets only what it needs: non-root, a read-only root filesystem with a writable
``emptyDir`` at ``/tmp``, every capability dropped, no privilege escalation, seccomp
``RuntimeDefault``, no service links, requests and limits for every resource the step does
not declare (the installation's defaults), no ServiceAccount token unless the installation
lets the step name an account. dirigent's own labels (pipeline, run, step, attempt,
installation, network) are set last, so nothing a step writes replaces them.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from typing import Any

from pydantic import Field

from dirigent.blocks.base import Config
from dirigent.blocks.kubernetes.network import Network, network_metadata, network_policy
from dirigent.blocks.kubernetes.settings import PodPolicy
from dirigent.blocks.kubernetes.tenancy import author_labels
from dirigent.sdk import Duration, JsonValue, StepContext

__all__ = [
    "DockerConfig",
    "active_deadline_seconds",
    "is_ours",
    "job_manifest",
    "job_name",
    "labels_for",
    "network_policy_for",
    "owner_reference",
    "resources_for",
    "secret_manifest",
    "selector_for",
    "with_pod_defaults",
]

LABEL = "dirigent.dev"
INSTALLATION = f"{LABEL}/installation"
ATTEMPT = f"{LABEL}/attempt"
CONTAINER = "main"
TMP = "tmp"


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
    namespace: str | None = Field(
        default=None,
        description=(
            "Default: where the installation places the pipeline's Jobs (its own namespace "
            "unless DIRIGENT_KUBE_PLACEMENT says otherwise); another only if it allows it."
        ),
    )
    resources: Resources = Field(
        default_factory=Resources,
        description="Each one not given: the installation's default request and limit.",
    )
    ttl_after_finished: Duration = Field(
        default=Duration.of(hours=1), description="ttlSecondsAfterFinished."
    )
    service_account: str | None = Field(
        default=None,
        description=(
            "Runs as it, with its token mounted, if the installation allows it; default: "
            "the installation's account for the namespace, no token."
        ),
    )
    network: Network = Field(
        default=False,
        description=(
            "false: no network in or out (a NetworkPolicy the Job owns); a list of "
            "{cidr, ports}: egress to those only (and DNS); true: the namespace's policies."
        ),
    )
    run_as_user: int = Field(default=65532, ge=1, description="A non-root uid.")
    image_pull_policy: str | None = None
    annotations: dict[str, str] = Field(
        default_factory=dict, description="On Job and pod; not under Kubernetes' domains."
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "On Job and pod; a plain key is written as author.dirigent.dev/<key> unless the "
            "installation allow-lists it; dirigent's and Kubernetes' domains are refused."
        ),
    )
    image_pull_grace: Duration = Field(
        default=Duration.of(minutes=2), description="How long an image pull may fail."
    )
    log_tail: int = Field(default=4096, ge=0, description="Log bytes kept in the output.")


def job_name(ctx: StepContext, policy: PodPolicy | None = None) -> str:
    """Stable per attempt (and installation); a DNS label."""
    part = policy.name_part if policy is not None else ""
    return f"dirigent-{part}{ctx.run_id}-{ctx.attempt_id}"


def selector_for(ctx: StepContext, installation: str = "") -> dict[str, str]:
    """The labels that pick this attempt's objects and pods: ones no step can set."""
    return {ATTEMPT: str(ctx.attempt_id), INSTALLATION: installation}


def labels_for(ctx: StepContext, installation: str = "") -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": "dirigent",
        f"{LABEL}/pipeline": ctx.pipeline,
        f"{LABEL}/run": str(ctx.run_id),
        f"{LABEL}/step": ctx.step,
        **selector_for(ctx, installation),
    }


def is_ours(obj: dict[str, Any], ctx: StepContext, installation: str) -> bool:
    """Whether ``obj`` was made by this attempt of this installation (an object of an unnamed
    installation from before the label existed counts as unnamed)."""
    labels = obj.get("metadata", {}).get("labels") or {}
    return (
        labels.get(ATTEMPT) == str(ctx.attempt_id) and labels.get(INSTALLATION, "") == installation
    )


def _env(config: DockerConfig, ctx: StepContext, policy: PodPolicy) -> list[dict[str, Any]]:
    """Literal and param values inline; connection fields only as references to the Secret."""
    values: dict[str, dict[str, Any]] = {}
    for var, param in config.env_from_params.items():
        value: JsonValue = ctx.params.get(param)
        text = value if isinstance(value, str) else "" if value is None else str(value)
        values[var] = {"value": text}
    for var in config.env_from_connection:
        ref = {"name": job_name(ctx, policy), "key": var}
        values[var] = {"valueFrom": {"secretKeyRef": ref}}
    values.update({var: {"value": value} for var, value in config.env.items()})
    return [{"name": k, **v} for k, v in sorted(values.items())]


def secret_manifest(
    config: DockerConfig,
    ctx: StepContext,
    namespace: str,
    connection: dict[str, Any],
    policy: PodPolicy | None = None,
) -> dict[str, Any] | None:
    """The Secret holding the attempt's ``envFromConnection`` values, named like its Job.

    Why a Secret: a Job's spec is readable by anyone who may list Jobs and is kept in its
    history, so a connection's secret never goes there; the pod reads it by ``secretKeyRef``.
    None when the step takes nothing from a connection.
    """
    if not config.env_from_connection:
        return None
    policy = policy or PodPolicy()
    data = {
        var: base64.b64encode(str(connection.get(field, "")).encode()).decode()
        for var, field in config.env_from_connection.items()
        if var not in config.env  # a literal value wins, as in the env list
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": job_name(ctx, policy),
            "namespace": namespace,
            "labels": labels_for(ctx, policy.installation),
        },
        "data": data,
    }


def network_policy_for(
    config: DockerConfig, ctx: StepContext, namespace: str, policy: PodPolicy | None = None
) -> dict[str, Any] | None:
    """The NetworkPolicy beside the Job (``network``): None when the step asked for it."""
    policy = policy or PodPolicy()
    return network_policy(
        config.network,
        name=job_name(ctx, policy),
        namespace=namespace,
        labels=labels_for(ctx, policy.installation),
        selector=selector_for(ctx, policy.installation),
    )


def owner_reference(job: dict[str, Any]) -> dict[str, Any]:
    """The Job as the owner of its Secret: the garbage collector deletes one with the other."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
    }


def resources_for(asked: Resources, policy: PodPolicy) -> dict[str, dict[str, str]]:
    """The step's requests and limits, the installation's defaults for the rest.

    A default that would contradict what the step declared gives way: a request above the
    default limit raises that limit to it; a limit below the default request lowers that
    request to it (Kubernetes refuses a request above its limit).
    """
    requests = {**policy.requests, **asked.requests}
    limits = {**policy.limits, **asked.limits}
    for key, value in asked.requests.items():
        if key in limits and key not in asked.limits and _above(value, limits[key]):
            limits[key] = value
    for key, value in asked.limits.items():
        if key in requests and key not in asked.requests and _above(requests[key], value):
            requests[key] = value
    return {"requests": requests, "limits": limits}


def _above(a: str, b: str) -> bool:
    """Whether quantity ``a`` is more than ``b`` (an unparsable one is left to the API)."""
    from kubernetes.utils.quantity import parse_quantity  # the package loads on first use

    parse: Any = parse_quantity  # untyped
    try:
        return bool(parse(a) > parse(b))
    except ValueError:
        return False


def _container(config: DockerConfig, ctx: StepContext, policy: PodPolicy) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": config.image,
        "env": _env(config, ctx, policy),
        "resources": resources_for(config.resources, policy),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": config.run_as_user,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": TMP, "mountPath": "/tmp"}],
    }
    if config.command is not None:
        container["command"] = config.command
    if config.args is not None:
        container["args"] = config.args
    if config.image_pull_policy is not None:
        container["imagePullPolicy"] = config.image_pull_policy
    return container


def _pod_spec(config: DockerConfig, ctx: StepContext, policy: PodPolicy) -> dict[str, Any]:
    tmp: dict[str, Any] = {}
    if policy.tmp_size is not None:
        tmp["sizeLimit"] = str(policy.tmp_size.bytes)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": policy.mount_token,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": config.run_as_user,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(config, ctx, policy)],
        "volumes": [{"name": TMP, "emptyDir": tmp}],
    }
    if policy.service_account is not None:
        pod_spec["serviceAccountName"] = policy.service_account
    return pod_spec


def job_manifest(
    config: DockerConfig, ctx: StepContext, namespace: str, policy: PodPolicy | None = None
) -> dict[str, Any]:
    policy = policy or PodPolicy()
    net_labels, net_annotations = network_metadata(config.network)
    # dirigent's labels last: nothing the step writes replaces them.
    labels = {
        **author_labels(config.labels, policy.allowed_labels),
        **net_labels,
        **labels_for(ctx, policy.installation),
    }
    annotations = {**config.annotations, **net_annotations}
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "ttlSecondsAfterFinished": int(config.ttl_after_finished.total_seconds()),
        "template": {
            "metadata": {"labels": labels, "annotations": annotations},
            "spec": _pod_spec(config, ctx, policy),
        },
    }
    deadline = active_deadline_seconds(ctx)
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(ctx, policy),
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
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
