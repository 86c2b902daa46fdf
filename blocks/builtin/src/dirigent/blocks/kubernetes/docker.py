"""``docker.run``: one Kubernetes Job per attempt, waited for as remote work.

``execute`` creates the Job and returns its handle; it is idempotent by the Job's name
(derived from the attempt), so an execute replayed after a worker died finds the Job it
created instead of creating a second. ``probe`` only reads (Job, then its pod) and maps
their state honestly: Complete → succeeded; Failed → failed with the container's exit code
and reason (OOMKilled, DeadlineExceeded); a pod stuck pulling its image past a grace →
failed, rejected; a Job that vanished → gone. An API error in probe is raised, never
turned into a resubmission. ``fetch`` returns the exit code and a log tail and stores the
whole log under the attempt's scratch; with no kubelet to serve logs the log is empty, and
the step's log says so. ``cancel`` deletes the Job with background propagation.

Values a step takes from a connection (``envFromConnection``) never enter the Job's spec:
they go in a Secret named like the Job and owned by it (an ownerReference), which the pod
reads by ``secretKeyRef``; the garbage collector deletes it with the Job (after
``ttlSecondsAfterFinished``, or on cancel, which also deletes it itself).

The cluster is the one the step's ``cluster`` names — a Connection of kind ``kubernetes``
(a kubeconfig, or a server with a token and its CA), opened by the engine for this step only
because the spec declares the field — else the worker's own: in-cluster credentials, or a
kubeconfig (``DIRIGENT_KUBE_KUBECONFIG``, else ``KUBECONFIG``). One client per distinct
cluster per process, each with its rate limit (the connection's ``qps``/``burst``; for the
worker's own, ``DIRIGENT_KUBE_QPS`` and ``DIRIGENT_KUBE_BURST``), so all docker.run steps of
the process that reach one cluster keep to one budget together. probe, fetch and cancel
reach the cluster the same way execute did, from the same config.
``DIRIGENT_KUBE_POD_DEFAULTS`` (a JSON object of pod spec fields, e.g. a ``nodeSelector``,
``tolerations``, ``hostNetwork``) is where the person running the worker decides where its
Jobs land in the worker's own cluster (a named cluster's placement is not the worker's to
decide, so they are not applied there); pipelines stay portable, and a field the block sets
itself is never overridden.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from dirigent.blocks.base import Output
from dirigent.blocks.connections import KubernetesConnection
from dirigent.blocks.kubernetes.jobs import (
    CONTAINER,
    DockerConfig,
    job_manifest,
    owner_reference,
    parse_time,
    secret_manifest,
    with_pod_defaults,
)
from dirigent.sdk import (
    BlockFailure,
    ConnectionField,
    Duration,
    ErrorClass,
    Message,
    Operator,
    OperatorSpec,
    ProbeResult,
    RemoteHandle,
    StepContext,
    classify_default,
    http_status_class,
)

if TYPE_CHECKING:
    from dirigent.blocks.kubernetes.client import KubeClient

__all__ = ["DockerRunOperator", "KubeSettings"]


def _api_error() -> type[Exception]:
    # The kubernetes package is imported on first use, not when the plugin loads: it is
    # large, and a worker that never runs docker.run should not pay for it at start.
    from dirigent.blocks.kubernetes.client import ApiError

    error: type[Exception] = ApiError
    return error


API = Message("docker.api", "the Kubernetes API answered {status}: {reason}")
FOREIGN_JOB = Message(
    "docker.job.foreign", "Job {namespace}/{name} exists but was not made by this attempt"
)
PULL_STUCK = "image-pull"
FAILURE_LINES = 10  # the failed container's last log lines quoted in the failure message
WAITING_FAILURES = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError"}
)


class KubeSettings(BaseSettings):
    """How this process reaches its cluster (read once, when docker.run is first used)."""

    model_config = SettingsConfigDict(env_prefix="DIRIGENT_KUBE_", extra="ignore")

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool | None = None
    qps: float = Field(default=20.0, gt=0)
    burst: int = Field(default=40, ge=1)
    pod_defaults: dict[str, Any] = Field(
        default_factory=dict, description="Pod spec fields every Job gets unless it sets them."
    )

    def connection(self) -> KubernetesConnection:
        in_cluster = self.in_cluster
        if in_cluster is None:
            in_cluster = "KUBERNETES_SERVICE_HOST" in os.environ and not self.kubeconfig
        return KubernetesConnection(
            in_cluster=in_cluster,
            kubeconfig_path=None if in_cluster else self.kubeconfig or os.environ.get("KUBECONFIG"),
            context=self.context,
            qps=self.qps,
            burst=self.burst,
        )


class _Fields(BaseModel):
    model_config = ConfigDict(extra="allow")


class DockerOutput(Output):
    exit_code: int
    namespace: str
    job: str
    pod: str | None
    log_tail: str
    log_uri: str


class DockerRunOperator(Operator[DockerConfig, DockerOutput]):
    """Runs a container image as a Kubernetes Job and waits for it."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="docker.run",
        group="execute",
        summary="Run a container image as a Kubernetes Job (unsafe: must be enabled).",
        description=(
            "One Job per attempt in the pipeline's namespace (or `namespace`), named "
            "`dirigent-<run>-<attempt>`, `backoffLimit: 0`, a restricted security context. "
            "The step's `timeout` (or what is left of its `deadline`, if sooner) becomes the "
            "Job's `activeDeadlineSeconds`, so Kubernetes stops the container when the step's "
            "time is up. "
            "The cluster is the `cluster` connection's (kind kubernetes: a kubeconfig, or a "
            "server, token and CA), else the worker's own: in-cluster credentials, or a "
            "kubeconfig from DIRIGENT_KUBE_KUBECONFIG (else KUBECONFIG); DIRIGENT_KUBE_QPS / "
            "DIRIGENT_KUBE_BURST bound the worker's API request rate there (default 20 / 40); "
            "DIRIGENT_KUBE_POD_DEFAULTS (JSON pod spec fields: nodeSelector, tolerations, "
            "hostNetwork) places its Jobs there. "
            "Failed: exit code, the container's last lines and "
            "reason (OOMKilled, DeadlineExceeded; an image that cannot be pulled after "
            "`imagePullGrace`). The whole log goes to storage (empty when no kubelet serves it)."
        ),
        local_execution=True,
        default_poll=Duration.of(seconds=5),
        connection_fields=(
            ConnectionField(field="connection"),
            ConnectionField(field="cluster", kinds=("kubernetes",)),
        ),
    )
    config_model: ClassVar[type[BaseModel]] = DockerConfig
    output_model: ClassVar[type[BaseModel]] = DockerOutput

    def __init__(self, settings: KubeSettings | None = None) -> None:
        # One client per cluster per process: its rate limiter is what keeps every docker.run
        # step of this worker that reaches that cluster within its QPS together.
        self._settings = settings
        self._clients: dict[str, KubeClient] = {}
        self._lock = asyncio.Lock()

    def settings(self) -> KubeSettings:
        if self._settings is None:
            self._settings = KubeSettings()
        return self._settings

    def _cluster(self, config: DockerConfig, ctx: StepContext) -> KubernetesConnection | None:
        """The step's named cluster, or None for the worker's own."""
        if config.cluster is None:
            return None
        return ctx.connection(config.cluster, KubernetesConnection)

    async def kube(self, cluster: KubernetesConnection | None = None) -> KubeClient:
        """The client for ``cluster`` (a named connection), else for the worker's own."""
        reach = cluster if cluster is not None else self.settings().connection()
        key = "" if cluster is None else reach.identity()
        async with self._lock:
            client = self._clients.get(key)
            if client is None:
                from dirigent.blocks.kubernetes.client import KubeClient

                client = self._clients[key] = await KubeClient.build(reach)
            return client

    async def execute(self, config: DockerConfig, ctx: StepContext) -> RemoteHandle:
        namespace = config.namespace or ctx.namespace
        fields: dict[str, Any] = {}
        if config.connection is not None:
            fields = dict(ctx.connection(config.connection, _Fields).model_extra or {})
        cluster = self._cluster(config, ctx)
        body = job_manifest(config, ctx, namespace)
        if cluster is None:
            body = with_pod_defaults(body, self.settings().pod_defaults)
        name = body["metadata"]["name"]
        secret = secret_manifest(config, ctx, namespace, fields)
        kube = await self.kube(cluster)
        try:
            # The Secret first, so the pod never waits for it; then the Job; then the Job
            # owns the Secret. Each step finds what an earlier try of this attempt left.
            if secret is not None:
                await kube.put_secret(namespace, secret)
            job = await self._create_job(kube, namespace, body, ctx)
            if secret is not None:
                await kube.own_secret(namespace, name, owner_reference(job))
        except _api_error() as err:
            status = int(getattr(err, "status", 0) or 0)
            raise BlockFailure(
                API,
                error_class=http_status_class(status),
                status=status,
                reason=getattr(err, "reason", ""),
            ) from err
        return RemoteHandle(
            block_id=self.spec.id,
            ref=f"{namespace}/{name}",
            meta={"namespace": namespace, "name": name},
        )

    async def _create_job(
        self, kube: KubeClient, namespace: str, body: dict[str, Any], ctx: StepContext
    ) -> dict[str, Any]:
        """The Job, created now or found from an earlier try of this attempt."""
        name = body["metadata"]["name"]
        try:
            created = await kube.create_job(namespace, body)
        except _api_error() as err:
            if getattr(err, "status", None) != 409:
                raise
            existing = await kube.read_job(namespace, name) or {}
            mine = existing.get("metadata", {}).get("labels", {})
            if mine.get("dirigent.dev/attempt") != str(ctx.attempt_id):
                raise BlockFailure(
                    FOREIGN_JOB, error_class=ErrorClass.REJECTED, namespace=namespace, name=name
                ) from err
            ctx.log.info(f"found Job {namespace}/{name} from an earlier try of this attempt")
            return existing
        ctx.log.info(f"created Job {namespace}/{name}", image=body_image(body))
        return created

    async def probe(
        self, handle: RemoteHandle, config: DockerConfig, ctx: StepContext
    ) -> ProbeResult:
        namespace, name = handle.meta["namespace"], handle.meta["name"]
        kube = await self.kube(self._cluster(config, ctx))
        job = await kube.read_job(namespace, name)
        if job is None:
            return ProbeResult.gone(f"Job {namespace}/{name} no longer exists")
        conditions = {
            c["type"]: c
            for c in job.get("status", {}).get("conditions") or []
            if c.get("status") == "True"
        }
        if "Complete" in conditions or "SuccessCriteriaMet" in conditions:
            return ProbeResult.succeeded(f"Job {name} completed")
        pods = await kube.job_pods(namespace, name)
        state = _container_state(pods[-1]) if pods else {}
        if "Failed" in conditions or "FailureTarget" in conditions:
            last = await self._last_lines(kube, namespace, pods[-1] if pods else None)
            condition = conditions.get("Failed") or conditions["FailureTarget"]
            return _failed(name, condition, state, last)
        waiting = state.get("waiting") or {}
        if waiting.get("reason") in WAITING_FAILURES:
            created = parse_time(job["metadata"].get("creationTimestamp"))
            age = dt.datetime.now(dt.UTC) - created if created else dt.timedelta(0)
            if age > config.image_pull_grace.to_timedelta():
                # probe stays read-only: the Job is deleted by cancel, which the engine calls
                # on every path that ends an attempt with its remote still there.
                return ProbeResult.failed(
                    f"Job {name}: {waiting['reason']} for {int(age.total_seconds())}s: "
                    f"{waiting.get('message', '')}",
                    error_class=ErrorClass.REJECTED,
                )
            return ProbeResult.running(f"Job {name}: {waiting['reason']} (within grace)")
        phase = pods[-1].get("status", {}).get("phase", "Pending") if pods else "no pod yet"
        return ProbeResult.running(f"Job {name}: pod {phase}")

    async def _last_lines(self, kube: KubeClient, namespace: str, pod: Any) -> str:
        """The failed container's last lines for the failure message ('' when unreadable)."""
        if pod is None:
            return ""
        try:
            log = await kube.pod_log(namespace, pod["metadata"]["name"], CONTAINER)
        except (_api_error(), OSError):
            return ""
        lines = log.decode("utf-8", errors="replace").rstrip("\n").splitlines()
        return "\n".join(lines[-FAILURE_LINES:])

    async def fetch(
        self, handle: RemoteHandle, config: DockerConfig, ctx: StepContext
    ) -> DockerOutput:
        namespace, name = handle.meta["namespace"], handle.meta["name"]
        kube = await self.kube(self._cluster(config, ctx))
        pods = await kube.job_pods(namespace, name)
        pod = pods[-1]["metadata"]["name"] if pods else None
        terminated = (_container_state(pods[-1]) if pods else {}).get("terminated") or {}
        log = b""
        if pod is not None:
            try:
                log = await kube.pod_log(namespace, pod, CONTAINER)
            except (_api_error(), OSError) as err:
                ctx.log.warning(
                    f"no log for pod {pod}: the API server could not serve it ({_why(err)}); stored an empty log"
                )
        else:
            ctx.log.warning(f"Job {name} has no pod left; stored an empty log")
        log_uri = f"{ctx.scratch}/steps/{ctx.step}/{ctx.attempt_id}/log"
        await ctx.storage.write_bytes(log_uri, log, "text/plain")
        tail = log[-config.log_tail :] if config.log_tail else b""
        return DockerOutput(
            exit_code=int(terminated.get("exitCode", 0)),
            namespace=namespace,
            job=name,
            pod=pod,
            log_tail=tail.decode("utf-8", errors="replace"),
            log_uri=log_uri,
        )

    async def cancel(self, handle: RemoteHandle, config: DockerConfig, ctx: StepContext) -> bool:
        namespace, name = handle.meta["namespace"], handle.meta["name"]
        kube = await self.kube(self._cluster(config, ctx))
        deleted = await kube.delete_job(namespace, name)
        if config.env_from_connection:
            # The collector would delete it with the Job; deleting it here also covers a
            # Secret whose Job was never made, or never made its owner.
            await kube.delete_secret(namespace, name)
        return deleted

    def classify_error(self, error: Exception) -> ErrorClass:
        status = getattr(error, "status", None)
        if isinstance(status, int) and isinstance(error, _api_error()):
            return http_status_class(status)
        return classify_default(error)


