"""Connections: secrets sealed at rest, opened on the worker path for the step that names one."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest

from dirigent.engine.door.applying import apply_manifest
from dirigent.engine.infrastructure.crypto import SecretSealer
from dirigent.engine.shapes.manifests.loading import parse_manifest, read_text
from dirigent.engine.shapes.problems import ProblemsError
from dirigent.engine.store.pool import in_transaction
from tests.integration.engine.harness import Harness

CONNECTION = """
apiVersion: dirigent.dev/v1alpha1
kind: Connection
metadata: {name: api}
spec:
  type: http
  settings: {url: "https://api.example.test"}
  secrets:
    token: {name: api-credentials, key: token}
"""
PIPELINE = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: uses}
spec:
  steps:
    call: {block: testing.uses_connection, config: {connection: api}}
"""


async def apply_connection(h: Harness, sealer: SecretSealer | None, values: dict[str, str]) -> None:
    docs, _ = read_text(CONNECTION)
    manifest, problems = parse_manifest(docs[0].data)
    assert manifest is not None, problems
    await in_transaction(
        h.pool,
        lambda c: apply_manifest(
            c, manifest, namespace="default", catalog=h.catalog, sealer=sealer, secret_values=values
        ),
    )


async def test_a_step_opens_its_connection_and_the_secret_is_sealed_at_rest(h: Harness) -> None:
    sealer = SecretSealer(os.urandom(32))
    await apply_connection(h, sealer, {"token": "s3cr3t"})
    stored = await h.fetchval("SELECT secrets->>'token' FROM connections WHERE name = 'api'")
    assert "s3cr3t" not in stored and b"s3cr3t" not in base64.b64decode(stored)
    await h.apply(PIPELINE)
    run = await h.run("uses")
    async with h.workers(1, sealer=sealer):
        assert await h.until_finished(run.run_id) == "succeeded"
    [call] = await h.attempts(run.run_id)
    assert call["output"] == {
        "url": "https://api.example.test",
        "token_sha256": hashlib.sha256(b"s3cr3t").hexdigest(),
    }


async def test_a_worker_without_the_key_refuses_the_step(h: Harness) -> None:
    await apply_connection(h, SecretSealer(os.urandom(32)), {"token": "s3cr3t"})
    await h.apply(PIPELINE)
    run = await h.run("uses")
    async with h.workers(1, sealer=SecretSealer(os.urandom(32))):  # a different key
        assert await h.until_finished(run.run_id) == "failed"
    [call] = await h.attempts(run.run_id)
    assert (call["error_class"], call["error_code"]) == ("rejected", "engine.connection.unopenable")


async def test_a_pipeline_naming_a_missing_connection_is_refused_at_apply(h: Harness) -> None:
    with pytest.raises(ProblemsError) as refused:
        await h.apply(PIPELINE)
    assert [(p.code, p.location) for p in refused.value.problems] == [
        ("pipeline.connection.unknown", "spec.steps.call.config.connection")
    ]


async def test_an_unchanged_connection_writes_nothing_and_a_changed_secret_resyncs(
    h: Harness,
) -> None:
    sealer = SecretSealer(os.urandom(32))
    await apply_connection(h, sealer, {"token": "one"})
    first = await h.fetchval("SELECT xmin::text FROM connections WHERE name = 'api'")
    await apply_connection(h, sealer, {"token": "one"})
    assert await h.fetchval("SELECT xmin::text FROM connections WHERE name = 'api'") == first
    await apply_connection(h, sealer, {"token": "two"})
    assert await h.fetchval("SELECT xmin::text FROM connections WHERE name = 'api'") != first


SECOND = CONNECTION.replace("{name: api}", "{name: other}")


async def test_a_connection_in_a_field_the_block_does_not_declare_is_never_opened(
    h: Harness,
) -> None:
    sealer = SecretSealer(os.urandom(32))
    await apply_connection(h, sealer, {"token": "s3cr3t"})
    docs, _ = read_text(SECOND)
    manifest, _ = parse_manifest(docs[0].data)
    assert manifest is not None
    await in_transaction(
        h.pool,
        lambda c: apply_manifest(
            c,
            manifest,
            namespace="default",
            catalog=h.catalog,
            sealer=sealer,
            secret_values={"token": "other"},
        ),
    )
    await h.apply(PIPELINE.replace("{connection: api}", "{connection: api, peek: other}"))
    run = await h.run("uses")
    async with h.workers(1, sealer=sealer):
        assert await h.until_finished(run.run_id) == "failed"
    [call] = await h.attempts(run.run_id)
    assert call["error_code"] == "engine.connection.unavailable"
    assert "'other'" in call["error_message"]


