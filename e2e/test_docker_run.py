"""docker.run against the real API server: one Job per attempt, probed, fetched, cancelled.

Given a pipeline whose step is docker.run, a run on the embedded PostgreSQL with workers
of our own, and the e2e cluster (pods simulated by kwok: Job pods succeed with exit code 0,
or fail with the exit code of their ``dirigent.dev/test-exit-code`` annotation; a pod that
asks for more CPU than any node has stays Pending, which is how a Job is kept running).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from dirigent.engine.shapes.manifests import parse_manifest
from dirigent.engine.shapes.problems import ProblemsError
from e2e.harness.clusters import Cluster
from e2e.harness.kwok import EXIT_CODE_ANNOTATION
from e2e.kubectl import Kubectl
from tests.support.harness import Harness, harness, processes, spawn_worker
from tests.support.postgres import database_factory, db_url, make_database, pg_server, pg_template
from tests.support.waiting import WaitTimedOut, eventually, throughout

pytestmark = pytest.mark.e2e
__all__ = [
    "database_factory",
    "db_url",
    "make_database",
    "pg_server",
    "pg_template",
    "processes",
]

UNSAFE = frozenset({"docker.run"})
FAST = {"heartbeat": dt.timedelta(milliseconds=200), "enabled_unsafe": UNSAFE}
PENDING_FOREVER = {"requests": {"cpu": "1000"}}  # more than any kwok node offers


@pytest.fixture
async def h(
    db_url: str,
    tmp_path: Path,
    cluster: Cluster,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Harness]:
    monkeypatch.setenv("DIRIGENT_KUBE_KUBECONFIG", str(cluster.kubeconfig))
    monkeypatch.setenv("DIRIGENT_SECRET_KEY", "0" * 64)  # seals the connection's secret
    # The installation lets the harness's pipelines (namespace "default") run their Jobs in
    # this test's fresh namespace, as a step names it.
    placement = {"default": {"namespaces": [namespace]}}
    monkeypatch.setenv("DIRIGENT_KUBE_PLACEMENT", json.dumps(placement))
    async with harness(db_url, tmp_path / "artifacts", unsafe=("docker.run",)) as found:
        yield found


def docker_pipeline(name: str, namespace: str, *, step: str = "", **config: Any) -> str:
    body = {"image": "busybox:1.36", "namespace": namespace, "command": ["true"], **config}
    return f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: {name}}}
spec:
  steps:
    job: {{block: docker.run, poll: 200ms, {step} config: {json.dumps(body)}}}
"""


async def start(h: Harness, name: str) -> int:
    return (await h.run(name)).run_id


def jobs(kubectl: Kubectl, namespace: str, run_id: int) -> list[dict[str, Any]]:
    found = kubectl.json("get", "jobs", "-n", namespace, "-l", f"dirigent.dev/run={run_id}")
    items: list[dict[str, Any]] = found["items"]
    return items


async def until(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """``check`` (it runs kubectl: blocking, so in a thread) until it is true."""
    await eventually(lambda: asyncio.to_thread(check), what=what, timeout=timeout, every=0.1)


async def until_waiting(h: Harness, run_id: int) -> None:
    await eventually(
        lambda: h.attempts(run_id),
        lambda rows: any(a["step"] == "job" and a["status"] == "waiting" for a in rows),
        timeout=30,
        what=f"run {run_id}'s job attempt waiting",
    )


async def test_a_job_runs_to_success_with_a_restricted_spec(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    await h.apply(docker_pipeline("ok", namespace, env={"GREETING": "hi"}))
    run_id = await start(h, "ok")
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=60) == "succeeded"
    [attempt] = await h.attempts(run_id, "job")
    out = attempt["output"]
    assert out["exit_code"] == 0
    assert out["log_tail"] == ""  # no kubelet: the log is empty, and the step says so
    assert await h.storage.read_bytes(out["log_uri"]) == b""
    logs = " ".join(line["message"] for line in await h.logs(run_id))
    assert "stored an empty log" in logs
    [job] = jobs(kubectl, namespace, run_id)
    spec = job["spec"]
    assert job["metadata"]["name"] == f"dirigent-{run_id}-{attempt['id']}"
    assert job["metadata"]["labels"]["dirigent.dev/attempt"] == str(attempt["id"])
    assert job["metadata"]["labels"]["dirigent.dev/step"] == "job"
    assert spec["backoffLimit"] == 0 and spec["ttlSecondsAfterFinished"] == 3600
    assert "activeDeadlineSeconds" not in spec  # the step sets no timeout and no deadline
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    container = pod["containers"][0]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert [v["name"] for v in pod["volumes"] if "emptyDir" in v] == ["tmp"]
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "512Mi"},
    }
    assert container["env"] == [{"name": "GREETING", "value": "hi"}]
    assert job["metadata"]["labels"]["dirigent.dev/installation"] == ""


