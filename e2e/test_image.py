"""The container image: built by `make image` (podman, a base made from Debian packages),
then run the way a cluster runs it.

Given the image, when it runs `dirigent --version`, `dirigent migrate` against a real
PostgreSQL on the host's loopback, and `dirigent run --local examples/linear.yaml` (an
embedded PostgreSQL inside the container), then each does its job as the non-root user.
No cluster is needed; the test is e2e because it builds and runs real containers.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dirigent.engine import EmbeddedPostgres, Engine
from e2e.harness.binaries import REPO_ROOT
from tests.support.postgres import create_database, schema_revision

# `machine`: podman's image store is one per machine (test_chart_real_node builds there too).
pytestmark = [pytest.mark.e2e, pytest.mark.machine]

BUILD_TIMEOUT = 1800  # a cold build makes the Debian base first (about 2 minutes here)


def _podman_env() -> dict[str, str]:
    """The environment hack/image/podman-env.sh sets up (runc, ulimits, image store)."""
    out = subprocess.run(
        ["bash", "-c", f"source {REPO_ROOT}/hack/image/podman-env.sh && env -0"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    return dict(line.split("=", 1) for line in out.split("\0") if "=" in line)


@pytest.fixture(scope="module")
def image() -> str:
    """`make image`; its last stdout line names the image."""
    assert shutil.which("podman"), (
        "podman is missing: apt-get install podman buildah runc mmdebstrap"
    )
    result = subprocess.run(
        ["make", "-s", "image"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip().splitlines()[-1]


def podman(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *args],
        env={**os.environ, **_podman_env()},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def postgres() -> Iterator[EmbeddedPostgres]:
    base = Path(tempfile.mkdtemp(prefix="dirigent-image-pg-"))
    try:
        with EmbeddedPostgres(base / "data") as server:
            yield server
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_image_runs_as_a_non_root_user(image: str) -> None:
    inspect = podman("image", "inspect", image)
    assert inspect.returncode == 0, inspect.stderr
    config = json.loads(inspect.stdout)[0]["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["dirigent"]
    whoami = podman("run", "--rm", "--network", "none", "--entrypoint", "id", image, "-u")
    assert whoami.stdout.strip() == "10001", whoami.stderr


def test_version(image: str) -> None:
    result = podman("run", "--rm", "--network", "none", image, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "dirigent 0.1.0"


def test_migrate_against_postgres_on_loopback(image: str, postgres: EmbeddedPostgres) -> None:
    url = asyncio.run(create_database(postgres, "image_migrate"))
    assert asyncio.run(schema_revision(url)) is None

    first = podman(
        "run", "--rm", "--network", "host", "-e", f"DIRIGENT_DATABASE_URL={url}", image, "migrate"
    )
    assert first.returncode == 0, first.stderr
    assert f"-> {Engine.schema_head()}" in first.stdout
    assert asyncio.run(schema_revision(url)) == Engine.schema_head()

    again = podman(
        "run", "--rm", "--network", "host", "-e", f"DIRIGENT_DATABASE_URL={url}", image, "migrate"
    )
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout


def test_migrate_without_a_database_url_says_so(image: str) -> None:
    result = podman("run", "--rm", "--network", "none", image, "migrate")
    assert result.returncode == 2
    assert "DIRIGENT_DATABASE_URL is not set" in result.stderr


def test_run_local_inside_the_container(image: str) -> None:
    examples = REPO_ROOT / "examples"
    result = podman(
        "run", "--rm", "--network", "none", "-v", f"{examples}:/examples:ro",
        image, "run", "--local", "/examples/linear.yaml",
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout + result.stderr
    for step in ("extract", "transform", "load"):
        assert step in out
    assert "succeeded" in out


def test_a_failing_pipeline_fails_the_container(image: str) -> None:
    examples = REPO_ROOT / "examples"
    result = podman(
        "run", "--rm", "--network", "none", "-v", f"{examples}:/examples:ro",
        image, "run", "--local", "/examples/error-handler.yaml",
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
