"""The Helm chart's values, as Pydantic models: the one source of values.yaml, the schema and
the values reference.

Why models and not a hand-written values.yaml: every value needs a type (for
``values.schema.json`` with ``additionalProperties: false``, so a typo fails ``helm
install``), a default and a sentence of documentation (for the README), and the three must
never disagree. The engine's settings are not repeated here: ``settings`` is derived from
``EngineSettings`` field by field, so a new engine setting appears in the chart (and in its
reference) the next time ``python -m hack.ship`` runs, and the drift check says so until then.
"""

from __future__ import annotations

import datetime as dt
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from dirigent.engine.infrastructure.settings import EngineSettings

__all__ = ["ENGINE_SETTINGS_IN_CHART", "Values", "camel", "settings_model"]


def camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=camel, populate_by_name=True)


def _f(default: Any, doc: str, **kw: Any) -> Any:
    if isinstance(default, dict | list):
        value = default
        return Field(default_factory=lambda: typing.cast(Any, value).copy(), description=doc, **kw)
    return Field(default=default, description=doc, **kw)


# EngineSettings fields the chart sets from its own structure, not from `settings`.
ENGINE_SETTINGS_IN_CHART: dict[str, str] = {
    "database_url": "database.existingSecret / database.urlKey",
    "secret_key": "secretKey.existingSecret / secretKey.key",
    "metrics_port": "metrics.port",
    "worker_concurrency": "worker.concurrency",
    "worker_tags": "worker.tags",
    "artifact_root": "artifacts.root",
    "artifact_connection": "artifacts.connection",
}

# Sentences for engine settings whose field carries no description of its own.
_SETTING_DOCS: dict[str, str] = {
    "enabled_unsafe_blocks": "Blocks allowed through the unsafe gate, e.g. [docker.run].",
    "inline_artifact_max": "Largest output kept inline in the database (bytes, or 64kb).",
    "poll_interval": "How often an idle worker looks for due attempts (30s, 500ms, seconds).",
    "lease_duration": "How long a claimed attempt stays leased without a heartbeat.",
    "heartbeat_interval": "How often a worker renews its leases; shorter than leaseDuration.",
    "stuck_run": "A run with no progress for this long is reported as stuck.",
    "sweep_interval": "How often the sweeper looks for expired leases, stuck runs and retention.",
    "retention_runs": "Delete finished runs older than this (e.g. 30d); unset keeps them.",
    "retention_logs": "Delete run logs older than this (e.g. 7d); unset keeps them.",
    "log_format": "Log format: json (the image's default) or console.",
    "scheduler_misfire_grace": "A slot missed by less than this still fires late; older "
    "ones follow the schedule's misfire policy.",
    "scheduler_tick": "How often the scheduler looks for due slots.",
    "scheduler_catch_up": "Slots one schedule may owe after an outage before the rest count as a misfire (fired once, from now).",
    "webhook_max_body": "Largest webhook request body accepted (bytes, or 1mb).",
    "api_max_body": "Largest request body the REST API accepts (bytes, or 4mb); larger is 413.",
    "api_token_audiences": "Audiences a bearer token for the REST API must be minted for (kubectl create token NAME --audience dirigent); empty accepts any.",
    "notification_max_attempts": "Deliveries of one notification before it fails for good.",
    "notification_backoff": "Wait before a failed notification delivery is retried.",
    "report_max_size": "Largest run report kept (bytes, or 256kb).",
}


def _setting_type(info: FieldInfo) -> Any:
    """The type a person writes in values for one EngineSettings field."""
    annotation = info.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = (
        args[0] if typing.get_origin(annotation) in (typing.Union, type(int | None)) else annotation
    )
    if typing.get_origin(base) is Literal:
        return base
    if typing.get_origin(base) is list:
        return list[str]
    if any(type(m).__name__ == "BeforeValidator" for m in info.metadata):
        return str | int | float  # human spellings: 30s, 64kb, or a bare number
    if base in (int, float, bool, str):
        return base
    return str


def _shown(default: Any) -> str:
    if default in (None, []):
        return "unset"
    if isinstance(default, dt.timedelta):
        return f"{int(default.total_seconds())}s"
    if isinstance(default, float) and default.is_integer():
        return f"{int(default)}s"
    return str(default)