async def test_a_failing_exit_code_fails_the_step_with_that_code(
    h: Harness, namespace: str
) -> None:
    await h.apply(docker_pipeline("bad", namespace, annotations={EXIT_CODE_ANNOTATION: "3"}))
    run_id = await start(h, "bad")
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=60) == "failed"
    [attempt] = await h.attempts(run_id, "job")
    assert attempt["error_code"] == "engine.remote.failed"
    assert "exit code 3" in attempt["error_message"]


async def test_the_step_timeout_is_the_jobs_active_deadline_and_kubernetes_keeps_it(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    # The pod never starts (it asks for more CPU than any node has), so only the Job's own
    # activeDeadlineSeconds, enforced by the Job controller, can end it.
    await h.apply(
        docker_pipeline("timed", namespace, step="timeout: 3s,", resources=PENDING_FOREVER)
    )
    run_id = await start(h, "timed")
    async with h.workers(1, **FAST):
        await until_waiting(h, run_id)
        [job] = jobs(kubectl, namespace, run_id)
        assert job["spec"]["activeDeadlineSeconds"] == 3
        assert await h.until_finished(run_id, timeout=60) == "failed"
    [attempt] = await h.attempts(run_id, "job")
    assert attempt["error_code"] == "engine.remote.failed"
    assert "DeadlineExceeded" in attempt["error_message"]
    [job] = jobs(kubectl, namespace, run_id)
    # The Job controller ended it: FailureTarget at once, Failed once its pod is gone.
    ended = [c for c in job["status"]["conditions"] if c["type"] in ("Failed", "FailureTarget")]
    assert ended and {c["reason"] for c in ended} == {"DeadlineExceeded"}


SECRET = "s3cr3t-token-never-in-a-job"


async def apply_connection(h: Harness) -> None:
    doc = {
        "apiVersion": "dirigent.dev/v1alpha1",
        "kind": "Connection",
        "metadata": {"name": "warehouse"},
        "spec": {
            "type": "http",
            "settings": {"url": "https://warehouse.invalid"},
            "secrets": {"token": {"name": "warehouse", "key": "token"}},
        },
    }
    manifest, problems = parse_manifest(doc)
    assert manifest is not None, problems
    await h.engine.manifests.apply(manifest, h.namespace, secret_values={"token": SECRET})


def secret_of(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any] | None:
    found = kubectl.json(
        "get", "secrets", "-n", namespace, "--field-selector", f"metadata.name={name}"
    )
    items: list[dict[str, Any]] = found["items"]
    return items[0] if items else None


async def test_connection_values_reach_the_pod_through_a_secret_the_job_owns(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    await apply_connection(h)
    await h.apply(
        docker_pipeline(
            "secretive",
            namespace,
            resources=PENDING_FOREVER,
            connection="warehouse",
            envFromConnection={"API_TOKEN": "token", "API_URL": "url"},
            env={"MODE": "batch"},
        )
    )
    run_id = await start(h, "secretive")
    async with h.workers(1, **FAST):
        await until_waiting(h, run_id)
        [job] = jobs(kubectl, namespace, run_id)
        name = job["metadata"]["name"]
        # No secret value anywhere in the Job object the API server keeps.
        assert SECRET not in json.dumps(job)
        [container] = job["spec"]["template"]["spec"]["containers"]
        assert container["env"] == [
            {
                "name": "API_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": name, "key": "API_TOKEN"}},
            },
            {"name": "API_URL", "valueFrom": {"secretKeyRef": {"name": name, "key": "API_URL"}}},
            {"name": "MODE", "value": "batch"},
        ]
        secret = secret_of(kubectl, namespace, name)
        assert secret is not None
        assert base64.b64decode(secret["data"]["API_TOKEN"]).decode() == SECRET
        assert base64.b64decode(secret["data"]["API_URL"]).decode() == "https://warehouse.invalid"
        [owner] = secret["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Job", name, job["metadata"]["uid"])
        told = await h.engine.runs.cancel(h.namespace, run_id, reason="test")
    assert told == 1
    await until(lambda: not jobs(kubectl, namespace, run_id), "the Job to be deleted")
    await until(lambda: secret_of(kubectl, namespace, name) is None, "the Secret to be deleted")