def body_image(body: dict[str, Any]) -> str:
    image: str = body["spec"]["template"]["spec"]["containers"][0]["image"]
    return image


def _why(err: Exception) -> str:
    status = getattr(err, "status", None)
    return f"{status} {getattr(err, 'reason', '')}" if status else repr(err)


def _container_state(pod: dict[str, Any]) -> dict[str, Any]:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            state: dict[str, Any] = status.get("state") or {}
            return state
    return {}


def _failed(
    name: str, condition: dict[str, Any], state: dict[str, Any], last: str = ""
) -> ProbeResult:
    terminated = state.get("terminated") or {}
    reason = terminated.get("reason") or condition.get("reason") or "Failed"
    if condition.get("reason") == "DeadlineExceeded":
        reason = "DeadlineExceeded"
    code = terminated.get("exitCode")
    detail = f"exit code {code}" if code is not None else "no exit code"
    message = f"Job {name} failed: {reason}, {detail}"
    if condition.get("message"):
        message += f" ({condition['message']})"
    if last:
        message += f"; last lines:\n{last}"
    error_class = ErrorClass.TRANSIENT if reason == "DeadlineExceeded" else ErrorClass.UNKNOWN
    return ProbeResult.failed(
        message, error_class=error_class, meta={"exit_code": str(code), "reason": reason}
    )
