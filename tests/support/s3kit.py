"""What the S3 integration tests share: the harness's server reached through a counting proxy,
the ambient ``AWS_*`` environment, and Connections of kind ``s3``.

Why a proxy: whether a copy stayed on the server or streamed through the worker is a fact
about bytes on the wire, so the tests count them on a real loopback TCP proxy between the
worker's S3 client and SeaweedFS rather than trusting which code path ran.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from dirigent.engine import Engine
from dirigent.engine.shapes.manifests.loading import parse_manifest
from dirigent.storage.s3 import S3Settings
from e2e.harness.s3 import S3Endpoint

SECRET_KEY = "1" * 64  # seals the s3 Connections' secret key in these tests


class CountingProxy:
    """A loopback TCP proxy that counts the bytes it carries each way."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self._upstream = (host, int(port))
        self.sent = 0  # client -> server (uploads)
        self.received = 0  # server -> client (downloads)
        self.url = ""
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    @property
    def total(self) -> int:
        return self.sent + self.received

    async def __aenter__(self) -> CountingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            up_r, up_w = await asyncio.open_connection(*self._upstream)
            await asyncio.gather(
                self._pipe(client_r, up_w, True), self._pipe(up_r, client_w, False)
            )
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            client_w.close()
            self._pipes.discard(task)

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, upload: bool
    ) -> None:
        try:
            while data := await src.read(65536):
                if upload:
                    self.sent += len(data)
                else:
                    self.received += len(data)
                dst.write(data)
                await dst.drain()
        except ConnectionError:
            pass
        finally:
            dst.close()


def use_ambient(
    monkeypatch: pytest.MonkeyPatch, endpoint: S3Endpoint, url: str | None = None
) -> None:
    """The worker's ambient identity: the standard AWS_* variables, as `make s3-up` exports."""
    for name, value in endpoint.env().items():
        monkeypatch.setenv(name, value)
    if url is not None:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never reach for an instance role


def use_no_ambient(monkeypatch: pytest.MonkeyPatch, endpoint: S3Endpoint) -> None:
    """An ambient identity the server refuses: whatever works must have used a Connection."""
    use_ambient(monkeypatch, endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "NOBODY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")


def settings(endpoint: S3Endpoint, **more: Any) -> S3Settings:
    return S3Settings.model_validate(
        {
            "endpoint_url": endpoint.url,
            "region": endpoint.region,
            "access_key_id": endpoint.access_key,
            "secret_access_key": endpoint.secret_key,
            **more,
        }
    )


def prefix(endpoint: S3Endpoint) -> str:
    """A prefix of this test's own in the session's bucket, ending in ``/``."""
    return f"s3://{endpoint.bucket}/t-{uuid.uuid4().hex[:10]}/"


async def apply_connection(
    engine: Engine,
    namespace: str,
    name: str,
    endpoint: S3Endpoint,
    *,
    url: str | None = None,
    **more: Any,
) -> None:
    """A Connection of kind s3 for the harness's server, its secret sealed as the operator would."""
    manifest, problems = parse_manifest(
        {
            "apiVersion": "dirigent.dev/v1alpha1",
            "kind": "Connection",
            "metadata": {"name": name},
            "spec": {
                "type": "s3",
                "settings": {
                    "endpoint_url": url or endpoint.url,
                    "region": endpoint.region,
                    "access_key_id": endpoint.access_key,
                    **more,
                },
                "secrets": {"secret_access_key": {"name": f"{name}-s3", "key": "secret"}},
            },
        }
    )
    assert manifest is not None, problems
    await engine.manifests.apply(
        manifest, namespace, secret_values={"secret_access_key": endpoint.secret_key}
    )