async def test_the_garbage_collector_deletes_the_secret_with_its_job(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    await apply_connection(h)
    await h.apply(
        docker_pipeline(
            "collected",
            namespace,
            resources=PENDING_FOREVER,
            connection="warehouse",
            envFromConnection={"API_TOKEN": "token"},
        )
    )
    run_id = await start(h, "collected")
    async with h.workers(1, **FAST):
        await until_waiting(h, run_id)
        [job] = jobs(kubectl, namespace, run_id)
        name = job["metadata"]["name"]
        assert secret_of(kubectl, namespace, name) is not None
        # Deleted behind the engine's back, as ttlSecondsAfterFinished deletes a finished Job:
        # the Secret goes with it, though nobody deleted it by name.
        kubectl.run("delete", "job", name, "-n", namespace, "--cascade=background", "--wait=false")
        await until(lambda: secret_of(kubectl, namespace, name) is None, "the collector", 60)
        await h.engine.runs.cancel(h.namespace, run_id, reason="test")


async def test_cancelling_the_run_deletes_the_job(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    await h.apply(docker_pipeline("held", namespace, resources=PENDING_FOREVER))
    run_id = await cancel_while_waiting(h, kubectl, namespace, "held")
    assert await h.status(run_id) == "cancelled"


async def cancel_while_waiting(h: Harness, kubectl: Kubectl, namespace: str, name: str) -> int:
    """Run ``name`` until its one Job waits, cancel the run, and see the Job deleted."""
    run_id = await start(h, name)
    async with h.workers(1, **FAST):
        await until_waiting(h, run_id)
        assert len(jobs(kubectl, namespace, run_id)) == 1
        told = await h.engine.runs.cancel(h.namespace, run_id, reason="test")
    assert told == 1
    await until(lambda: not jobs(kubectl, namespace, run_id), "the Job to be deleted")
    return run_id


async def test_a_job_deleted_behind_the_engines_back_ends_as_lost(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    await h.apply(docker_pipeline("lost", namespace, resources=PENDING_FOREVER))
    run_id = await start(h, "lost")
    async with h.workers(1, **FAST):
        await until_waiting(h, run_id)
        [job] = jobs(kubectl, namespace, run_id)
        kubectl.run("delete", "job", job["metadata"]["name"], "-n", namespace, "--wait=false")
        assert await h.until_finished(run_id, timeout=60) == "failed"
    [attempt] = await h.attempts(run_id, "job")
    assert attempt["error_code"] == "engine.remote.gone"


async def test_an_execute_replayed_after_a_crash_finds_its_job_instead_of_making_a_second(
    h: Harness, kubectl: Kubectl, namespace: str
) -> None:
    # What a worker killed between creating the Job and parking leaves behind: the Job named
    # after the attempt, and the attempt still to execute.
    await h.apply(docker_pipeline("replay", namespace))
    run_id = await start(h, "replay")
    [attempt] = await h.attempts(run_id, "job")
    name = f"dirigent-{run_id}-{attempt['id']}"
    kubectl.run("create", "job", name, "-n", namespace, "--image=busybox:1.36", "--", "true")
    kubectl.run("label", "job", name, "-n", namespace, f"dirigent.dev/attempt={attempt['id']}")
    kubectl.run("label", "job", name, "-n", namespace, f"dirigent.dev/run={run_id}")
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=60) == "succeeded"
    assert [j["metadata"]["name"] for j in jobs(kubectl, namespace, run_id)] == [name]
    logs = " ".join(line["message"] for line in await h.logs(run_id))
    assert "from an earlier try of this attempt" in logs


async def test_a_worker_sigkilled_after_creating_the_job_does_not_create_a_second(
    h: Harness,
    db_url: str,
    tmp_path: Path,
    cluster: Cluster,
    kubectl: Kubectl,
    namespace: str,
    processes: list[subprocess.Popen[bytes]],
) -> None:
    await h.apply(docker_pipeline("killed", namespace, resources=PENDING_FOREVER))
    run_id = await start(h, "killed")
    env = {
        "DIRIGENT_KUBE_KUBECONFIG": str(cluster.kubeconfig),
        "DIRIGENT_ENABLED_UNSAFE_BLOCKS": "docker.run",
        "DIRIGENT_LEASE_DURATION": "2s",
        "DIRIGENT_HEARTBEAT_INTERVAL": "500ms",
        "DIRIGENT_SWEEP_INTERVAL": "0.5",
    }
    victim = spawn_worker(db_url, tmp_path / "artifacts", extra=env)
    processes.append(victim)
    try:
        await until(lambda: bool(jobs(kubectl, namespace, run_id)), "the first Job", timeout=180)
    except WaitTimedOut:
        victim.kill()
        _, err = victim.communicate()
        raise AssertionError(f"{await h.attempts(run_id)}\n{err.decode()[-3000:]}") from None
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    processes.append(spawn_worker(db_url, tmp_path / "artifacts", extra=env))
    # The survivor recovers the attempt (replaying execute, or probing the parked handle);
    # either way it reaches the Job and probes it.
    await until_waiting(h, run_id)
    await throughout(
        lambda: jobs(kubectl, namespace, run_id),
        lambda found: len(found) == 1,
        duration=5,
        every=0.5,
        what=f"one Job for run {run_id} while the survivor recovers it",
    )
    # One attempt, still holding its one Job: parked, or claimed for a probe at this instant.
    [attempt] = await h.attempts(run_id, "job")
    assert attempt["status"] in ("waiting", "running")


RBAC = """
apiVersion: v1
kind: ServiceAccount
metadata: {{name: runner, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: jobs, namespace: {ns}}}
rules:
- {{apiGroups: [batch], resources: [jobs], verbs: [create, get, delete]}}
- {{apiGroups: [""], resources: [pods, pods/log], verbs: [get, list]}}
- {{apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [create, patch, delete]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: runner-jobs, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: jobs}}
subjects: [{{kind: ServiceAccount, name: runner, namespace: {ns}}}]
"""


def token_kubeconfig(kubectl: Kubectl, namespace: str, path: Path) -> Path:
    admin = kubectl.json("config", "view", "--raw", "--minify")
    cluster = admin["clusters"][0]
    token = kubectl.run("create", "token", "runner", "-n", namespace).stdout.strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "runner", "user": {"token": token}}],
        "contexts": [{"name": "runner", "context": {"cluster": cluster["name"], "user": "runner"}}],
        "current-context": "runner",
    }
    path.write_text(json.dumps(config))
    return path


