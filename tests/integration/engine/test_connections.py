"""Connections: secrets sealed at rest, opened on the worker path for the step that names one.

Each test opens its own engines through the door with a secret key of their own: the
Connection is applied (and sealed) by one, and the worker that opens it is built by the same
engine, or by another one holding a different key.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dirigent.engine import ProblemsError
from tests.support.harness import Harness, harness

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


@contextlib.asynccontextmanager
async def keyed(h: Harness, tmp_path: Path) -> AsyncIterator[Harness]:
    """Another engine on the test's database, holding a fresh secret key of its own."""
    key = os.urandom(32).hex()
    async with harness(h.url, tmp_path / "artifacts", secret_key=key) as found:
        yield found


@pytest.fixture
async def k(h: Harness, tmp_path: Path) -> AsyncIterator[Harness]:
    """An engine with a secret key, on the database of ``h``: it seals what it applies, and
    the workers it builds open what it sealed."""
    async with keyed(h, tmp_path) as found:
        yield found


async def apply_connection(k: Harness, values: dict[str, str], text: str = CONNECTION) -> None:
    await k.apply(text, secret_values=values)


async def test_a_step_opens_its_connection_and_the_secret_is_sealed_at_rest(k: Harness) -> None:
    await apply_connection(k, {"token": "s3cr3t"})
    stored = await k.fetchval("SELECT secrets->>'token' FROM connections WHERE name = 'api'")
    assert "s3cr3t" not in stored and b"s3cr3t" not in base64.b64decode(stored)
    await k.apply(PIPELINE)
    run = await k.run("uses")
    async with k.workers(1):
        assert await k.until_finished(run.run_id) == "succeeded"
    [call] = await k.attempts(run.run_id)
    assert call["output"] == {
        "url": "https://api.example.test",
        "token_sha256": hashlib.sha256(b"s3cr3t").hexdigest(),
    }


async def test_a_worker_without_the_key_refuses_the_step(k: Harness, tmp_path: Path) -> None:
    await apply_connection(k, {"token": "s3cr3t"})
    await k.apply(PIPELINE)
    run = await k.run("uses")
    async with keyed(k, tmp_path) as other, other.workers(1):  # a different key
        assert await k.until_finished(run.run_id) == "failed"
    [call] = await k.attempts(run.run_id)
    assert (call["error_class"], call["error_code"]) == ("rejected", "engine.connection.unopenable")


async def test_a_pipeline_naming_a_missing_connection_is_refused_at_apply(h: Harness) -> None:
    with pytest.raises(ProblemsError) as refused:
        await h.apply(PIPELINE)
    assert [(p.code, p.location) for p in refused.value.problems] == [
        ("pipeline.connection.unknown", "spec.steps.call.config.connection")
    ]


async def test_an_unchanged_connection_writes_nothing_and_a_changed_secret_resyncs(
    k: Harness,
) -> None:
    await apply_connection(k, {"token": "one"})
    first = await k.fetchval("SELECT xmin::text FROM connections WHERE name = 'api'")
    await apply_connection(k, {"token": "one"})
    assert await k.fetchval("SELECT xmin::text FROM connections WHERE name = 'api'") == first
    await apply_connection(k, {"token": "two"})
    assert await k.fetchval("SELECT xmin::text FROM connections WHERE name = 'api'") != first


SECOND = CONNECTION.replace("{name: api}", "{name: other}")


async def test_a_connection_in_a_field_the_block_does_not_declare_is_never_opened(
    k: Harness,
) -> None:
    await apply_connection(k, {"token": "s3cr3t"})
    await apply_connection(k, {"token": "other"}, SECOND)
    await k.apply(PIPELINE.replace("{connection: api}", "{connection: api, peek: other}"))
    run = await k.run("uses")
    async with k.workers(1):
        assert await k.until_finished(run.run_id) == "failed"
    [call] = await k.attempts(run.run_id)
    assert call["error_code"] == "engine.connection.unavailable"
    assert "'other'" in call["error_message"]


async def test_a_connection_of_the_wrong_kind_is_refused_at_apply(k: Harness) -> None:
    await apply_connection(k, {"token": "s3cr3t"})
    await k.fetchval("UPDATE connections SET type = 'webhook' WHERE name = 'api' RETURNING 1")
    with pytest.raises(ProblemsError) as refused:
        await k.apply(PIPELINE)
    assert [(p.code, p.location) for p in refused.value.problems] == [
        ("pipeline.connection.kind", "spec.steps.call.config.connection")
    ]


async def test_a_connection_whose_kind_changed_after_apply_is_not_opened(k: Harness) -> None:
    await apply_connection(k, {"token": "s3cr3t"})
    await k.apply(PIPELINE)
    # The Connection is re-kinded behind the pipeline's back: the worker checks again.
    await k.fetchval("UPDATE connections SET type = 'webhook' WHERE name = 'api' RETURNING 1")
    run = await k.run("uses")
    async with k.workers(1):
        assert await k.until_finished(run.run_id) == "failed"
    [call] = await k.attempts(run.run_id)
    assert (call["error_class"], call["error_code"]) == ("rejected", "engine.connection.unopenable")
    assert "of kind 'webhook', not http" in call["error_message"]


PLANTED = "planted-secret-0042-xyzzy"


@pytest.mark.parametrize("how", ["exception", "failure", "log", "misfit"])
async def test_a_planted_secret_appears_in_no_error_log_or_view(k: Harness, how: str) -> None:
    """Each way a block can quote its connection's secret: the attempt's error and params, the
    run log, the failure views the API and CLI read — the secret is in none of them."""
    await apply_connection(k, {"token": PLANTED})
    await k.apply(f"""
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {{name: leaky}}
spec:
  steps:
    call: {{block: testing.leaks, config: {{connection: api, how: {how}}}}}
""")
    run = await k.run("leaky")
    async with k.workers(1):
        assert await k.until_finished(run.run_id) == "failed"
    attempts = await k.attempts(run.run_id)
    logs = await k.logs(run.run_id)
    detail = await k.engine.runs.get("default", run.run_id)
    failures = await k.engine.runs.failures("default", run.run_id)
    rows = await k.fetchval(
        "SELECT string_agg(t::text, ' ') FROM (SELECT * FROM step_attempts) t"
    ) + await k.fetchval("SELECT string_agg(t::text, ' ') FROM (SELECT * FROM log_entries) t")
    everything = repr((attempts, logs, detail, failures, rows))
    assert PLANTED not in everything
    assert "[redacted]" in everything or how == "misfit"  # the line is there, the value is not
    [call] = attempts
    assert call["error_code"] in (
        "testing.leaks.failed",
        "engine.block.error",
        "engine.connection.unavailable",
    )


async def test_a_connection_its_kind_does_not_accept_is_refused_at_apply(k: Harness) -> None:
    misfit = CONNECTION.replace('{url: "https://api.example.test"}', "{port: 1}")
    with pytest.raises(ProblemsError) as refused:
        await apply_connection(k, {"token": PLANTED}, misfit)
    problems = refused.value.problems
    assert {p.code for p in problems} == {"connection.settings.invalid"}
    assert any(p.location.startswith("spec.settings") for p in problems), problems
    assert PLANTED not in repr(problems)
    assert await k.fetchval("SELECT count(*) FROM connections") == 0
