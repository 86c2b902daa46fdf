"""Artifact content through the API from an artifact root on a real S3 server: whole or by
Range, and every failure answered before a byte is promised — a missing object is 404, a
range past the end 416, a store that does not answer a 503 Problem (issue 32, point 3)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import httpx
import pytest

from dirigent.storage.s3.client import open_store
from e2e.harness.processes import free_port
from e2e.harness.s3 import S3Endpoint
from tests.integration.api.test_runs import apply, finish
from tests.support.api import TOKEN, Api, served
from tests.support.s3kit import apply_connection, prefix, settings, use_no_ambient

BIG = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: big}
spec:
  steps:
    say: {block: core.echo, config: {value: "%s"}}
""" % ("0123456789" * 7_000)  # above the 64 KiB kept inline: the output goes to the root
SMALL = (
    BIG.replace("name: big", "name: small").split("say:")[0]
    + "say: {block: core.echo, config: {value: [1, 2, 3]}}\n"
)


@pytest.fixture
async def http(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=api.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=20
    ) as client:
        yield client


def _content(run_id: int, artifact_id: int) -> str:
    return f"/api/v1/namespaces/default/runs/{run_id}/artifacts/{artifact_id}/content"


async def test_an_inline_artifact_answers_ranges_too(api: Api, http: httpx.AsyncClient) -> None:
    await apply(api, SMALL)
    run = await api.client.run("default", "small", {})
    async with api.h.workers(1):
        assert await finish(api, run.run_id) == "succeeded"
    [art] = (await api.client.list_artifacts("default", run.run_id)).items
    assert art.stored == "inline"
    whole = await http.get(_content(run.run_id, art.id))
    assert whole.status_code == 200 and whole.headers["accept-ranges"] == "bytes"
    part = await http.get(_content(run.run_id, art.id), headers={"Range": "bytes=1-4"})
    assert part.status_code == 206 and part.content == whole.content[1:5]
    assert part.headers["content-range"] == f"bytes 1-4/{len(whole.content)}"


async def test_an_artifact_on_s3_downloads_whole_or_by_range_and_fails_clearly(
    db_url: str, s3_server: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_no_ambient(monkeypatch, s3_server)  # only the root's Connection reaches the server
    root = prefix(s3_server) + "artifacts"
    async with served(db_url, root, artifact_connection="dirigent/artifacts") as api:
        await apply_connection(api.h.engine, "dirigent", "artifacts", s3_server)
        await apply(api, BIG)
        run = await api.client.run("default", "big", {})
        async with api.h.workers(1):
            assert await finish(api, run.run_id) == "succeeded"
        [art] = (await api.client.list_artifacts("default", run.run_id)).items
        uri = await api.h.fetchval("SELECT uri FROM artifact_refs WHERE id = $1", art.id)
        assert art.stored == "uri" and uri.startswith(f"{root}/namespaces/default/runs/")
        url = api.url + _content(run.run_id, art.id)
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=20
        ) as http:
            whole = await http.get(url)
            assert whole.status_code == 200
            assert hashlib.sha256(whole.content).hexdigest() == art.digest
            assert whole.headers["content-length"] == str(art.size)
            assert whole.headers["etag"] == f'"{art.digest}"'
            assert whole.headers["accept-ranges"] == "bytes"
            await _ranges(http, url, whole.content)
            async with open_store(settings(s3_server)) as s3:
                await s3.delete(uri)  # removed behind dirigent's back
            gone = await http.get(url)
            assert gone.status_code == 404
            assert gone.json()["code"] == "artifact.content.not_found"
    # The same artifact, read by an API whose root Connection points where nothing answers.
    dead = f"http://127.0.0.1:{free_port()}"
    async with served(db_url, root, artifact_connection="dirigent/artifacts") as api:
        await apply_connection(
            api.h.engine, "dirigent", "artifacts", s3_server, url=dead, max_attempts=1
        )
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=20
        ) as http:
            down = await http.get(api.url + _content(run.run_id, art.id))
    assert down.status_code == 503
    assert down.headers["content-type"] == "application/problem+json"
    assert down.json()["code"] == "storage.unavailable"
    assert dead in down.json()["detail"] and s3_server.secret_key not in down.text


async def _ranges(http: httpx.AsyncClient, url: str, whole: bytes) -> None:
    size = len(whole)
    expected = {
        "bytes=10-19": (whole[10:20], f"bytes 10-19/{size}"),
        "bytes=-5": (whole[-5:], f"bytes {size - 5}-{size - 1}/{size}"),
        f"bytes={size - 3}-": (whole[-3:], f"bytes {size - 3}-{size - 1}/{size}"),
        f"bytes=0-{size * 2}": (whole, f"bytes 0-{size - 1}/{size}"),
    }
    for header, (body, content_range) in expected.items():
        part = await http.get(url, headers={"Range": header})
        assert part.status_code == 206, header
        assert part.content == body, header
        assert part.headers["content-range"] == content_range, header
        assert part.headers["content-length"] == str(len(body)), header
    past = await http.get(url, headers={"Range": f"bytes={size}-"})
    assert past.status_code == 416
    assert past.headers["content-range"] == f"bytes */{size}"
    assert past.json()["code"] == "artifact.range.unsatisfiable"
    for ignored in (
        "bytes=5-2",
        "items=0-1",
        "bytes=0-1,4-5",
    ):  # answered whole, as RFC 9110 allows
        again = await http.get(url, headers={"Range": ignored})
        assert (again.status_code, again.content) == (200, whole), ignored