async def test_an_api_error_during_probe_does_not_create_a_second_job(
    h: Harness,
    kubectl: Kubectl,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kubectl.run("apply", "-f", "-", stdin=RBAC.format(ns=namespace))
    monkeypatch.setenv(
        "DIRIGENT_KUBE_KUBECONFIG", str(token_kubeconfig(kubectl, namespace, tmp_path / "kc"))
    )
    await h.apply(docker_pipeline("flaky", namespace, resources=PENDING_FOREVER))
    run_id = await start(h, "flaky")
    async with h.workers(1, **FAST):
        await until_waiting(h, run_id)
        # The worker loses its right to read Jobs: every probe now gets 403 from the API.
        kubectl.run("delete", "rolebinding", "runner-jobs", "-n", namespace)
        await until_row(h, run_id, lambda a: a["probe_errors"] >= 2, "two failed probes")
        assert len(jobs(kubectl, namespace, run_id)) == 1
        kubectl.run("apply", "-f", "-", stdin=RBAC.format(ns=namespace))
        # The right comes back: the next probe reads the same Job, and the attempt waits on.
        await until_row(
            h, run_id, lambda a: a["probe_errors"] == 0 and a["status"] == "waiting", "a probe"
        )
    assert len(jobs(kubectl, namespace, run_id)) == 1
    [attempt] = await h.attempts(run_id, "job")
    assert attempt["error_code"] is None


async def until_row(h: Harness, run_id: int, check: Any, what: str) -> None:
    async def attempt() -> dict[str, Any]:
        [found] = await h.attempts(run_id, "job")
        return found

    await eventually(attempt, check, timeout=60, every=0.1, what=what)


UNREACHABLE = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "nowhere", "cluster": {"server": "https://127.0.0.1:9"}}],
    "users": [{"name": "nobody", "user": {"token": "none"}}],
    "contexts": [{"name": "nowhere", "context": {"cluster": "nowhere", "user": "nobody"}}],
    "current-context": "nowhere",
}


