"""Specs default their group from the id; results validate progress and stay immutable."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dirigent.sdk import (
    Duration,
    ErrorClass,
    NotYet,
    OperatorSpec,
    ProbeResult,
    ProbeStatus,
    RemoteHandle,
    SensorSpec,
)


def test_group_defaults_to_the_first_half_of_the_id() -> None:
    assert OperatorSpec(id="storage.copy").group == "storage"
    assert SensorSpec(id="acme.orders.ready").group == "acme"
    assert OperatorSpec(id="docker.run", group="execute").group == "execute"
    assert OperatorSpec.model_validate({"id": "http.request", "group": None}).group == "http"


def test_spec_defaults() -> None:
    op = OperatorSpec(id="http.request")
    assert (op.idempotent, op.local_execution, op.default_poll) == (
        False,
        False,
        Duration.parse("10s"),
    )
    sensor = SensorSpec(id="http.ready", default_poll="5s")
    assert sensor.default_poll == Duration(5000)
    assert sensor.default_deadline == Duration.parse("1d")
    assert sensor.model_dump(mode="json")["default_poll"] == "5s"


@pytest.mark.parametrize("block_id", ["http", "Http.request", "http.Request", "http-x.run", ""])
def test_spec_refuses_bad_ids(block_id: str) -> None:
    with pytest.raises(ValidationError, match="block id"):
        OperatorSpec(id=block_id)


def test_spec_refuses_bad_groups_and_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        OperatorSpec(id="a.b", group="Bad Group")
    with pytest.raises(ValidationError):
        OperatorSpec(id="a.b", default_deadline="1h")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        SensorSpec(id="a.b", idempotent=True)  # type: ignore[call-arg]


def test_spec_aliases_and_immutability() -> None:
    spec = OperatorSpec(id="http.request", deprecated_aliases=("http.call",))
    assert spec.deprecated_aliases == ("http.call",)
    with pytest.raises(ValidationError):
        spec.id = "x.y"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        OperatorSpec(id="http.request", deprecated_aliases=("bad",))


@pytest.mark.parametrize("progress", [-0.01, 1.01, float("nan"), float("inf")])
def test_progress_bounds(progress: float) -> None:
    with pytest.raises(ValidationError):
        ProbeResult(status=ProbeStatus.RUNNING, progress=progress)
    with pytest.raises(ValidationError):
        NotYet(progress=progress)


@pytest.mark.parametrize("progress", [0.0, 0.5, 1.0, None])
def test_progress_in_bounds(progress: float | None) -> None:
    assert ProbeResult(status=ProbeStatus.RUNNING, progress=progress).progress == progress
    assert NotYet(progress=progress).progress == progress


def test_probe_result_constructors() -> None:
    assert ProbeResult.running(progress=0.2).status is ProbeStatus.RUNNING
    done = ProbeResult.succeeded("ok")
    assert (done.status, done.progress) == (ProbeStatus.SUCCEEDED, 1.0)
    failed = ProbeResult.failed("exit 1", error_class=ErrorClass.REJECTED)
    assert (failed.status, failed.error_class) == (ProbeStatus.FAILED, ErrorClass.REJECTED)
    assert ProbeResult.gone().status is ProbeStatus.GONE
    assert ProbeResult.model_validate({"status": "gone"}).status is ProbeStatus.GONE
    assert [s.value for s in ProbeStatus] == ["running", "succeeded", "failed", "gone"]


def test_not_yet_cursor_is_json() -> None:
    not_yet = NotYet(message="waiting", cursor={"offset": 10, "ids": ["a"]})
    assert NotYet.model_validate_json(not_yet.model_dump_json()) == not_yet
    with pytest.raises(ValidationError):
        NotYet(cursor={"x": object()})


def test_remote_handle() -> None:
    handle = RemoteHandle(block_id="docker.run", ref="job-1", meta={"ns": "a"})
    assert RemoteHandle.model_validate_json(handle.model_dump_json()) == handle
    assert RemoteHandle(block_id="docker.run", ref="x").meta == {}
    with pytest.raises(ValidationError):
        RemoteHandle(block_id="docker.run", ref="")
    with pytest.raises(ValidationError):
        RemoteHandle(block_id="docker", ref="x")
    with pytest.raises(ValidationError):
        handle.ref = "other"  # type: ignore[misc]
