"""A Kubernetes API client that never blocks the event loop and keeps to a QPS.

Why threads: the official ``kubernetes`` client is synchronous. Every call runs in this
client's own small thread pool, so a slow API server delays the step that asked, never the
worker's loop (claims, heartbeats, other steps). Why a token bucket: a burst of Job steps
must not flood the API server; every request first takes a token (``qps`` per second, up
to ``burst`` at once), exactly as client-go's rate limiter behaves, so Jobs are created as
fast as the configured QPS allows and no faster.

Responses are read raw (``_preload_content=False``) and returned as plain JSON dicts: the
blocks read a few fields, and skipping the model deserialisation keeps a call cheap. A pod's
log is never read whole: the API server is asked for at most ``limit_bytes`` and no more
is read than that, in chunks, so a chatty container cannot grow a worker's memory.

The objects a Job owns (its Secret, its NetworkPolicy) are created, or, when an earlier try
of the same attempt left one, updated through a JSON patch whose first operations test the
attempt and installation labels: an object of the same name made by anyone else is refused
(``Foreign``) without being read (the worker may not read Secrets) or changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

import urllib3
from kubernetes import client as k8s
from kubernetes import config as _k8s_config

from dirigent.blocks.kubernetes.connection import ClusterAccess, KubernetesConnection

__all__ = ["LOG_ERRORS", "ApiError", "Foreign", "KubeClient", "Owned", "RateLimiter"]

T = TypeVar("T")
k8s_config: Any = _k8s_config  # its loaders are untyped
ApiError = k8s.ApiException
LOG_CHUNK = 64 * 1024
# What reading a log can end with besides a log: the API's refusal, the connection's loss.
LOG_ERRORS: tuple[type[Exception], ...] = (ApiError, OSError, urllib3.exceptions.HTTPError)
Owned = Literal["Secret", "NetworkPolicy"]


class Foreign(Exception):
    """An object of the name this attempt wants exists and is not this attempt's."""

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        super().__init__(f"{kind} {namespace}/{name} exists but was not made by this attempt")
        self.kind, self.namespace, self.name = kind, namespace, name


def _pointer(key: str) -> str:
    """A label key as a JSON pointer segment (RFC 6901: ``~`` and ``/`` escaped)."""
    return key.replace("~", "~0").replace("/", "~1")


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
    if isinstance(config, ClusterAccess) and config.in_cluster:
        cfg = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=cfg)
        return k8s.ApiClient(cfg)
    data = config.kubeconfig_dict()
    if data is not None:
        return k8s_config.new_client_from_config_dict(data, context=config.context)
    # Only the process's own access gets here: a Connection always names a way of its own.
    path = config.kubeconfig_path if isinstance(config, ClusterAccess) else None
    return k8s_config.new_client_from_config(config_file=path, context=config.context)


