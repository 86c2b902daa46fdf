"""``docker.run``: one Kubernetes Job per attempt, waited for as remote work.

``execute`` creates the Job and returns its handle; it is idempotent by the Job's name
(derived from the attempt and the installation), so an execute replayed after a worker died
finds the Job it created instead of creating a second. ``probe`` only reads (Job, then its
pod) and maps their state honestly: Complete → succeeded; Failed → failed with the
container's exit code and reason (OOMKilled, DeadlineExceeded); a pod stuck pulling its
image past a grace → failed, rejected; a Job that vanished, or that is not this attempt's
(another installation's of the same name) → gone. An API error in probe is raised, never
turned into a resubmission. ``fetch`` returns the exit code and a log tail and stores the
log under the attempt's scratch, read in chunks up to ``DIRIGENT_KUBE_LOG_LIMIT``; with no
kubelet to serve logs the log is empty, and the step's log says so. ``cancel`` deletes the
Job (only that Job, by uid) with background propagation, and what it owns.

The installation decides, the step does not (``tenancy``, ``settings``): where the Job runs
and as whom, what labels it may carry, its default resources, its installation identity.
The step's ``network`` decides whether its pods may talk at all (``network``): by default a
NetworkPolicy the Job owns denies everything in and out.

Values a step takes from a connection (``envFromConnection``) never enter the Job's spec:
they go in a Secret named like the Job and owned by it (an ownerReference), which the pod
reads by ``secretKeyRef``; the garbage collector deletes it with the Job (after
``ttlSecondsAfterFinished``, or on cancel, which also deletes it itself). The Secret and the
NetworkPolicy are made before the Job (a pod never starts without them), and an object of
their name that is not this attempt's is never adopted or changed.

The cluster is the one the step's ``cluster`` names — a Connection of kind ``kubernetes``
(a kubeconfig, or a server with a token and its CA), opened by the engine for this step only
because the spec declares the field — else the worker's own: in-cluster credentials, or a
kubeconfig (``DIRIGENT_KUBE_KUBECONFIG``, else ``KUBECONFIG``). One client per distinct
cluster per process, each with its rate limit (the connection's ``qps``/``burst``; for the
worker's own, ``DIRIGENT_KUBE_QPS`` and ``DIRIGENT_KUBE_BURST``), so all docker.run steps of
the process that reach one cluster keep to one budget together. probe, fetch and cancel
reach the cluster the same way execute did, from the same config. Placement and pod
defaults hold for every cluster; ``DIRIGENT_KUBE_POD_DEFAULTS`` (node selector,
tolerations, host network) only for the worker's own (a named cluster's nodes are not the
worker's to choose).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from dirigent.blocks.base import Output, has_reference
from dirigent.blocks.kubernetes.connection import KubernetesConnection
from dirigent.blocks.kubernetes.jobs import (
    CONTAINER,
    DockerConfig,
    is_ours,
    job_manifest,
    network_policy_for,
    owner_reference,
    parse_time,
    secret_manifest,
    selector_for,
    with_pod_defaults,
)
from dirigent.blocks.kubernetes.settings import KubeSettings
from dirigent.blocks.kubernetes.tenancy import (
    ANNOTATION_RESERVED,
    LABEL_PREFIXED,
    LABEL_RESERVED,
    NAMESPACE_REFUSED,
    SERVICE_ACCOUNT_REFUSED,
    allowed_anywhere,
    metadata_problems,
    place,
)
from dirigent.sdk import (
    BlockFailure,
    ConnectionField,
    Duration,
    ErrorClass,
    Issue,
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
    from dirigent.blocks.kubernetes.client import Foreign, KubeClient, Owned

__all__ = ["DockerRunOperator", "KubeSettings"]


def _api_error() -> type[Exception]:
    # The kubernetes package is imported on first use, not when the plugin loads: it is
    # large, and a worker that never runs docker.run should not pay for it at start.
    from dirigent.blocks.kubernetes.client import ApiError

    error: type[Exception] = ApiError
    return error


def _foreign() -> type[Foreign]:
    from dirigent.blocks.kubernetes.client import Foreign

    return Foreign


def _log_errors() -> tuple[type[Exception], ...]:
    from dirigent.blocks.kubernetes.client import LOG_ERRORS

    return LOG_ERRORS


API = Message(
    "docker.api",
    "the Kubernetes API answered {status} ({reason}) to {verb} {resource} in namespace "
    "'{namespace}'{hint}",
)
FORBIDDEN_HINT = (
    ": the identity the worker reaches the cluster with may not do that there; the "
    "installation must grant it a Role in that namespace (the chart does so for the "
    "namespaces it serves)"
)
FOREIGN_JOB = Message(
    "docker.job.foreign",
    "{kind} {namespace}/{name} exists but was not made by this attempt (another "
    "installation's, or made by hand)",
)
REFUSED = Message("docker.config.refused", "{problem}")
# Raised or reported through ``tenancy``; named here so the block reference lists them.
TENANCY = (
    NAMESPACE_REFUSED,
    SERVICE_ACCOUNT_REFUSED,
    LABEL_RESERVED,
    LABEL_PREFIXED,
    ANNOTATION_RESERVED,
)
PULL_STUCK = "image-pull"
FAILURE_LINES = 10  # the failed container's last log lines quoted in the failure message
FAILURE_BYTES = 4096  # ... and at most this much of them
WAITING_FAILURES = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError"}
)
OWNED_UIDS: dict[Owned, str] = {"Secret": "secret_uid", "NetworkPolicy": "policy_uid"}
RESOURCES: dict[Owned, str] = {"Secret": "secrets", "NetworkPolicy": "networkpolicies"}


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
            "One Job per attempt where the installation places the pipeline's Jobs (its "
            "namespace, unless DIRIGENT_KUBE_PLACEMENT maps it elsewhere), under the "
            "installation's ServiceAccount with no token; a `namespace` or "
            "`serviceAccount` the installation does not allow is refused. Named "
            "`dirigent-<run>-<attempt>` (with a digest of DIRIGENT_KUBE_INSTALLATION "
            "when set, also on every Job as `dirigent.dev/installation`), `backoffLimit: 0`, "
            "non-root, read-only root filesystem with an emptyDir at /tmp, all capabilities "
            "dropped, seccomp RuntimeDefault, default requests and limits "
            "(DIRIGENT_KUBE_DEFAULT_REQUESTS / _LIMITS) for what `resources` leaves out. "
            "`network: false` (the default) gives the pods no network at all (a NetworkPolicy "
            "the Job owns); a list of destinations allows egress to those only. "
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
            "`imagePullGrace`). The log goes to storage, up to DIRIGENT_KUBE_LOG_LIMIT "
            "(empty when no kubelet serves it)."
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

    def check_config(self, config: DockerConfig) -> list[Issue]:
        """What no tenant may ask: the per-namespace check waits for the pipeline's namespace."""
        s = self.settings()
        namespace = None if has_reference(config.namespace) else config.namespace
        account = None if has_reference(config.service_account) else config.service_account
        return [
            *allowed_anywhere(namespace, account, s.placement),
            *metadata_problems(
                config.labels, config.annotations, s.allowed_labels, s.allowed_annotations
            ),
        ]

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
        s = self.settings()
        for issue in metadata_problems(
            config.labels, config.annotations, s.allowed_labels, s.allowed_annotations
        ):
            where = ".".join(str(p) for p in issue.location)
            raise BlockFailure(
                REFUSED, error_class=ErrorClass.REJECTED, problem=f"config.{where}: {issue.message}"
            )
        placed = place(config.namespace, config.service_account, ctx.namespace, s.placement)
        policy = s.pod_policy(placed)
        namespace = placed.namespace
        fields: dict[str, Any] = {}
        if config.connection is not None:
            fields = dict(ctx.connection(config.connection, _Fields).model_extra or {})
        cluster = self._cluster(config, ctx)
        body = job_manifest(config, ctx, namespace, policy)
        if cluster is None:
            body = with_pod_defaults(body, s.pod_defaults)
        owned: list[tuple[Owned, dict[str, Any] | None]] = [
            ("Secret", secret_manifest(config, ctx, namespace, fields, policy)),
            ("NetworkPolicy", network_policy_for(config, ctx, namespace, policy)),
        ]
        kube = await self.kube(cluster)
        meta = await self._submit(kube, body, [(k, o) for k, o in owned if o is not None], ctx)
        return RemoteHandle(block_id=self.spec.id, ref=f"{namespace}/{meta['name']}", meta=meta)

    async def _submit(
        self,
        kube: KubeClient,
        body: dict[str, Any],
        owned: list[tuple[Owned, dict[str, Any]]],
        ctx: StepContext,
    ) -> dict[str, str]:
        """Make what the Job owns, the Job, then its ownership; the handle's meta."""
        installation = self.settings().installation
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        meta = {"namespace": namespace, "name": name, "installation": installation}
        doing = ("create", "jobs")
        try:
            # What the Job owns first, so its pod never starts without it; then the Job;
            # then the Job owns it. Each step finds what an earlier try of this attempt left.
            for kind, obj in owned:
                doing = ("create", RESOURCES[kind])
                meta[OWNED_UIDS[kind]] = await kube.put_owned(
                    kind, namespace, obj, _guard(ctx, installation)
                )
            doing = ("create", "jobs")
            job = await self._create_job(kube, namespace, body, ctx, installation)
            for kind, _ in owned:
                doing = ("patch", RESOURCES[kind])
                await kube.own(kind, namespace, name, owner_reference(job))
        except _foreign() as err:
            raise BlockFailure(
                FOREIGN_JOB,
                error_class=ErrorClass.REJECTED,
                kind=err.kind,
                namespace=namespace,
                name=name,
            ) from None
        except _api_error() as err:
            raise _api_failure(err, *doing, namespace) from err
        meta["uid"] = job["metadata"]["uid"]
        return meta

    async def _create_job(
        self,
        kube: KubeClient,
        namespace: str,
        body: dict[str, Any],
        ctx: StepContext,
        installation: str,
    ) -> dict[str, Any]:
        """The Job, created now or found from an earlier try of this attempt."""
        name = body["metadata"]["name"]
        try:
            created = await kube.create_job(namespace, body)
        except _api_error() as err:
            if getattr(err, "status", None) != 409:
                raise
            existing = await kube.read_job(namespace, name) or {}
            if not is_ours(existing, ctx, installation):
                raise BlockFailure(
                    FOREIGN_JOB,
                    error_class=ErrorClass.REJECTED,
                    kind="Job",
                    namespace=namespace,
                    name=name,
                ) from err
            ctx.log.info(f"found Job {namespace}/{name} from an earlier try of this attempt")
            return existing
        ctx.log.info(f"created Job {namespace}/{name}", image=body_image(body))
        return created

    async def _own_job(
        self, handle: RemoteHandle, config: DockerConfig, ctx: StepContext
    ) -> tuple[KubeClient, dict[str, Any] | None]:
        """The client, and the handle's Job if it is still this attempt's (else None)."""
        namespace, name = handle.meta["namespace"], handle.meta["name"]
        kube = await self.kube(self._cluster(config, ctx))
        job = await kube.read_job(namespace, name)
        if job is None or not is_ours(job, ctx, handle.meta.get("installation", "")):
            return kube, None
        uid = handle.meta.get("uid")
        if uid is not None and job["metadata"].get("uid") != uid:
            return kube, None  # deleted and made again by someone else
        return kube, job

    async def probe(
        self, handle: RemoteHandle, config: DockerConfig, ctx: StepContext
    ) -> ProbeResult:
        namespace, name = handle.meta["namespace"], handle.meta["name"]
        kube, job = await self._own_job(handle, config, ctx)
        if job is None:
            return ProbeResult.gone(f"Job {namespace}/{name} no longer exists (as this attempt's)")
        conditions = {
            c["type"]: c
            for c in job.get("status", {}).get("conditions") or []
            if c.get("status") == "True"
        }
        if "Complete" in conditions or "SuccessCriteriaMet" in conditions:
            return ProbeResult.succeeded(f"Job {name} completed")
        pods = await kube.job_pods(namespace, name, job["metadata"]["uid"])
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
            log = await kube.pod_log(
                namespace,
                pod["metadata"]["name"],
                CONTAINER,
                limit_bytes=FAILURE_BYTES,
                tail_lines=FAILURE_LINES,
            )
        except _log_errors():
            return ""
        lines = log.decode("utf-8", errors="replace").rstrip("\n").splitlines()
        return "\n".join(lines[-FAILURE_LINES:])

    async def fetch(
        self, handle: RemoteHandle, config: DockerConfig, ctx: StepContext
    ) -> DockerOutput:
        namespace, name = handle.meta["namespace"], handle.meta["name"]
        kube = await self.kube(self._cluster(config, ctx))
        pods = await kube.job_pods(namespace, name, handle.meta.get("uid"))
        pod = pods[-1]["metadata"]["name"] if pods else None
        terminated = (_container_state(pods[-1]) if pods else {}).get("terminated") or {}
        log_uri = f"{ctx.scratch}/steps/{ctx.step}/{ctx.attempt_id}/log"
        if pod is None:
            ctx.log.warning(f"Job {name} has no pod left; stored an empty log")
        tail = await self._store_log(kube, namespace, pod, log_uri, config.log_tail, ctx)
        return DockerOutput(
            exit_code=int(terminated.get("exitCode", 0)),
            namespace=namespace,
            job=name,
            pod=pod,
            log_tail=tail.decode("utf-8", errors="replace"),
            log_uri=log_uri,
        )

    async def _store_log(
        self,
        kube: KubeClient,
        namespace: str,
        pod: str | None,
        uri: str,
        keep: int,
        ctx: StepContext,
    ) -> bytes:
        """Stream the pod's log to ``uri`` (up to the installation's limit); its last ``keep``
        bytes. Memory holds one chunk and the tail, never the log."""
        limit = self.settings().log_limit.bytes
        tail, size = b"", 0
        async with ctx.storage.open_write(uri, content_type="text/plain") as writer:
            if pod is None:
                return b""
            try:
                async with contextlib.aclosing(
                    kube.stream_pod_log(namespace, pod, CONTAINER, limit_bytes=limit)
                ) as chunks:
                    async for chunk in chunks:
                        await writer.write(chunk)
                        size += len(chunk)
                        tail = (tail + chunk)[-keep:] if keep else b""
            except _log_errors() as err:
                ctx.log.warning(
                    f"no log for pod {pod}: the API server could not serve it ({_why(err)}); "
                    f"stored {'an empty log' if size == 0 else f'its first {size} bytes'}"
                )
        if size >= limit:
            ctx.log.warning(
                f"the log of pod {pod} was cut at {size} bytes (DIRIGENT_KUBE_LOG_LIMIT)"
            )
        return tail

    async def cancel(self, handle: RemoteHandle, config: DockerConfig, ctx: StepContext) -> bool:
        """Delete the Job if it is still this attempt's, and what it owns (by uid when the
        handle knows it; a handle from before uids were kept, by name, only if the Job was
        this attempt's or is gone)."""
        namespace, name = handle.meta["namespace"], handle.meta["name"]
        kube, job = await self._own_job(handle, config, ctx)
        deleted = False
        if job is not None:
            deleted = await kube.delete_job(namespace, name, job["metadata"]["uid"])
        wanted = {
            "Secret": bool(config.env_from_connection),
            "NetworkPolicy": config.network is not True,
        }
        for kind, key in OWNED_UIDS.items():
            uid = handle.meta.get(key)
            if uid is not None:
                await kube.delete_owned(kind, namespace, name, uid)
            elif wanted[kind] and (job is not None or await kube.read_job(namespace, name) is None):
                await kube.delete_owned(kind, namespace, name)
        return deleted

    def classify_error(self, error: Exception) -> ErrorClass:
        status = getattr(error, "status", None)
        if isinstance(status, int) and isinstance(error, _api_error()):
            return http_status_class(status)
        return classify_default(error)


def _guard(ctx: StepContext, installation: str) -> dict[str, str]:
    """The labels an object an earlier try left must hold to be taken as this attempt's.

    The label must be there with this installation's name ("" when unnamed): a JSON patch
    cannot test "missing or empty", so a Secret or policy an unnamed installation made
    before the label existed, met by a replayed execute, is refused rather than adopted.
    """
    return selector_for(ctx, installation)


def _api_failure(err: Exception, verb: str, resource: str, namespace: str) -> BlockFailure:
    """An API refusal as a classified block failure that says which call, where, and why."""
    status = int(getattr(err, "status", 0) or 0)
    return BlockFailure(
        API,
        error_class=http_status_class(status),
        status=status,
        reason=getattr(err, "reason", ""),
        verb=verb,
        resource=resource,
        namespace=namespace,
        hint=FORBIDDEN_HINT if status == 403 else "",
    )


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