def settings_model() -> type[BaseModel]:
    """``settings``: one optional value per EngineSettings field the chart does not own."""
    fields: dict[str, Any] = {}
    for name, info in EngineSettings.model_fields.items():
        if name in ENGINE_SETTINGS_IN_CHART:
            continue
        doc = info.description or _SETTING_DOCS.get(name)
        if not doc:
            raise ValueError(f"EngineSettings.{name} has no description: add one to _SETTING_DOCS")
        env = "DIRIGENT_" + name.upper()
        default = info.get_default(call_default_factory=True)
        shown = _shown(default)
        fields[name] = (
            _setting_type(info) | None,
            Field(default=None, description=f"{doc} ({env}; engine default: {shown})"),
        )
    return create_model("Settings", __base__=_Strict, **fields)


Settings = settings_model()


class Image(_Strict):
    repository: str = _f("localhost/dirigent", "Image repository (one image for every process).")
    tag: str = _f("", "Image tag; empty means the chart's appVersion.")
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = _f("IfNotPresent", "Pull policy.")
    pull_secrets: list[str] = _f([], "Names of Secrets used to pull the image.")


class Crds(_Strict):
    install: bool = _f(True, "Install the dirigent.dev CustomResourceDefinitions with the chart.")
    keep: bool = _f(
        True,
        "Keep the CRDs (and so every Pipeline, Schedule, Webhook, Connection) on uninstall.",
    )


class Database(_Strict):
    existing_secret: str = _f(
        "",
        "Required: a Secret holding the PostgreSQL URL (postgresql+asyncpg://...). "
        "The chart bundles no database.",
    )
    url_key: str = _f("url", "Key of the URL inside that Secret.")


class SecretKey(_Strict):
    existing_secret: str = _f(
        "",
        "Required: a Secret holding the 32-byte key that seals connection secrets "
        "(openssl rand -base64 32).",
    )
    key: str = _f("secret-key", "Key inside that Secret.")


class Artifacts(_Strict):
    """Where step artifacts and storage scratch live, for every process (issue 32)."""

    root: str = _f(
        "",
        "Where artifacts go (DIRIGENT_ARTIFACT_ROOT): an object-storage URI such as "
        "s3://bucket/prefix, which every pod reads (a shared installation needs this); empty "
        "means /var/lib/dirigent/artifacts, an emptyDir each pod has alone, for a single-pod "
        "try only (the API cannot serve what a worker wrote there, nor can another worker read it).",
    )
    connection: str = _f(
        "",
        "A Connection in the release namespace (kind s3 for s3://) whose settings open the "
        "root (DIRIGENT_ARTIFACT_CONNECTION); empty means the pods' ambient identity (the "
        "AWS_* environment in extraEnv, or a web identity from the ServiceAccount annotations).",
    )


class ServiceMonitor(_Strict):
    enabled: bool = _f(False, "Create a ServiceMonitor (Prometheus Operator) for every process.")
    interval: str = _f("30s", "Scrape interval.")
    labels: dict[str, str] = _f({}, "Extra labels, e.g. the one your Prometheus selects on.")


class PrometheusRule(_Strict):
    enabled: bool = _f(False, "Create a PrometheusRule with dirigent's alerts (docs/operate.md).")
    labels: dict[str, str] = _f({}, "Extra labels, e.g. the one your Prometheus selects on.")


class Metrics(_Strict):
    port: int = _f(
        9464, "Port of every process's /metrics (DIRIGENT_METRICS_PORT).", ge=1, le=65535
    )
    service_monitor: ServiceMonitor = _f(ServiceMonitor(), "ServiceMonitor.")
    prometheus_rule: PrometheusRule = _f(PrometheusRule(), "PrometheusRule.")


class Dashboards(_Strict):
    enabled: bool = _f(False, "Ship the Grafana dashboards as ConfigMaps for Grafana's sidecar.")
    label: str = _f("grafana_dashboard", "Label the sidecar looks for.")
    label_value: str = _f("1", "Value of that label.")
    namespace: str = _f("", "Namespace of the ConfigMaps; empty means the release namespace.")
    annotations: dict[str, str] = _f({}, "Annotations, e.g. grafana_folder: dirigent.")