class KubeClient:
    """The calls blocks make, each rate-limited and run off the event loop."""

    def __init__(self, api: Any, limiter: RateLimiter, threads: int = 8) -> None:
        self._api = api
        self._batch = k8s.BatchV1Api(api)
        self._core = k8s.CoreV1Api(api)
        self._net = k8s.NetworkingV1Api(api)
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

    async def delete_job(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """Delete the Job (and, in the background, its pods); with ``uid``, only that Job."""
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if uid is not None:
            body["preconditions"] = {"uid": uid}
        try:
            await self._json(self._batch.delete_namespaced_job, name, namespace, body=body)
        except ApiError as err:
            if err.status in (404, 409):  # gone, or (409) another object of that name now
                return False
            raise
        return True

    def _owned(
        self, kind: Owned
    ) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
        """The create, patch and delete calls of one kind a Job owns."""
        if kind == "Secret":
            return (
                self._core.create_namespaced_secret,
                self._core.patch_namespaced_secret,
                self._core.delete_namespaced_secret,
            )
        return (
            self._net.create_namespaced_network_policy,
            self._net.patch_namespaced_network_policy,
            self._net.delete_namespaced_network_policy,
        )

    async def put_owned(
        self, kind: Owned, namespace: str, body: dict[str, Any], guard: Mapping[str, str]
    ) -> str:
        """Create ``body``, or update the one an earlier try made (its labels hold ``guard``);
        return its uid. ``Foreign`` when one of that name holds other labels."""
        create, patch, _ = self._owned(kind)
        name = body["metadata"]["name"]
        try:
            made = await self._json(create, namespace, body)
        except ApiError as err:
            if err.status != 409:
                raise
        else:
            return str(made["metadata"]["uid"])
        field = "data" if kind == "Secret" else "spec"
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": f"/metadata/labels/{_pointer(k)}", "value": v}
            for k, v in guard.items()
        ]
        ops.append({"op": "replace", "path": f"/{field}", "value": body[field]})
        try:
            found = await self._json(patch, name, namespace, ops)
        except ApiError as err:
            if err.status == 422:  # a test failed (a missing label fails it too)
                raise Foreign(kind, namespace, name) from None
            raise
        return str(found["metadata"]["uid"])

    async def own(self, kind: Owned, namespace: str, name: str, owner: dict[str, Any]) -> None:
        """Make ``owner`` (an object's ownerReference) own the object, for the collector."""
        _, patch, _ = self._owned(kind)
        await self._json(patch, name, namespace, {"metadata": {"ownerReferences": [owner]}})

    async def delete_owned(
        self, kind: Owned, namespace: str, name: str, uid: str | None = None
    ) -> bool:
        """Delete the object; with ``uid``, only if it is still that one."""
        _, _, delete = self._owned(kind)
        body = {"preconditions": {"uid": uid}} if uid is not None else None
        try:
            await self._json(delete, name, namespace, body=body)
        except ApiError as err:
            if err.status in (404, 409):
                return False
            raise
        return True

    async def job_pods(
        self, namespace: str, job: str, uid: str | None = None
    ) -> list[dict[str, Any]]:
        """The Job's pods, oldest first; with ``uid``, only pods that Job owns."""
        found = await self._json(
            self._core.list_namespaced_pod, namespace, label_selector=f"job-name={job}"
        )
        pods: list[dict[str, Any]] = found.get("items", [])
        if uid is not None:
            pods = [
                p
                for p in pods
                if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
            ]
        return sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")

    async def pod_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        limit_bytes: int,
        tail_lines: int | None = None,
    ) -> bytes:
        """At most ``limit_bytes`` of the container's log (of its last ``tail_lines``)."""
        out = bytearray()
        async with contextlib.aclosing(
            self.stream_pod_log(
                namespace, pod, container, limit_bytes=limit_bytes, tail_lines=tail_lines
            )
        ) as chunks:
            async for chunk in chunks:
                out += chunk
        return bytes(out)

    async def stream_pod_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        limit_bytes: int,
        tail_lines: int | None = None,
    ) -> AsyncGenerator[bytes, None]:
        """The container's log in chunks, ``limit_bytes`` at most in all (asked of the API
        server, and kept to here: it may send slightly more)."""
        extra: dict[str, Any] = {"tail_lines": tail_lines} if tail_lines is not None else {}
        response: Any = await self._call(
            self._core.read_namespaced_pod_log,
            pod,
            namespace,
            container=container,
            limit_bytes=max(limit_bytes, 1),
            _preload_content=False,
            **extra,
        )
        loop = asyncio.get_running_loop()
        left = limit_bytes
        try:
            while left > 0:
                chunk: bytes = await loop.run_in_executor(
                    self._pool, response.read, min(LOG_CHUNK, left)
                )
                if not chunk:
                    break
                left -= len(chunk)
                yield chunk
        finally:
            # Closed, not drained: what is left unread (past the limit) is never read.
            await loop.run_in_executor(self._pool, _close, response)


def _close(response: Any) -> None:
    response.close()
    response.release_conn()
