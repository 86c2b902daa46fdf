"""The Helm chart and the kustomize config, rendered, validated and installed for real.

Given the chart, when ``helm lint`` / ``helm template`` run, then it is clean and every part
renders as the values say; when the rendered chart and ``kubectl kustomize config/default``
are applied server-side, the API server accepts every object; when ``helm install`` runs
against the control plane (pods played by kwok), then the migrate hook ran as a Job, the
processes' Deployments and pods exist with their RBAC in force, a typo in values is refused
by the schema, and ``helm uninstall`` keeps the CRDs.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from dirigent.blocks.kubernetes.settings import KubeSettings
from dirigent.engine import EngineSettings
from dirigent.operator.settings import OperatorSettings
from e2e.gwt import Given
from e2e.harness.binaries import REPO_ROOT
from e2e.harness.clusters import Cluster
from e2e.harness.processes import wait_until
from e2e.helm import CHART, REQUIRED, Helm, by_kind
from e2e.kubectl import Kubectl

pytestmark = pytest.mark.e2e

DIRIGENT_CRDS = ["pipelines", "schedules", "webhooks", "connections"]
ALL_CRDS = [f"{p}.dirigent.dev" for p in DIRIGENT_CRDS]
# Env the chart sets that are not EngineSettings: the operator's own settings, and the
# API's bind address and port (`dirigent api` does not exist yet: these two are the chart's
# proposal, docs/configure.md).
PROCESS_ENV = (
    {f"DIRIGENT_OPERATOR_{name.upper()}" for name in OperatorSettings.model_fields}
    | {f"DIRIGENT_KUBE_{name.upper()}" for name in KubeSettings.model_fields}  # docker.run's
    | {"DIRIGENT_API_HOST", "DIRIGENT_API_PORT"}
)
EVERYTHING_ON = [
    "metrics.serviceMonitor.enabled=true",
    "metrics.prometheusRule.enabled=true",
    "dashboards.enabled=true",
    "networkPolicy.enabled=true",
    "worker.executionNamespaces={jobs-a,jobs-b}",
    "settings.retentionRuns=30d",
    "settings.enabledUnsafeBlocks={docker.run}",
    "settings.inlineArtifactMax=10000000",
    "settings.pollInterval=0.5",
]


@pytest.fixture(scope="module")
def helm() -> Helm:
    return Helm()


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc["spec"]["template"]["spec"] if doc["kind"] != "Pod" else doc["spec"]
    containers: list[dict[str, Any]] = spec["containers"]
    return containers


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# --- static: lint and template -----------------------------------------------------------


def test_helm_lint_is_clean(helm: Helm) -> None:
    args = ["lint", str(CHART), "--strict"]
    for pair in REQUIRED:
        args += ["--set", pair]
    result = helm.run(*args)
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_default_render_has_every_process_and_the_hook(helm: Helm) -> None:
    kinds = by_kind(helm.template())
    deployments = {d["metadata"]["name"]: d for d in kinds["Deployment"]}
    assert set(deployments) == {"dirigent-operator", "dirigent-api", "dirigent-worker"}
    for component in ("operator", "api", "worker"):
        assert _containers(deployments[f"dirigent-{component}"])[0]["args"] == [component]
    (job,) = kinds["Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert _containers(job)[0]["args"] == ["migrate"]
    crds = {c["metadata"]["name"] for c in kinds["CustomResourceDefinition"]}
    assert crds == set(ALL_CRDS)
    for crd in kinds["CustomResourceDefinition"]:
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    # Optional parts are off by default.
    assert not {"ServiceMonitor", "PrometheusRule", "NetworkPolicy", "ConfigMap"} & set(kinds)


def test_the_crds_in_the_chart_are_the_generated_ones(helm: Helm) -> None:
    rendered = {
        c["metadata"]["name"]: c for c in by_kind(helm.template())["CustomResourceDefinition"]
    }
    for path in sorted((REPO_ROOT / "crds").glob("*.yaml")):
        source = yaml.safe_load(path.read_text())
        mine = rendered[source["metadata"]["name"]]
        assert mine["spec"] == source["spec"]


def test_every_container_is_restricted(helm: Helm) -> None:
    for doc in helm.template(*EVERYTHING_ON):
        if doc["kind"] not in ("Deployment", "Job", "Pod"):
            continue
        pod = doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in _containers(doc):
            ctx = c["securityContext"]
            assert ctx["allowPrivilegeEscalation"] is False, doc["metadata"]["name"]
            assert ctx["capabilities"]["drop"] == ["ALL"]
            assert ctx["readOnlyRootFilesystem"] is True


def test_every_dirigent_env_var_is_a_real_setting(helm: Helm) -> None:
    settings = {f"DIRIGENT_{name.upper()}" for name in EngineSettings.model_fields}
    seen: set[str] = set()
    for doc in helm.template(*EVERYTHING_ON):
        if doc["kind"] in ("Deployment", "Job"):
            for c in _containers(doc):
                seen |= {k for k in _env(c) if k.startswith("DIRIGENT_")}
    unknown = seen - settings - PROCESS_ENV
    assert not unknown, f"the chart sets env no process reads: {sorted(unknown)}"
    assert {
        "DIRIGENT_RETENTION_RUNS",
        "DIRIGENT_ENABLED_UNSAFE_BLOCKS",
        "DIRIGENT_POLL_INTERVAL",
    } <= seen


def test_the_operator_reads_its_env_as_the_chart_means_it(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = by_kind(helm.template("operator.watchNamespaces={team-a,team-b}"))
    operator = next(d for d in docs["Deployment"] if d["metadata"]["name"] == "dirigent-operator")
    for name, value in _env(_containers(operator)[0]).items():
        if name.startswith("DIRIGENT_OPERATOR_") and isinstance(value, str):
            monkeypatch.setenv(name, value)
    settings = OperatorSettings()
    assert settings.namespaces == ["team-a", "team-b"]
    assert settings.admission_addr == "0.0.0.0"
    assert settings.admission_host == "dirigent-operator-webhook.dirigent.svc"
    assert settings.lease_namespace == "dirigent"
    assert settings.lease_name == "dirigent-operator"


def test_settings_become_env_values_the_engine_parses(helm: Helm) -> None:
    docs = by_kind(helm.template(*EVERYTHING_ON))
    worker = next(d for d in docs["Deployment"] if d["metadata"]["name"] == "dirigent-worker")
    env = _env(_containers(worker)[0])
    assert env["DIRIGENT_ENABLED_UNSAFE_BLOCKS"] == "docker.run"
    assert env["DIRIGENT_INLINE_ARTIFACT_MAX"] == "10000000"  # not 1e+07
    assert env["DIRIGENT_POLL_INTERVAL"] == "0.5"
    plain = {
        k: v
        for k, v in env.items()
        if isinstance(v, str) and k.startswith("DIRIGENT_") and k not in PROCESS_ENV
    }
    parsed = EngineSettings(**{k.removeprefix("DIRIGENT_").lower(): v for k, v in plain.items()})
    assert parsed.retention_runs is not None and parsed.retention_runs.days == 30
    assert parsed.inline_artifact_max == 10_000_000


def test_everything_on_renders_the_optional_parts(helm: Helm) -> None:
    kinds = by_kind(helm.template(*EVERYTHING_ON))
    assert len(kinds["ServiceMonitor"]) == 1
    (rule,) = kinds["PrometheusRule"]
    alerts = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    assert rule["spec"] == alerts
    dashboards = {c["metadata"]["name"] for c in kinds["ConfigMap"]}
    assert dashboards == {f"dirigent-dashboard-{n}" for n in ("overview", "pipeline", "operations")}
    for cm in kinds["ConfigMap"]:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert {n["metadata"]["name"] for n in kinds["NetworkPolicy"]} == {
        "dirigent-operator", "dirigent-api", "dirigent-worker",
    }  # fmt: skip
    # The release namespace is the default tenant; the execution namespaces are served too.
    worker_roles = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in kinds["Role"]}
    assert worker_roles == {
        ("dirigent", "dirigent-worker"),
        ("jobs-a", "dirigent-worker"),
        ("jobs-b", "dirigent-worker"),
    }
    job_accounts = {
        (a["metadata"]["namespace"], a.get("automountServiceAccountToken"))
        for a in kinds["ServiceAccount"]
        if a["metadata"]["name"] == "dirigent-job"
    }
    assert job_accounts == {("dirigent", False), ("jobs-a", False), ("jobs-b", False)}


def test_crds_can_be_left_out_or_not_kept(helm: Helm) -> None:
    assert "CustomResourceDefinition" not in by_kind(helm.template("crds.install=false"))
    for crd in by_kind(helm.template("crds.keep=false"))["CustomResourceDefinition"]:
        assert "helm.sh/resource-policy" not in crd["metadata"].get("annotations", {})


def test_a_typo_in_values_is_refused_by_the_schema(helm: Helm) -> None:
    result = helm.run(
        "template", "x", str(CHART), "--set", REQUIRED[0], "--set", REQUIRED[1],
        "--set", "worker.replica=3", check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "replica" in result.stderr and "additional" in result.stderr.lower(), result.stderr


def test_a_missing_database_secret_is_explained(helm: Helm) -> None:
    result = helm.run("template", "x", str(CHART), "--set", REQUIRED[1], check=False)
    assert result.returncode != 0
    assert "database.existingSecret is required" in result.stderr


# --- against the control plane ------------------------------------------------------------


def _apply_server_side(kubectl: Kubectl, docs: list[dict[str, Any]], namespace: str | None) -> str:
    args = [
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=e2e-packaging",
        "-f",
        "-",
    ]
    if namespace:
        args[1:1] = ["-n", namespace]
    return kubectl.run(*args, stdin=yaml.safe_dump_all(docs)).stdout


def _wait_established(kubectl: Kubectl, names: list[str]) -> None:
    kubectl.run(
        "wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in names]
    )


def _delete_cluster_objects(kubectl: Kubectl, release: str) -> None:
    selector = f"app.kubernetes.io/instance={release}"
    kubectl.run(
        "delete", "clusterrole,clusterrolebinding", "-l", selector, "--wait=false", check=False
    )


@pytest.fixture
def release(kubectl: Kubectl) -> Iterator[str]:
    name = f"r{uuid.uuid4().hex[:6]}"
    yield name
    _delete_cluster_objects(kubectl, name)


def test_the_rendered_chart_is_accepted_by_server_side_apply(
    helm: Helm, kubectl: Kubectl, namespace: str, release: str
) -> None:
    docs = helm.template(
        "dashboards.enabled=true", "networkPolicy.enabled=true",
        f"worker.executionNamespaces={{{namespace}}}", release=release, namespace=namespace,
    )  # fmt: skip
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    _apply_server_side(kubectl, crds, None)
    _wait_established(kubectl, [c["metadata"]["name"] for c in crds])
    out = _apply_server_side(kubectl, rest, namespace)
    applied = len([line for line in out.splitlines() if "serverside-applied" in line])
    assert applied == len(rest), out
    deployment = kubectl.json("get", "deployment", f"{release}-dirigent-worker", "-n", namespace)
    assert (
        deployment["spec"]["template"]["spec"]["serviceAccountName"] == f"{release}-dirigent-worker"
    )


def test_kustomize_default_is_accepted_by_server_side_apply(kubectl: Kubectl, given: Given) -> None:
    rendered = kubectl.run("kustomize", str(REPO_ROOT / "config" / "default")).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = {d["kind"] for d in docs}
    assert {
        "CustomResourceDefinition",
        "Deployment",
        "Job",
        "ClusterRole",
        "Role",
        "Service",
    } <= kinds
    try:
        crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
        _apply_server_side(kubectl, crds, None)
        _wait_established(kubectl, [c["metadata"]["name"] for c in crds])
        out = _apply_server_side(kubectl, [d for d in docs if d not in crds], None)
        assert "deployment.apps/dirigent-operator serverside-applied" in out
        # What a person types, validated by the server: every object of the install.
        dry = kubectl.run("apply", "-k", str(REPO_ROOT / "config" / "default"), "--dry-run=server")
        lines = dry.stdout.splitlines()
        assert len(lines) == len(docs), dry.stdout
        assert all(line.endswith("(server dry run)") for line in lines), dry.stdout
        sa = "system:serviceaccount:dirigent-system:dirigent-worker"
        can = kubectl.run(
            "auth", "can-i", "create", "jobs", "-n", "dirigent-system", f"--as={sa}", check=False
        )
        assert can.stdout.strip() == "yes"
        # Samples: one per kind, accepted by the CRDs' schemas.
        samples = kubectl.run("kustomize", str(REPO_ROOT / "config" / "samples")).stdout
        then = given.yaml(samples).when.applied().then
        assert {r.kind for r in then.refs} == {"Pipeline", "Schedule", "Webhook", "Connection"}
    finally:
        kubectl.run("delete", "namespace", "dirigent-system", "--wait=false", check=False)
        for kind in ("clusterrole", "clusterrolebinding"):
            names = [d["metadata"]["name"] for d in docs if d["kind"].lower() == kind]
            kubectl.run("delete", kind, *names, "--wait=false", check=False)


def _adopt(kubectl: Kubectl, release: str, namespace: str) -> None:
    """Let this release take over CRDs left by an earlier release or by kubectl (what
    docs/upgrade.md tells a person to do when CRDs exist before `helm install`)."""
    for crd in ALL_CRDS:
        if kubectl.run("get", "crd", crd, check=False).returncode != 0:
            continue
        kubectl.run("label", "crd", crd, "--overwrite", "app.kubernetes.io/managed-by=Helm")
        kubectl.run(
            "annotate", "crd", crd, "--overwrite",
            f"meta.helm.sh/release-name={release}", f"meta.helm.sh/release-namespace={namespace}",
        )  # fmt: skip


def _pods(kubectl: Kubectl, namespace: str, component: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = kubectl.json(
        "get", "pods", "-n", namespace, "-l", f"app.kubernetes.io/component={component}"
    )["items"]
    return pods


def _can(kubectl: Kubectl, sa: str, verb: str, resource: str, namespace: str | None) -> bool:
    args = ["auth", "can-i", verb, resource, f"--as={sa}"]
    args += ["-n", namespace] if namespace else ["-A"]
    return kubectl.run(*args, check=False).stdout.strip() == "yes"


INSTALL_VALUES = ["--set", REQUIRED[0], "--set", REQUIRED[1], "--set", "api.replicas=1"]


def _install_refusing_a_typo(helm: Helm, kubectl: Kubectl, namespace: str, release: str) -> None:
    """A typo is refused before anything is created; then the release installs."""
    typo = helm.run("install", release, str(CHART), "-n", namespace, *INSTALL_VALUES,
                    "--set", "api.schedulr.enabled=false", check=False)  # fmt: skip
    assert typo.returncode != 0 and "schedulr" in typo.stderr, typo.stderr
    assert kubectl.json("get", "deployments", "-n", namespace)["items"] == []
    helm.run("install", release, str(CHART), "-n", namespace, *INSTALL_VALUES, "--timeout", "180s")


def _the_migrate_hook_ran(helm: Helm, kubectl: Kubectl, namespace: str, release: str) -> None:
    """The migrate hook ran as a Job to completion before the release was deployed."""
    job = kubectl.json("get", "job", f"{release}-dirigent-migrate", "-n", namespace)
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["status"].get("succeeded") == 1
    status = helm.run("status", release, "-n", namespace, "-o", "json").stdout
    assert '"status":"deployed"' in status.replace(" ", "")


def _the_processes_run(kubectl: Kubectl, namespace: str, fullname: str) -> None:
    deployments = {
        d["metadata"]["name"]: d
        for d in kubectl.json("get", "deployments", "-n", namespace)["items"]
    }
    assert set(deployments) == {f"{fullname}-{c}" for c in ("operator", "api", "worker")}
    for component, replicas in (("operator", 2), ("api", 1), ("worker", 2)):

        def running(c: str = component, n: int = replicas) -> bool:
            pods = _pods(kubectl, namespace, c)
            return len(pods) == n and all(p["status"].get("phase") == "Running" for p in pods)

        wait_until(running, what=f"{replicas} running {component} pods", timeout=60)
    pdbs = {p["metadata"]["name"] for p in kubectl.json("get", "pdb", "-n", namespace)["items"]}
    assert pdbs == {f"{fullname}-operator", f"{fullname}-worker"}  # api has one replica
    operator_env = _env(_containers(deployments[f"{fullname}-operator"])[0])
    assert operator_env["DIRIGENT_OPERATOR_LEASE_NAMESPACE"] == namespace


def _rbac_is_in_force(kubectl: Kubectl, namespace: str, fullname: str) -> None:
    """Workers only touch Jobs and pod logs in their namespace; the operator reconciles every
    namespace but cannot create Deployments; the API reviews tokens."""
    worker = f"system:serviceaccount:{namespace}:{fullname}-worker"
    operator = f"system:serviceaccount:{namespace}:{fullname}-operator"
    api = f"system:serviceaccount:{namespace}:{fullname}-api"
    assert _can(kubectl, worker, "create", "jobs", namespace)
    assert _can(kubectl, worker, "get", "pods/log", namespace)
    assert not _can(kubectl, worker, "get", "secrets", namespace)
    assert not _can(kubectl, worker, "create", "jobs", "default")
    assert _can(kubectl, operator, "patch", "pipelines.dirigent.dev/status", None)
    assert not _can(kubectl, operator, "create", "deployments", namespace)
    assert _can(kubectl, api, "create", "tokenreviews.authentication.k8s.io", None)
    assert not _can(kubectl, api, "delete", "pipelines.dirigent.dev", namespace)


def _helm_test_creates_its_hook(helm: Helm, kubectl: Kubectl, namespace: str, release: str) -> None:
    """`helm test` runs the chart's test hook: a Pod asking the API's Service for
    /health/ready. kwok completes only Job-owned pods, so the hook Pod stays Running and
    helm's wait times out here; what is proven is that helm renders and creates the hook
    Pod, pointed at the API Service, as a test hook. Its check passing (phase Succeeded,
    then deleted by its hook-delete-policy) is proven on the real node
    (e2e/test_chart_real_node.py)."""
    fullname = f"{release}-dirigent"
    tested = helm.run("test", release, "-n", namespace, "--timeout", "15s", check=False)
    assert "timed out waiting for the condition" in tested.stderr, tested.stderr
    hook = kubectl.json("get", "pod", f"{fullname}-test-api", "-n", namespace)
    assert hook["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert hook["status"]["phase"] == "Running"
    (script,) = [c["command"][-1] for c in hook["spec"]["containers"]]
    assert f"http://{fullname}-api:80/health/ready" in script, script
    kubectl.run("get", "service", f"{fullname}-api", "-n", namespace)
    kubectl.run("delete", "pod", f"{fullname}-test-api", "-n", namespace, "--wait=false")


def _an_upgrade_typo_changes_nothing(helm: Helm, namespace: str, release: str) -> None:
    """An upgrade with a typo is refused too, and leaves the release as it was."""
    bad = helm.run("upgrade", release, str(CHART), "-n", namespace, *INSTALL_VALUES,
                   "--set", "worker.concurency=4", check=False)  # fmt: skip
    assert bad.returncode != 0 and "concurency" in bad.stderr, bad.stderr
    assert re.search(
        r'"version":\s*1\b', helm.run("status", release, "-n", namespace, "-o", "json").stdout
    )


def test_helm_install_for_real(
    cluster: Cluster, kubectl: Kubectl, namespace: str, release: str
) -> None:
    helm = Helm(kubeconfig=cluster.kubeconfig)
    kubectl.run("create", "secret", "generic", "dirigent-database", "-n", namespace,
                "--from-literal=url=postgresql+asyncpg://dirigent@127.0.0.1:5432/dirigent")  # fmt: skip
    kubectl.run("create", "secret", "generic", "dirigent-secret-key", "-n", namespace,
                "--from-literal=secret-key=" + "ab" * 32)  # fmt: skip
    _adopt(kubectl, release, namespace)
    fullname = f"{release}-dirigent"
    _install_refusing_a_typo(helm, kubectl, namespace, release)
    _the_migrate_hook_ran(helm, kubectl, namespace, release)
    _the_processes_run(kubectl, namespace, fullname)
    _rbac_is_in_force(kubectl, namespace, fullname)
    _helm_test_creates_its_hook(helm, kubectl, namespace, release)
    _an_upgrade_typo_changes_nothing(helm, namespace, release)

    helm.run("uninstall", release, "-n", namespace, "--wait", "--timeout", "120s")
    assert kubectl.json("get", "deployments", "-n", namespace)["items"] == []
    for crd in ALL_CRDS:
        kept = kubectl.json("get", "crd", crd)
        assert kept["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
