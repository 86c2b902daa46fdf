"""The Job a docker.run attempt becomes: its limits come from the step, through the context."""

from __future__ import annotations

import datetime as dt

from dirigent.blocks.kubernetes.jobs import DockerConfig, active_deadline_seconds, job_manifest
from tests.unit.sdk.fakes import make_context


def spec_for(**ctx: object) -> dict[str, object]:
    config = DockerConfig.model_validate({"image": "busybox:1.36"})
    spec: dict[str, object] = job_manifest(config, make_context(**ctx), "ns")["spec"]
    return spec


def test_the_step_timeout_is_the_active_deadline() -> None:
    assert spec_for(timeout=dt.timedelta(minutes=5))["activeDeadlineSeconds"] == 300


def test_a_sooner_step_deadline_wins_and_is_rounded_up() -> None:
    deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=41.5)
    got = active_deadline_seconds(make_context(timeout=dt.timedelta(hours=1), deadline=deadline))
    assert got is not None and 40 <= got <= 42


def test_a_deadline_already_past_still_gives_kubernetes_a_positive_limit() -> None:
    past = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    assert spec_for(deadline=past)["activeDeadlineSeconds"] == 1


def test_no_timeout_and_no_deadline_set_no_active_deadline() -> None:
    assert "activeDeadlineSeconds" not in spec_for()


def test_the_config_has_no_deadline_of_its_own() -> None:
    assert "activeDeadline" not in DockerConfig.model_json_schema(by_alias=True)["properties"]


def test_connection_values_are_referenced_from_the_secret_never_inlined() -> None:
    from dirigent.blocks.kubernetes.jobs import secret_manifest

    config = DockerConfig.model_validate(
        {"image": "busybox:1.36", "connection": "c", "envFromConnection": {"TOKEN": "token"}}
    )
    ctx = make_context()
    body = job_manifest(config, ctx, "ns")
    assert "hunter2" not in str(body)
    [env] = body["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": body["metadata"]["name"], "key": "TOKEN"}
    secret = secret_manifest(config, ctx, "ns", {"token": "hunter2"})
    assert secret is not None and secret["data"] == {"TOKEN": "aHVudGVyMg=="}
