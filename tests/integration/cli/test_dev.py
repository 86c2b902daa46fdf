"""``dirigent dev DIR`` as a script drives it: a real subprocess on a real port, its NDJSON
records read line by line, the folder edited underneath it."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.dev import EXAMPLES, Dev, Record
from tests.support.servers import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

SECRET = """apiVersion: v1
kind: Secret
metadata: {name: modelling-api}
stringData: {token: s3cret}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    here = tmp_path / "manifests"
    here.mkdir()
    for name in ("linear.yaml", "fan-out.yaml", "connection.yaml"):
        shutil.copy(EXAMPLES / name, here / name)
    (here / "secret.yaml").write_text(SECRET)
    return here


@pytest.fixture
def dev(folder: Path, state: Path) -> Iterator[Dev]:
    running = Dev(folder, state, free_port(), "dev-token-0123456789")
    yield running
    running.stop()


def applied(name: str, action: str) -> Callable[[Record], bool]:
    return lambda r: r["kind"] == "applied" and r["name"] == name and r["action"] == action


def test_dev_applies_the_folder_and_keeps_in_step_with_it(dev: Dev, folder: Path) -> None:
    ready = dev.expect(lambda r: r["kind"] == "ready")
    assert ready["token"] == "dev-token-0123456789"
    assert ready["export"].startswith("export DIRIGENT_URL=http://127.0.0.1:")
    # The REST API answers on the printed URL, with the printed token only.
    listing = httpx.get(
        f"{ready['url']}/api/v1/namespaces/default/pipelines",
        headers={"Authorization": "Bearer dev-token-0123456789"},
        timeout=10,
    )
    assert listing.status_code == 200, listing.text
    assert {p["name"] for p in listing.json()["items"]} >= {"linear", "fan-out"}
    refused = httpx.get(f"{ready['url']}/api/v1/namespaces/default/pipelines", timeout=10)
    assert refused.status_code == 401
    assert refused.headers["content-type"].startswith("application/problem+json")
    kinds = {(r["manifest"], r["name"]) for r in dev.seen if r["kind"] == "applied"}
    # The Secret document resolved the Connection's secretKeyRef.
    assert kinds == {
        ("Pipeline", "linear"),
        ("Pipeline", "fan-out"),
        ("Pipeline", "ingest-regions"),
        ("Connection", "modelling-api"),
    }

    # An edit is re-applied as a new version.
    text = (folder / "linear.yaml").read_text()
    (folder / "linear.yaml").write_text(text.replace("tags: [example]", "tags: [example, edited]"))
    assert dev.expect(applied("linear", "updated"))["version"] == 2

    # A broken edit is reported with its location; the last good version stays (no deactivation).
    (folder / "fan-out.yaml").write_text(
        (EXAMPLES / "fan-out.yaml").read_text().replace("block: core.echo", "block: core.nope", 1)
    )
    kept = dev.expect(lambda r: r["kind"] == "kept")
    assert (kept["manifest"], kept["name"]) == ("Pipeline", "fan-out")
    problem = dev.expect(lambda r: r["kind"] == "problem")
    assert problem["file"].endswith("fan-out.yaml") and problem["location"].startswith("spec.steps")
    (folder / "fan-out.yaml").write_text((EXAMPLES / "fan-out.yaml").read_text())
    dev.expect(
        lambda r: r["kind"] == "file" and r["file"].endswith("fan-out.yaml") and r["status"] == "ok"
    )
    assert not any(r["kind"] == "deactivated" for r in dev.seen)

    # A removed file deactivates what it held.
    (folder / "linear.yaml").unlink()
    gone = dev.expect(lambda r: r["kind"] == "deactivated")
    assert (gone["manifest"], gone["name"]) == ("Pipeline", "linear")

    # A changed Secret re-seals the Connection that reads it.
    (folder / "secret.yaml").write_text(SECRET.replace("s3cret", "rotated"))
    dev.expect(applied("modelling-api", "updated"))

    assert dev.stop() == 0


