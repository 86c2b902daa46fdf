"""A Kubernetes API client that never blocks the event loop and keeps to a QPS.

Why threads: the official ``kubernetes`` client is synchronous. Every call runs in this
client's own small thread pool, so a slow API server delays the step that asked, never the
worker's loop (claims, heartbeats, other steps). Why a token bucket: a burst of Job steps
must not flood the API server; every request first takes a token (``qps`` per second, up
to ``burst`` at once), exactly as client-go's rate limiter behaves, so Jobs are created as
fast as the configured QPS allows and no faster.

Responses are read raw (``_preload_content=False``) and returned as plain JSON dicts: the
blocks read a few fields, and skipping the model deserialisation keeps a call cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kubernetes import client as k8s
from kubernetes import config as _k8s_config

from dirigent.blocks.connections import KubernetesConnection

__all__ = ["ApiError", "KubeClient", "RateLimiter"]

T = TypeVar("T")
k8s_config: Any = _k8s_config  # its loaders are untyped
ApiError = k8s.ApiException


class RateLimiter:
    """A token bucket: ``qps`` tokens a second, at most ``burst`` saved up."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(burst, 1)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        # The lock is held while waiting on purpose: waiters are served in order.
        async with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
            self._stamp = now
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self.qps)
                self._tokens = 1.0
                self._stamp = time.monotonic()
            self._tokens -= 1


def _api_client(config: KubernetesConnection) -> Any:
    if config.in_cluster:
        cfg = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=cfg)
        return k8s.ApiClient(cfg)
    data = config.kubeconfig_dict()
    if data is not None:
        return k8s_config.new_client_from_config_dict(data, context=config.context)
    return k8s_config.new_client_from_config(
        config_file=config.kubeconfig_path, context=config.context
    )


class KubeClient:
    """The calls blocks make, each rate-limited and run off the event loop."""

    def __init__(self, api: Any, limiter: RateLimiter, threads: int = 8) -> None:
        self._api = api
        self._batch = k8s.BatchV1Api(api)
        self._core = k8s.CoreV1Api(api)
        self._version = k8s.VersionApi(api)
        self._limiter = limiter
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kube")

    @classmethod
    async def build(cls, config: KubernetesConnection) -> KubeClient:
        api = await asyncio.to_thread(_api_client, config)
        return cls(api, RateLimiter(config.qps, config.burst))

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, config: KubernetesConnection) -> AsyncIterator[KubeClient]:
        kube = await cls.build(config)
        try:
            yield kube
        finally:
            kube.close()

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._api.close()

    async def _call(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        await self._limiter.take()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kw))

    async def _json(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> dict[str, Any]:
        response = await self._call(fn, *args, _preload_content=False, **kw)
        data: dict[str, Any] = json.loads(response.data)
        return data

    async def server_version(self) -> str:
        info = await self._json(self._version.get_code)
        return str(info.get("gitVersion", "unknown"))

    async def create_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._json(self._batch.create_namespaced_job, namespace, body)

    async def read_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self._json(self._batch.read_namespaced_job, name, namespace)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    async def delete_job(self, namespace: str, name: str) -> bool:
        try:
            await self._json(
                self._batch.delete_namespaced_job,
                name,
                namespace,
                propagation_policy="Background",
            )
        except ApiError as err:
            if err.status == 404:
                return False
            raise
        return True

    async def put_secret(self, namespace: str, body: dict[str, Any]) -> None:
        """Create the Secret, or replace the data of the one an earlier try made."""
        try:
            await self._json(self._core.create_namespaced_secret, namespace, body)
        except ApiError as err:
            if err.status != 409:
                raise
            name = body["metadata"]["name"]
            await self._json(self._core.patch_namespaced_secret, name, namespace, body)

    async def own_secret(self, namespace: str, name: str, owner: dict[str, Any]) -> None:
        """Make ``owner`` (an object's ownerReference) own the Secret, for the collector."""
        patch = {"metadata": {"ownerReferences": [owner]}}
        await self._json(self._core.patch_namespaced_secret, name, namespace, patch)

    async def delete_secret(self, namespace: str, name: str) -> bool:
        try:
            await self._json(self._core.delete_namespaced_secret, name, namespace)
        except ApiError as err:
            if err.status == 404:
                return False
            raise
        return True

    async def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        found = await self._json(
            self._core.list_namespaced_pod, namespace, label_selector=f"job-name={job}"
        )
        pods: list[dict[str, Any]] = found.get("items", [])
        return sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")

    async def pod_log(self, namespace: str, pod: str, container: str) -> bytes:
        response: Any = await self._call(
            self._core.read_namespaced_pod_log,
            pod,
            namespace,
            container=container,
            _preload_content=False,
        )
        data: bytes = response.data
        return data