class Pod(_Strict):
    """Knobs every Deployment and the migrate Job share."""

    resources: dict[str, Any] = _f(
        {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "Container resources.",
    )
    node_selector: dict[str, str] = _f({}, "Node selector.")
    tolerations: list[dict[str, Any]] = _f([], "Tolerations.")
    affinity: dict[str, Any] = _f({}, "Affinity.")
    pod_annotations: dict[str, str] = _f({}, "Extra pod annotations.")
    pod_labels: dict[str, str] = _f({}, "Extra pod labels.")
    priority_class_name: str = _f("", "Priority class of the pods.")
    extra_env: list[dict[str, Any]] = _f(
        [], "Extra container env entries (name/value or valueFrom)."
    )
    metrics_port: int | None = _f(
        None,
        "Port of this component's /metrics; empty means metrics.port (give each component "
        "its own when pods share the host network).",
        ge=1,
        le=65535,
    )


class ServiceAccount(_Strict):
    create: bool = _f(True, "Create the ServiceAccount.")
    name: str = _f("", "Name; empty means <fullname>-<component>.")
    annotations: dict[str, str] = _f({}, "Annotations (e.g. workload identity).")


class Pdb(_Strict):
    enabled: bool = _f(True, "Create a PodDisruptionBudget (only when replicas > 1).")
    max_unavailable: int = _f(1, "Pods of this component that may be evicted at once.", ge=0)


class Admission(_Strict):
    enabled: bool = _f(
        True, "Serve the validating admission webhook (kubectl apply refuses bad manifests)."
    )
    port: int = _f(9443, "Container port of the webhook server.", ge=1, le=65535)


class Operator(Pod):
    enabled: bool = _f(True, "Run the operator (kopf).")
    replicas: int = _f(
        2, "Replicas; one holds the leader Lease and reconciles, the others stand by.", ge=0
    )
    watch_namespaces: list[str] = _f([], "Namespaces to watch; empty means all.")
    admission: Admission = _f(Admission(), "Admission webhook.")
    service_account: ServiceAccount = _f(ServiceAccount(), "ServiceAccount.")
    pdb: Pdb = _f(Pdb(), "PodDisruptionBudget.")


class Service(_Strict):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = _f("ClusterIP", "Service type.")
    port: int = _f(80, "Service port.", ge=1, le=65535)
    annotations: dict[str, str] = _f({}, "Service annotations.")


class Scheduler(_Strict):
    enabled: bool = _f(True, "Embed the scheduler in the API (one leader by advisory lock).")


class Api(Pod):
    enabled: bool = _f(True, "Run the REST API and webhook intake.")
    replicas: int = _f(2, "Replicas.", ge=0)
    port: int = _f(8080, "Container port of the API (/api/v1, /hooks, /health).", ge=1, le=65535)
    scheduler: Scheduler = _f(Scheduler(), "Embedded scheduler.")
    service: Service = _f(Service(), "Service for the REST API.")
    webhook_service: Service = _f(
        Service(), "Service for webhook intake (/hooks/...), to expose apart from the API."
    )
    service_account: ServiceAccount = _f(ServiceAccount(), "ServiceAccount.")
    pdb: Pdb = _f(Pdb(), "PodDisruptionBudget.")


class Worker(Pod):
    enabled: bool = _f(True, "Run workers.")
    replicas: int = _f(2, "Replicas.", ge=0)
    concurrency: int = _f(
        8, "Attempts one worker runs at once (DIRIGENT_WORKER_CONCURRENCY).", ge=1
    )
    tags: list[str] = _f([], "Capability tags steps can require (DIRIGENT_WORKER_TAGS).")
    execution_namespaces: list[str] = _f(
        [], "Namespaces where docker.run creates Jobs; empty means the release namespace."
    )
    termination_grace_period_seconds: int = _f(
        60, "Time a stopping worker gets to finish or hand back its attempts.", ge=0
    )
    service_account: ServiceAccount = _f(ServiceAccount(), "ServiceAccount.")
    pdb: Pdb = _f(Pdb(), "PodDisruptionBudget.")


class Tenants(_Strict):
    """The namespaces whose Pipelines run docker.run steps, and as whom (docs/security.md)."""

    namespaces: list[str] = _f(
        [],
        "Tenant namespaces: each gets the worker's Role and a ServiceAccount for its Jobs (no "
        "token mounted), so a Pipeline applied there runs docker.run with no hand-made RBAC; "
        "empty (and no selector) means the release namespace.",
    )
    namespace_selector: dict[str, str] = _f(
        {},
        "Also serve every namespace carrying all these labels (read at install and upgrade: "
        "a namespace labelled later is served from the next helm upgrade).",
    )
    job_service_account: str = _f(
        "dirigent-job", "The ServiceAccount docker.run Jobs run as in each tenant namespace."
    )
    placement: dict[str, Any] = _f(
        {},
        "Entries of DIRIGENT_KUBE_PLACEMENT beyond the defaults, by namespace: namespace (an "
        "execution namespace), namespaces, serviceAccount, serviceAccounts (docs/security.md).",
    )


class Migrations(Pod):
    enabled: bool = _f(True, "Run `dirigent migrate` as a pre-install / pre-upgrade hook Job.")
    backoff_limit: int = _f(3, "Retries of the migrate Job.", ge=0)
    active_deadline_seconds: int = _f(600, "Deadline of the migrate Job.", ge=1)


class ChartTests(_Strict):
    """The `helm test` hook Pod (it asks the API for /health/ready)."""

    api_url: str = _f(
        "",
        "Base URL the test Pod asks for /health/ready; empty means the API Service (set it "
        "where Service names do not resolve, e.g. a host-network cluster with no DNS).",
    )
    node_selector: dict[str, str] = _f({}, "Node selector of the test Pod.")
    tolerations: list[dict[str, Any]] = _f([], "Tolerations of the test Pod.")


class Rbac(_Strict):
    create: bool = _f(True, "Create the ClusterRoles, Roles and bindings.")
    aggregate_to_default_roles: bool = _f(
        True, "Aggregate the dirigent viewer / editor / admin roles into view / edit / admin."
    )


class NetworkPolicy(_Strict):
    enabled: bool = _f(False, "Create NetworkPolicies for the operator, API and workers.")
    api_ingress_from: list[dict[str, Any]] = _f(
        [],
        "Peers allowed to reach the API and webhook intake (NetworkPolicyPeer list); empty allows all.",
    )
    metrics_ingress_from: list[dict[str, Any]] = _f(
        [], "Peers allowed to scrape metrics; empty allows all."
    )


class Values(_Strict):
    name_override: str = _f("", "Replaces the chart name in object names.")
    fullname_override: str = _f("", "Replaces <release>-<chart> in object names.")
    common_labels: dict[str, str] = _f({}, "Labels added to every object.")
    image: Image = _f(Image(), "The dirigent image.")
    crds: Crds = _f(Crds(), "CustomResourceDefinitions.")
    database: Database = _f(Database(), "PostgreSQL.")
    secret_key: SecretKey = _f(SecretKey(), "Key sealing connection secrets at rest.")
    artifacts: Artifacts = _f(Artifacts(), "Artifact storage.")
    settings: Settings = _f(Settings(), "Engine settings for every process (DIRIGENT_*).")  # type: ignore[valid-type]
    metrics: Metrics = _f(Metrics(), "Prometheus metrics.")
    dashboards: Dashboards = _f(Dashboards(), "Grafana dashboards.")
    operator: Operator = _f(Operator(), "`dirigent operator`.")
    api: Api = _f(Api(), "`dirigent api`.")
    worker: Worker = _f(Worker(), "`dirigent worker`.")
    tenants: Tenants = _f(Tenants(), "Tenant namespaces and their docker.run placement.")
    migrations: Migrations = _f(
        Migrations(
            resources={"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}
        ),
        "`dirigent migrate`.",
    )
    tests: ChartTests = _f(ChartTests(), "`helm test`.")
    rbac: Rbac = _f(Rbac(), "RBAC.")
    network_policy: NetworkPolicy = _f(NetworkPolicy(), "NetworkPolicy.")
    host_network: bool = _f(False, "Run every pod on the host network (test clusters without CNI).")
    pod_security_context: dict[str, Any] = _f(
        {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "Pod security context (restricted Pod Security Standard).",
    )
    security_context: dict[str, Any] = _f(
        {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "Container security context (restricted Pod Security Standard).",
    )