def test_the_api_answers_only_once_the_folder_is_in_force(folder: Path, state: Path) -> None:
    # Enough pipelines that applying the folder takes a while.
    many = {f"p{i:03}" for i in range(150)}
    for name in many:
        (folder / f"{name}.yaml").write_text(
            (EXAMPLES / "linear.yaml").read_text().replace("name: linear", f"name: {name}")
        )
    port = free_port()
    dev = Dev(folder, state, port, "dev-token-0123456789")
    try:
        # A script waiting for the API to answer, then listing at once ...
        def ready() -> bool:
            assert dev.process.poll() is None, "".join(dev.stderr)
            try:
                return httpx.get(f"http://127.0.0.1:{port}/health/ready", timeout=1).is_success
            except httpx.TransportError:
                return False

        wait_until(ready, timeout=120, every=0.02, what="the API answering /health/ready")
        listing = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/namespaces/default/pipelines",
            params={"limit": 500},
            headers={"Authorization": "Bearer dev-token-0123456789"},
            timeout=10,
        )
        # ... finds every pipeline of the folder already applied.
        names = {p["name"] for p in listing.json()["items"]}
        assert names == {"linear", "fan-out", "ingest-regions", *many}
    finally:
        assert dev.stop() == 0


def test_a_connection_without_its_secret_is_a_located_problem(folder: Path, state: Path) -> None:
    (folder / "secret.yaml").unlink()
    dev = Dev(folder, state, free_port(), "t" * 16)
    try:
        dev.expect(lambda r: r["kind"] == "ready")
        problems = [r for r in dev.seen if r["kind"] == "problem"]
        # The Pipeline requiring the refused Connection is refused with it, located.
        assert [(p["code"], p["location"]) for p in problems] == [
            ("secret.not_found", "spec.secrets.token"),
            ("pipeline.connection.unknown", "spec.requires.connections[0]"),
        ]
        # Adding the Secret later resolves both.
        (folder / "secret.yaml").write_text(SECRET)
        dev.expect(applied("modelling-api", "created"))
        dev.expect(applied("ingest-regions", "created"))
    finally:
        assert dev.stop() == 0


def test_state_is_kept_between_starts_and_wiped_on_request(folder: Path, state: Path) -> None:
    first = Dev(folder, state, free_port(), "t" * 16)
    first.expect(lambda r: r["kind"] == "ready")
    assert first.stop() == 0
    assert (state / "pgdata" / "PG_VERSION").exists()
    (state / "profiles.yaml").write_text("mine: {}\n")

    second = Dev(folder, state, free_port(), "t" * 16)
    second.expect(lambda r: r["kind"] == "ready")
    assert second.stop() == 0
    # The same database: nothing was created again.
    assert not any(r["kind"] == "applied" for r in second.seen)

    third = Dev(folder, state, free_port(), "t" * 16, "--wipe-state")
    third.expect(lambda r: r["kind"] == "ready")
    assert third.stop() == 0
    # A fresh database: everything created again; what dev did not create is left alone.
    assert any(r["kind"] == "applied" and r["action"] == "created" for r in third.seen)
    assert (state / "profiles.yaml").read_text() == "mine: {}\n"


def test_a_file_removed_while_dev_was_stopped_is_deactivated_at_the_next_start(
    folder: Path, state: Path
) -> None:
    first = Dev(folder, state, free_port(), "t" * 16)
    first.expect(lambda r: r["kind"] == "ready")
    assert first.stop() == 0

    (folder / "linear.yaml").unlink()
    broken = (EXAMPLES / "fan-out.yaml").read_text().replace("block: core.echo", "block: core.x", 1)
    (folder / "fan-out.yaml").write_text(broken)
    second = Dev(folder, state, free_port(), "t" * 16)
    try:
        ready = second.expect(lambda r: r["kind"] == "ready")
        gone = [(r["manifest"], r["name"]) for r in second.seen if r["kind"] == "deactivated"]
        # The removed file's pipeline is deactivated; the broken file keeps its last good one.
        assert gone == [("Pipeline", "linear")]
        listing = httpx.get(
            f"{ready['url']}/api/v1/namespaces/default/pipelines",
            headers={"Authorization": f"Bearer {'t' * 16}"},
            timeout=10,
        ).json()["items"]
        active = {p["name"]: p["active"] for p in listing}
        assert active["linear"] is False and active["fan-out"] is True
    finally:
        assert second.stop() == 0

    # Restarting again with nothing changed deactivates nothing more.
    third = Dev(folder, state, free_port(), "t" * 16)
    third.expect(lambda r: r["kind"] == "ready")
    assert third.stop() == 0
    assert not any(r["kind"] == "deactivated" for r in third.seen)