async def apply_cluster(
    h: Harness, settings: dict[str, Any], secrets: dict[str, str], name: str = "elsewhere"
) -> None:
    """A Connection of kind kubernetes; its secret fields sealed as the operator would."""
    doc = {
        "apiVersion": "dirigent.dev/v1alpha1",
        "kind": "Connection",
        "metadata": {"name": name},
        "spec": {
            "type": "kubernetes",
            "settings": settings,
            "secrets": {field: {"name": name, "key": field} for field in secrets},
        },
    }
    manifest, problems = parse_manifest(doc)
    assert manifest is not None, problems
    await h.engine.manifests.apply(manifest, h.namespace, secret_values=secrets)


def by_token(kubectl: Kubectl, namespace: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Server, CA and a service account's token: the connection without a kubeconfig."""
    kubectl.run("apply", "-f", "-", stdin=RBAC.format(ns=namespace))
    cluster = kubectl.json("config", "view", "--raw", "--minify", "--flatten")["clusters"][0]
    ca = base64.b64decode(cluster["cluster"]["certificate-authority-data"]).decode()
    token = kubectl.run("create", "token", "runner", "-n", namespace).stdout.strip()
    settings = {"server": cluster["cluster"]["server"], "certificateAuthority": ca}
    return settings, {"token": token}


@pytest.mark.parametrize("way", ["kubeconfig", "server-token-ca"])
async def test_a_kubernetes_connection_is_the_cluster_the_job_runs_in(
    h: Harness,
    kubectl: Kubectl,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    way: str,
) -> None:
    # The worker's own cluster is unreachable: only the named connection can reach the Job.
    (tmp_path / "nowhere").write_text(json.dumps(UNREACHABLE))
    monkeypatch.setenv("DIRIGENT_KUBE_KUBECONFIG", str(tmp_path / "nowhere"))
    if way == "kubeconfig":
        text = kubectl.run("config", "view", "--raw", "--minify", "--flatten").stdout
        await apply_cluster(h, {}, {"kubeconfig": text})
    else:
        await apply_cluster(h, *by_token(kubectl, namespace))
    await h.apply(docker_pipeline("there", namespace, cluster="elsewhere"))
    run_id = await start(h, "there")
    async with h.workers(1, **FAST):
        assert await h.until_finished(run_id, timeout=60) == "succeeded"
    [attempt] = await h.attempts(run_id, "job")
    [job] = jobs(kubectl, namespace, run_id)
    assert job["metadata"]["name"] == attempt["output"]["job"]
    assert attempt["output"]["exit_code"] == 0


async def test_cancel_reaches_the_job_through_its_cluster_connection(
    h: Harness, kubectl: Kubectl, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nowhere").write_text(json.dumps(UNREACHABLE))
    monkeypatch.setenv("DIRIGENT_KUBE_KUBECONFIG", str(tmp_path / "nowhere"))
    await apply_cluster(h, *by_token(kubectl, namespace))
    await h.apply(
        docker_pipeline("held-there", namespace, cluster="elsewhere", resources=PENDING_FOREVER)
    )
    await cancel_while_waiting(h, kubectl, namespace, "held-there")


async def test_a_cluster_naming_a_connection_of_another_kind_is_refused_at_apply(
    h: Harness, namespace: str
) -> None:
    await apply_connection(h)  # "warehouse", kind http
    with pytest.raises(ProblemsError) as refused:
        await h.apply(docker_pipeline("wrong", namespace, cluster="warehouse"))
    assert [p.code for p in refused.value.problems] == ["pipeline.connection.kind"]
