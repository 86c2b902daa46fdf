"""docker.run reads a pod's log with a byte limit, never whole.

The e2e control plane has no kubelet (kwok answers no log), so the API server's log endpoint
is played here by a loopback HTTP server speaking its paths, that records what it is asked
and answers with far more than the limit, as a chatty container would: the real
``kubernetes`` client and our ``KubeClient`` talk to it over HTTP. The block is called
itself (a test of docker.run, not of the engine), with the engine's file storage
(``infrastructure.storage``) behind its context for what it stores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from dirigent.blocks.connections import KubernetesConnection
from dirigent.blocks.kubernetes.client import KubeClient
from dirigent.blocks.kubernetes.docker import DockerRunOperator, KubeSettings
from dirigent.blocks.kubernetes.jobs import DockerConfig
from dirigent.engine.infrastructure.storage import FileStorage
from dirigent.sdk import RemoteHandle, Size
from tests.support.servers import Server
from tests.unit.sdk.fakes import make_context

LOG = b"".join(b"line %07d of a chatty container\n" % i for i in range(200_000))  # ~6 MB
POD_NAME = "dirigent-1-10-abcde"
POD: dict[str, Any] = {
    "metadata": {
        "name": POD_NAME,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "ownerReferences": [{"kind": "Job", "name": "dirigent-1-10", "uid": "job-uid"}],
    },
    "status": {
        "phase": "Succeeded",
        "containerStatuses": [
            {"name": "main", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ],
    },
}


@pytest.fixture
async def api(server: Server) -> Server:
    async def pods(request: web.Request) -> web.Response:
        return web.json_response({"kind": "PodList", "items": [POD]})

    async def log(request: web.Request) -> web.StreamResponse:
        # Ignores limitBytes on purpose: the client must keep to the limit itself too.
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        for at in range(0, len(LOG), 1 << 16):
            await response.write(LOG[at : at + (1 << 16)])
        return response

    server.routes["/api/v1/namespaces/ns/pods"] = pods
    server.routes[f"/api/v1/namespaces/ns/pods/{POD_NAME}/log"] = log
    return server


def cluster(api: Server) -> KubernetesConnection:
    return KubernetesConnection.model_validate({"server": api.url, "token": "t"})


async def test_the_client_asks_for_a_limit_and_reads_no_more(api: Server) -> None:
    async with KubeClient.connect(cluster(api)) as kube:
        got = await kube.pod_log("ns", POD_NAME, "main", limit_bytes=5000)
        tail = await kube.pod_log(
            "ns",
            POD_NAME,
            "main",
            limit_bytes=4096,
            tail_lines=10,
        )
    assert got == LOG[:5000]
    assert len(tail) == 4096
    [first, second] = [s["query"] for s in api.seen if s["path"].endswith("/log")]
    assert (first["limitBytes"], first["container"]) == ("5000", "main")
    assert (second["limitBytes"], second["tailLines"]) == ("4096", "10")


async def test_fetch_stores_the_log_up_to_the_installations_limit_and_keeps_a_tail(
    api: Server, tmp_path: Path
) -> None:
    settings = KubeSettings(log_limit=Size(1 << 20))
    block = DockerRunOperator(settings)
    block._clients[""] = await KubeClient.build(cluster(api))  # the worker's own cluster
    storage = FileStorage(tmp_path)
    ctx: Any = make_context(storage=storage, scratch=f"{storage.root_uri}/runs/1", attempt_id=10)
    handle = RemoteHandle(
        block_id="docker.run",
        ref="ns/dirigent-1-10",
        meta={"namespace": "ns", "name": "dirigent-1-10", "uid": "job-uid"},
    )
    config = DockerConfig.model_validate({"image": "busybox", "logTail": 100})
    try:
        out = await block.fetch(handle, config, ctx)
    finally:
        block._clients[""].close()
    stored = await storage.read_bytes(out.log_uri)
    assert stored == LOG[: 1 << 20]  # the first MiB, not the 6 MB the server would send
    assert out.log_tail == LOG[(1 << 20) - 100 : 1 << 20].decode()
    assert out.pod == POD_NAME
    [query] = [s["query"] for s in api.seen if s["path"].endswith("/log")]
    assert query["limitBytes"] == str(1 << 20)
    warnings = [m for level, m, _ in ctx.log.lines if level == "warning"]
    assert any("cut at 1048576 bytes (DIRIGENT_KUBE_LOG_LIMIT)" in m for m in warnings)


async def test_fetch_reads_only_pods_of_the_handles_job(api: Server, tmp_path: Path) -> None:
    block = DockerRunOperator(KubeSettings())
    block._clients[""] = await KubeClient.build(cluster(api))
    storage = FileStorage(tmp_path)
    ctx: Any = make_context(storage=storage, scratch=f"{storage.root_uri}/runs/1", attempt_id=10)
    handle = RemoteHandle(
        block_id="docker.run",
        ref="ns/dirigent-1-10",
        meta={"namespace": "ns", "name": "dirigent-1-10", "uid": "another-jobs-uid"},
    )
    try:
        out = await block.fetch(handle, DockerConfig.model_validate({"image": "x"}), ctx)
    finally:
        block._clients[""].close()
    assert out.pod is None  # a pod of that name owned by another Job is not read
    assert not [s for s in api.seen if s["path"].endswith("/log")]