async def test_a_connection_of_the_wrong_kind_is_refused_at_apply(h: Harness) -> None:
    await apply_connection(h, SecretSealer(os.urandom(32)), {"token": "s3cr3t"})
    await h.fetchval("UPDATE connections SET type = 'webhook' WHERE name = 'api' RETURNING 1")
    with pytest.raises(ProblemsError) as refused:
        await h.apply(PIPELINE)
    assert [(p.code, p.location) for p in refused.value.problems] == [
        ("pipeline.connection.kind", "spec.steps.call.config.connection")
    ]


async def test_a_connection_whose_kind_changed_after_apply_is_not_opened(h: Harness) -> None:
    sealer = SecretSealer(os.urandom(32))
    await apply_connection(h, sealer, {"token": "s3cr3t"})
    await h.apply(PIPELINE)
    # The Connection is re-kinded behind the pipeline's back: the worker checks again.
    await h.fetchval("UPDATE connections SET type = 'webhook' WHERE name = 'api' RETURNING 1")
    run = await h.run("uses")
    async with h.workers(1, sealer=sealer):
        assert await h.until_finished(run.run_id) == "failed"
    [call] = await h.attempts(run.run_id)
    assert (call["error_class"], call["error_code"]) == ("rejected", "engine.connection.unopenable")
    assert "of kind 'webhook', not http" in call["error_message"]


PLANTED = "planted-secret-0042-xyzzy"


@pytest.mark.parametrize("how", ["exception", "failure", "log", "misfit"])
async def test_a_planted_secret_appears_in_no_error_log_or_view(h: Harness, how: str) -> None:
    """Each way a block can quote its connection's secret: the attempt's error and params, the
    run log, the failure views the API and CLI read — the secret is in none of them."""
    sealer = SecretSealer(os.urandom(32))
    await apply_connection(h, sealer, {"token": PLANTED})
    await h.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: leaky}}
spec:
  steps:
    call: {{block: testing.leaks, config: {{connection: api, how: {how}}}}}
""")
    run = await h.run("leaky")
    async with h.workers(1, sealer=sealer):
        assert await h.until_finished(run.run_id) == "failed"
    attempts = await h.attempts(run.run_id)
    logs = await h.logs(run.run_id)
    detail = await h.engine.runs.get("default", run.run_id)
    failures = await h.engine.runs.failures("default", run.run_id)
    rows = await h.fetchval(
        "SELECT string_agg(t::text, ' ') FROM (SELECT * FROM step_attempts) t"
    ) + await h.fetchval("SELECT string_agg(t::text, ' ') FROM (SELECT * FROM log_entries) t")
    everything = repr((attempts, logs, detail, failures, rows))
    assert PLANTED not in everything
    assert "[redacted]" in everything or how == "misfit"  # the line is there, the value is not
    [call] = attempts
    assert call["error_code"] in (
        "testing.leaks.failed",
        "engine.block.error",
        "engine.connection.unavailable",
    )


async def test_a_connection_its_kind_does_not_accept_is_refused_at_apply(h: Harness) -> None:
    docs, _ = read_text(CONNECTION.replace('{url: "https://api.example.test"}', "{port: 1}"))
    manifest, problems = parse_manifest(docs[0].data)
    assert manifest is not None, problems
    sealer = SecretSealer(os.urandom(32))
    with pytest.raises(ProblemsError) as refused:
        await in_transaction(
            h.pool,
            lambda c: apply_manifest(
                c,
                manifest,
                namespace="default",
                catalog=h.catalog,
                sealer=sealer,
                secret_values={"token": PLANTED},
            ),
        )
    problems = refused.value.problems
    assert {p.code for p in problems} == {"connection.settings.invalid"}
    assert any(p.location.startswith("spec.settings") for p in problems), problems
    assert PLANTED not in repr(problems)
    assert await h.fetchval("SELECT count(*) FROM connections") == 0
