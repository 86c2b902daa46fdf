"""The operator as a real process against a real apiserver: what `kubectl apply` people see.

Each test reads as Given / When / Then: manifests applied with kubectl, the operator
reconciling them into the engine (embedded PostgreSQL), status, Events and printer columns
read back with kubectl, runs started and read through the engine's door.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import http.server
import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.engine import EngineClient
from e2e.gwt import Given, Then, dig, events_text, objects_in
from e2e.harness.binaries import REPO_ROOT
from e2e.harness.processes import wait_until
from e2e.kubectl import Kubectl

pytestmark = pytest.mark.e2e

API = "dirigent.dev/v1alpha1"
EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.yaml"))
TRIGGER_KINDS = {"Schedule", "Webhook"}


def pipeline(name: str, steps: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Pipeline",
        "metadata": {"name": name},
        "spec": {"steps": steps, **spec},
    }


def secret(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data}


def ready(then: Then, timeout: float = 30) -> Then:
    return then.condition("Ready", "True", timeout=timeout)


def wait_run(
    engine: EngineClient, namespace: str, run_id: int, states: set[str], timeout: float = 60
) -> Any:
    found: list[Any] = []

    def finished() -> bool:
        run = engine.run(namespace, run_id)
        found[:] = [run]
        return run is not None and run.status in states

    wait_until(finished, what=f"run {run_id} in {states}", timeout=timeout)
    return found[0]


# --- Pipelines ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_is_reconciled(
    operator: Any, given: Given, kubectl: Kubectl, path: Path
) -> None:
    docs = objects_in([path])
    kinds = {d["kind"] for d in docs}
    if kinds & TRIGGER_KINDS:
        pytest.skip("holds a Schedule/Webhook: covered by the trigger tests below")
    # Given the Secrets the example's Connections read (created separately, as its comment says)
    for doc in docs:
        for ref in (
            (doc["spec"].get("secrets") or {}).values() if doc["kind"] == "Connection" else []
        ):
            given.objects(secret(ref["name"], **{ref["key"]: "example-token"})).when.applied()
    # When the example is applied, Then every resource in it is Ready
    then = given.manifest(path).when.applied().then
    for ref in then.refs:
        ready(then.of(ref.kind, ref.name))
        if ref.kind == "Pipeline":
            then.of(ref.kind, ref.name).field("status.engineVersion", equals=1)


def test_an_edit_becomes_a_new_engine_version(operator: Any, given: Given) -> None:
    first = pipeline("edited", {"say": {"block": "core.echo", "config": {"value": "one"}}})
    then = ready(given.objects(first).when.applied().then).field("status.engineVersion", equals=1)
    digest = then.get()["status"]["digest"]

    second = copy.deepcopy(first)
    second["spec"]["steps"]["say"]["config"]["value"] = "two"
    then = given.objects(second).when.applied().then
    then.field("status.engineVersion", equals=2).condition("Ready", "True")
    live = then.get()
    assert live["status"]["observedGeneration"] == live["metadata"]["generation"]
    assert live["status"]["digest"] != digest
    assert live["status"]["problems"] == []


BROKEN = pipeline(
    "broken",
    {
        "a": {"block": "core.noop", "dependsOn": ["b"]},
        "b": {"block": "core.noop", "dependsOn": ["a"]},
        "c": {"block": "no.such.block"},
        "d": {"block": "core.noop", "dependsOn": ["nowhere"]},
    },
)


def test_a_broken_pipeline_is_refused_with_every_problem(operator: Any, given: Given) -> None:
    refusal = given.objects(BROKEN).when.applied_expecting_refusal().then
    refusal.refused_because(r"admission webhook .* denied the request")
    refusal.refused_because(r"Pipeline broken has 3 problem\(s\)")
    refusal.refused_because(
        r"spec\.steps\.c\.block: .*no\.such\.block.*\[pipeline\.block\.unknown\]"
    )
    refusal.refused_because(r"spec\.steps\.d\.dependsOn\[0\]: .*nowhere")
    refusal.refused_because(r"cycle")


def test_with_the_operator_down_a_bad_edit_keeps_the_last_good_version(
    operator: Any, given: Given
) -> None:
    good = pipeline("keeps", {"a": {"block": "core.noop"}})
    ready(given.objects(good).when.applied().then).field("status.engineVersion", equals=1)

    # When the operator is down, admission is skipped (failurePolicy Ignore) ...
    for proc in operator.operators:
        operator.kill(proc)
    bad = copy.deepcopy(BROKEN)
    bad["metadata"]["name"] = "keeps"
    then = given.objects(bad).when.applied().then
    # ... and Then the operator, back, reports every problem while version 1 stays active.
    operator.start_operator()
    then.condition("Ready", "False").field("status.conditions[0].reason", equals="Invalid")
    live = then.get()["status"]
    assert live["engineVersion"] == 1
    assert {p["code"] for p in live["problems"]} >= {"pipeline.block.unknown"}
    assert len(live["problems"]) >= 3
    assert "version 1 stays active" in live["conditions"][0]["message"]


def test_a_pipeline_waits_for_the_pipelines_it_requires(operator: Any, given: Given) -> None:
    # Given, while the operator is down, a Pipeline requiring one that is broken
    for proc in operator.operators:
        operator.kill(proc)
    child = pipeline("child", {"a": {"block": "no.such.block"}})
    parent = pipeline("parent", {"a": {"block": "core.noop"}}, requires={"pipelines": ["child"]})
    then = given.objects(child, parent).when.applied().then
    operator.start_operator()

    # Then the parent is Invalid for want of an active child, located
    waiting = then.of("Pipeline", "parent").condition("Ready", "False")
    waiting.field("status.conditions[0].reason", equals="Invalid")
    [found] = waiting.get()["status"]["problems"]
    assert (found["code"], found["location"]) == (
        "pipeline.pipeline.unknown",
        "spec.requires.pipelines[0]",
    )

    # And once the child is fixed and Ready, the parent is reconciled again: Ready, no timer
    fixed = pipeline("child", {"a": {"block": "core.noop"}})
    ready(given.objects(fixed).when.applied().then)
    ready(waiting, timeout=15)


def test_a_failed_run_raises_a_warning_event_and_fills_the_columns(
    operator: Any, given: Given, kubectl: Kubectl, namespace: str, engine_client: EngineClient
) -> None:
    doomed = pipeline(
        "doomed", {"boom": {"block": "core.fail", "config": {"message": "the disk is full"}}}
    )
    then = ready(given.objects(doomed).when.applied().then)

    run_id = engine_client.start_run(namespace, "doomed")

    then.field("status.lastRun.state", equals="Failed", timeout=60)
    status = then.get()["status"]
    assert status["lastRun"]["id"] == str(run_id)
    assert status["lastRun"]["failedStep"] == "boom"
    assert status["runsInFlight"] == 0

    def warned() -> bool:
        text = events_text(kubectl, then.refs[0])
        return "RunFailed" in text and "boom" in text and "the disk is full" in text

    wait_until(warned, what="a RunFailed Warning event", timeout=30)
    table = kubectl.run("get", "pipelines", "-n", namespace).stdout
    header, row = table.splitlines()[:2]
    assert header.split()[:6] == ["NAME", "VERSION", "READY", "LAST", "RUN", "LAST"]
    assert row.split()[:4] == ["doomed", "1", "True", "Failed"]
    described = kubectl.run("describe", "pipeline", "doomed", "-n", namespace).stdout
    assert "RunFailed" in described and "Warning" in described


# --- Deletion ------------------------------------------------------------------------------


def test_deleting_with_retain_keeps_history(
    operator: Any, given: Given, kubectl: Kubectl, namespace: str, engine_client: EngineClient
) -> None:
    kept = pipeline("kept", {"a": {"block": "core.noop"}})
    then = ready(given.objects(kept).when.applied().then)
    run_id = engine_client.start_run(namespace, "kept")
    wait_run(engine_client, namespace, run_id, {"succeeded"})

    kubectl.run("delete", "pipeline", "kept", "-n", namespace, "--timeout=30s")
    assert "Retain: deactivated in the engine, history kept" in events_text(kubectl, then.refs[0])

    record = engine_client.pipeline(namespace, "kept")
    assert record is not None and record.active is False
    assert engine_client.run(namespace, run_id).status == "succeeded"


def test_deleting_with_delete_cancels_runs_in_flight_and_drops_history(
    operator: Any, given: Given, kubectl: Kubectl, namespace: str, engine_client: EngineClient
) -> None:
    gone = pipeline(
        "gone",
        {"nap": {"block": "core.sleep", "config": {"seconds": 120}}},
        deletionPolicy="Delete",
    )
    then = ready(given.objects(gone).when.applied().then)
    run_id = engine_client.start_run(namespace, "gone")
    wait_run(engine_client, namespace, run_id, {"running"})
    kubectl.run("delete", "pipeline", "gone", "-n", namespace, "--timeout=60s")

    assert engine_client.pipeline(namespace, "gone") is None
    assert engine_client.run(namespace, run_id) is None
    events = events_text(kubectl, then.refs[0])
    assert "Delete: cancelled 1 run(s) in flight, deleted its history" in events, events


# --- Connections ---------------------------------------------------------------------------


def test_a_missing_secret_names_the_reference(operator: Any, given: Given) -> None:
    conn = {
        "apiVersion": API,
        "kind": "Connection",
        "metadata": {"name": "lonely"},
        "spec": {
            "type": "http",
            "settings": {"url": "https://example.invalid"},
            "secrets": {"token": {"name": "nowhere", "key": "token"}},
        },
    }
    then = given.objects(conn).when.applied().then
    then.condition("Ready", "False").field(
        "status.conditions[0].message", matches=lambda m: "Secret nowhere does not exist" in m
    )
    # And when the Secret appears, the Connection syncs (the Secret watch, by reference)
    given.objects(secret("nowhere", token="t")).when.applied()
    ready(then)


def test_a_changed_secret_is_used_by_the_next_step(
    operator: Any, given: Given, kubectl: Kubectl, namespace: str, engine_client: EngineClient
) -> None:
    conn = {
        "apiVersion": API,
        "kind": "Connection",
        "metadata": {"name": "api"},
        "spec": {
            "type": "http",
            "settings": {"url": "https://api.example.invalid"},
            "secrets": {"token": {"name": "api-credentials", "key": "token"}},
        },
    }
    user = pipeline(
        "uses",
        {"call": {"block": "testing.uses_connection", "config": {"connection": "api"}}},
        requires={"connections": ["api"]},
    )
    given.objects(secret("api-credentials", token="first")).when.applied()
    ready(given.objects(conn, user).when.applied().then)

    def token_digest_of_next_run() -> str:
        run_id = engine_client.start_run(namespace, "uses")
        wait_run(engine_client, namespace, run_id, {"succeeded"})
        (attempt,) = engine_client.attempts(namespace, run_id, "call")
        return str(attempt.output["token_sha256"])

    assert token_digest_of_next_run() == hashlib.sha256(b"first").hexdigest()
    given.objects(secret("api-credentials", token="second")).when.applied()
    second = hashlib.sha256(b"second").hexdigest()
    wait_until(
        lambda: token_digest_of_next_run() == second, what="the new token in use", timeout=30
    )


class Loopback:
    """A real HTTP server on loopback: 200 to every GET, recording the Authorization header."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.headers.get("Authorization", ""))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/status"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Nothing listens on the port afterwards: a check meets a refused connection."""
        if self.thread.is_alive():
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(5)


@contextlib.contextmanager
def loopback() -> Iterator[Loopback]:
    server = Loopback()
    try:
        yield server
    finally:
        server.stop()


def condition_of(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    [found] = [c for c in obj["status"]["conditions"] if c["type"] == type_]
    return dict(found)


def test_a_connection_is_healthy_while_its_server_answers(
    operator: Any, given: Given, namespace: str
) -> None:
    # Given an operator that checks Connections every second (the session's checks every 300 s)
    for proc in operator.operators:
        operator.kill(proc)
    checking = operator.start_operator(DIRIGENT_OPERATOR_HEALTH_CHECK_SECONDS="1")
    try:
        with loopback() as server:
            # And an http Connection to a real server on loopback, its token in a Secret
            conn = {
                "apiVersion": API,
                "kind": "Connection",
                "metadata": {"name": "status-api"},
                "spec": {
                    "type": "http",
                    "settings": {"url": server.url},
                    "secrets": {"token": {"name": "status-credentials", "key": "token"}},
                },
            }
            given.objects(secret("status-credentials", token="e2e-token")).when.applied()
            then = ready(given.objects(conn).when.applied().then)
            # Then its check reaches the server, with the sealed token opened, and it is Healthy
            then.condition("Healthy", "True", timeout=30)
            healthy = condition_of(then.get(), "Healthy")
            assert healthy["reason"] == "Reachable", healthy
            assert f"GET {server.url} answered 200" == healthy["message"]
            assert "Bearer e2e-token" in server.seen
            assert then.get()["status"]["lastCheck"]["healthy"] is True

            # When the server stops, Then the next check makes it Healthy=False, saying why
            server.stop()
            then.condition("Healthy", "False", timeout=30)
            unhealthy = condition_of(then.get(), "Healthy")
            assert unhealthy["reason"] == "Unreachable", unhealthy
            assert f"{server.url} is unreachable" in unhealthy["message"]
            assert unhealthy["lastTransitionTime"] >= healthy["lastTransitionTime"]
            assert then.get()["status"]["lastCheck"]["healthy"] is False
            # And Ready still says the engine holds the Connection: health is its own condition
            assert condition_of(then.get(), "Ready")["status"] == "True"
    finally:
        operator.kill(checking)  # later tests get the session's kind of operator back


# --- Crashes and takeover ------------------------------------------------------------------


def test_sigkill_in_the_middle_converges_after_restart(
    operator: Any, given: Given, kubectl: Kubectl, namespace: str, engine_client: EngineClient
) -> None:
    many = [
        pipeline(f"p{i:02d}", {"a": {"block": "core.echo", "config": {"value": i}}})
        for i in range(40)
    ]
    then = given.objects(*many).when.applied().then
    # When the operator is SIGKILLed while it works through them
    then.of("Pipeline", "p00").condition("Ready", "True", timeout=30)
    for proc in operator.operators:
        operator.kill(proc)
    statuses = kubectl.json("get", "pipelines", "-n", namespace)["items"]
    unfinished = [p for p in statuses if dig(p, "status.engineVersion") != 1]
    # Then a new operator brings every one to Ready, each exactly at version 1
    operator.start_operator()
    for ref in then.refs:
        ready(then.of(ref.kind, ref.name), timeout=60).field("status.engineVersion", equals=1)
    for ref in then.refs:
        assert engine_client.pipeline(namespace, ref.name).version == 1
    print(f"{len(unfinished)} of {len(many)} were unfinished when the operator was killed")


def test_a_standby_operator_takes_over_when_the_leader_dies(
    operator: Any, given: Given, kubectl: Kubectl
) -> None:
    (leader,) = [p for p in operator.operators if p.running()]
    standby = operator.start_operator(wait=False)
    try:
        wait_until(
            lambda: "standing by" in standby.log.read_text(errors="replace"),
            what="the second operator standing by",
            timeout=30,
            process=standby,
        )
        # A standby answers its probes (a real kubelet would kill one that does not)
        ready_url = f"http://127.0.0.1:{operator.metrics_ports[standby.name]}/readyz"
        with urllib.request.urlopen(ready_url, timeout=5) as resp:
            assert json.loads(resp.read()) == {"role": "standby"}
        operator.kill(leader)
        operator.wait_leading(standby)
        with urllib.request.urlopen(ready_url, timeout=5) as resp:
            assert json.loads(resp.read()) == {"role": "leader", "feedback": "running"}

        then = (
            given.objects(pipeline("after-takeover", {"a": {"block": "core.noop"}}))
            .when.applied()
            .then
        )
        ready(then).field("status.engineVersion", equals=1)
        lease = kubectl.json("get", "lease", "dirigent-operator", "-n", "default")
        assert lease["spec"]["holderIdentity"] == standby.name
    except BaseException:
        for proc in operator.operators:  # leave no second leader candidate to later tests
            operator.kill(proc)
        raise


def test_metrics_count_reconciles_by_kind_and_result(operator: Any, given: Given) -> None:
    ready(given.objects(pipeline("counted", {"a": {"block": "core.noop"}})).when.applied().then)
    (live,) = [p for p in operator.operators if p.running()]
    port = operator.metrics_ports[live.name]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    assert 'dirigent_operator_reconciles_total{kind="Pipeline",result="ok"}' in text
    assert 'dirigent_operator_reconcile_duration_seconds_bucket{kind="Pipeline"' in text
    assert 'dirigent_operator_resources{kind="Pipeline",ready="True"}' in text


# --- Schedules and Webhooks ----------------------------------------------------------------


def webhook(name: str, target: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Webhook",
        "metadata": {"name": name},
        "spec": {"pipeline": target},
    }


def test_a_webhook_waits_for_its_pipeline_and_gets_a_token_secret(
    operator: Any, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    hook = given.objects(webhook("hook", "later")).when.applied().then
    hook.condition("Ready", "False").field("status.conditions[0].reason", equals="PipelineNotFound")

    ready(given.objects(pipeline("later", {"a": {"block": "core.noop"}})).when.applied().then)

    hook.field("status.conditions[0].reason", matches=lambda r: r != "PipelineNotFound")
    token = kubectl.json("get", "secret", "hook-token", "-n", namespace)
    owner = token["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "Webhook" and owner["name"] == "hook"
    assert token["data"]["token"]
    assert hook.get()["status"]["tokenSecret"] == "hook-token"


def test_every_trigger_example_is_ready(operator: Any, given: Given) -> None:
    # interval-schedule.yaml names the pipeline of linear.yaml, as its comment says.
    ready(given.manifest(REPO_ROOT / "examples" / "linear.yaml").when.applied().then)
    for path in EXAMPLES:
        if {d["kind"] for d in objects_in([path])} & TRIGGER_KINDS:
            then = given.manifest(path).when.applied().then
            for ref in then.refs:
                ready(then.of(ref.kind, ref.name), timeout=20)


def test_rotating_a_webhook_token(
    operator: Any, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    ready(given.objects(pipeline("target", {"a": {"block": "core.noop"}})).when.applied().then)
    hook = ready(given.objects(webhook("rotating", "target")).when.applied().then, timeout=20)
    before = kubectl.json("get", "secret", "rotating-token", "-n", namespace)["data"]["token"]

    kubectl.run("annotate", "webhook", "rotating", "-n", namespace, "dirigent.dev/rotate-token=now")

    hook.eventually(
        lambda o: "dirigent.dev/rotate-token" not in (o["metadata"].get("annotations") or {}),
        "the rotate annotation cleared",
        timeout=30,
    )
    after = kubectl.json("get", "secret", "rotating-token", "-n", namespace)["data"]["token"]
    assert after != before
    ready(hook)


# --- Secrets the operator reads and writes (issue 28, point 7) ------------------------------


def test_a_token_secret_it_does_not_own_is_never_adopted(
    operator: Any, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    # Given a Secret named like a Webhook's token Secret, made by someone else
    given.objects(secret("squatter-token", token="theirs", other="kept")).when.applied()
    ready(given.objects(pipeline("owned", {"a": {"block": "core.noop"}})).when.applied().then)
    # When a Webhook of that name is applied, it is not Ready and says why
    hook = given.objects(webhook("squatter", "owned")).when.applied().then
    hook.condition("Ready", "False").field(
        "status.conditions[0].message",
        matches=lambda m: "Secret squatter-token" in m and "not owned by this Webhook" in m,
    )
    # And the Secret is untouched: no owner taken, no value overwritten
    found = kubectl.json("get", "secret", "squatter-token", "-n", namespace)
    assert not found["metadata"].get("ownerReferences")
    assert found["data"] == {"token": "dGhlaXJz", "other": "a2VwdA=="}


def test_a_binary_key_beside_the_one_read_is_harmless_and_a_binary_key_read_is_named(
    operator: Any, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    binary = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "mixed"},
        "data": {"token": "dGV4dA==", "blob": "//79AA=="},  # "text", and bytes ff fe fd 00
    }
    given.objects(binary).when.applied()

    def conn(name: str, key: str) -> dict[str, Any]:
        return {
            "apiVersion": API,
            "kind": "Connection",
            "metadata": {"name": name},
            "spec": {
                "type": "http",
                "settings": {"url": "https://example.invalid"},
                "secrets": {"token": {"name": "mixed", "key": key}},
            },
        }

    ready(given.objects(conn("text-key", "token")).when.applied().then)
    given.objects(conn("blob-key", "blob")).when.applied().then.condition("Ready", "False").field(
        "status.conditions[0].message", matches=lambda m: "key blob is not UTF-8 text" in m
    )


def test_a_changed_hmac_secret_is_used_for_the_next_delivery(
    operator: Any, given: Given, kubectl: Kubectl, namespace: str
) -> None:
    # The HMAC Secret is watched like a Connection's: the Webhook re-syncs when it changes.
    given.objects(secret("signing", hmac="first-key")).when.applied()
    ready(given.objects(pipeline("signed", {"a": {"block": "core.noop"}})).when.applied().then)
    hook = webhook("signed-hook", "signed")
    hook["spec"]["hmacSecretRef"] = {"name": "signing", "key": "hmac"}
    then = ready(given.objects(hook).when.applied().then, timeout=20)
    synced = then.get()["status"]["conditions"][0]["lastTransitionTime"]
    remove = '[{"op": "remove", "path": "/data/hmac"}]'
    kubectl.run("patch", "secret", "signing", "-n", namespace, "--type=json", "-p", remove)
    # The key is gone: the Webhook re-syncs, is not Ready, and says why
    then.condition("Ready", "False").field(
        "status.conditions[0].message", matches=lambda m: "has no key hmac" in m
    )
    given.objects(secret("signing", hmac="second-key")).when.applied()
    ready(then, timeout=20)
    assert then.get()["status"]["conditions"][0]["lastTransitionTime"] >= synced
