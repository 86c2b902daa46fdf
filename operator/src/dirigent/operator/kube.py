"""The Kubernetes API calls the operator makes outside kopf's own patching.

Why a module: kopf patches the object a handler was called for; everything else — reading a
Connection's Secrets, writing a Webhook's token Secret, status fed back from the engine,
Events on a Pipeline, the leader Lease — goes through this one client. It wraps the official
(blocking) client and runs each call in a thread, so handlers stay async and a slow API call
never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from dirigent.engine.shapes.manifests.base import API_GROUP

from .conditions import now

log = structlog.get_logger("dirigent.operator")

__all__ = ["ApiException", "Kube", "ObjectRef", "api_client"]

VERSION = "v1alpha1"
PLURALS = {
    "Pipeline": "pipelines",
    "Schedule": "schedules",
    "Webhook": "webhooks",
    "Connection": "connections",
}


def api_client() -> Any:
    """In a pod: the service account; elsewhere: ``KUBECONFIG`` (or ~/.kube/config)."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        return client.ApiClient()
    return config.new_client_from_config()  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class ObjectRef:
    """Enough to name one of our resources in an Event or an owner reference."""

    kind: str
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> ObjectRef:
        meta = body["metadata"]
        return cls(body["kind"], meta["namespace"], meta["name"], meta.get("uid", ""))

    def owner_reference(self) -> dict[str, Any]:
        return {
            "apiVersion": f"{API_GROUP}/{VERSION}",
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


@dataclass(frozen=True)
class FoundSecret:
    data: dict[str, str]  # the keys whose values are UTF-8 text
    binary: frozenset[str]  # keys whose values are not text
    owner_uids: frozenset[str]

    def missing(self, key: str) -> str | None:
        """Why ``key`` cannot be used, or None when it can."""
        if key in self.binary:
            return f"key {key} is not UTF-8 text"
        if key not in self.data:
            return f"has no key {key}"
        return None


class Kube:
    """Async wrappers over the blocking client; one per process."""

    def __init__(self, api: Any, *, timeout: float = 10.0) -> None:
        self.api = api
        # Every call has a deadline: a call that hangs must not hold a handler, the feedback
        # loop or the Lease renewal past it (the kubernetes client waits forever by default).
        self.timeout = timeout
        self.core: Any = client.CoreV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.coordination: Any = client.CoordinationV1Api(api)

    def close(self) -> None:
        self.api.close()

    async def call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        """One blocking client call in a thread, with this client's deadline."""
        return await asyncio.to_thread(method, *args, _request_timeout=self.timeout, **kwargs)

    async def secret(self, namespace: str, name: str) -> FoundSecret | None:
        """A Secret's text values, the keys that hold binary, and who owns it; None when
        there is no such Secret. A value that is not UTF-8 is never decoded (a key holding
        a certificate bundle beside the one we read must not break every reconcile)."""
        try:
            secret = await self.call(self.core.read_namespaced_secret, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        text: dict[str, str] = {}
        binary: set[str] = set()
        for key, value in (secret.data or {}).items():
            try:
                text[key] = base64.b64decode(value).decode()
            except (UnicodeDecodeError, ValueError):
                binary.add(key)
        owners = frozenset(o.uid for o in (secret.metadata.owner_references or []))
        return FoundSecret(text, frozenset(binary), owners)

    async def secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """A Secret's text values; None when there is no such Secret."""
        found = await self.secret(namespace, name)
        return None if found is None else found.data

    async def create_secret(
        self, namespace: str, name: str, data: Mapping[str, str], owner: ObjectRef
    ) -> None:
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(
                name=name,
                namespace=namespace,
                owner_references=[owner.owner_reference()],
                labels={"app.kubernetes.io/managed-by": "dirigent"},
            ),
            type="Opaque",
            string_data=dict(data),
        )
        await self.call(self.core.create_namespaced_secret, namespace, body)

    async def replace_secret_data(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        patch = {"stringData": dict(data)}
        await self.call(self.core.patch_namespaced_secret, name, namespace, patch)

    async def patch_status(self, ref: ObjectRef, status: Mapping[str, Any]) -> bool:
        """Merge ``status`` into the object's status; False when the object is gone."""
        try:
            await self.call(
                self.custom.patch_namespaced_custom_object_status,
                API_GROUP,
                VERSION,
                ref.namespace,
                PLURALS[ref.kind],
                ref.name,
                {"status": dict(status)},
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def get_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = await self.call(
                self.custom.get_namespaced_custom_object,
                API_GROUP,
                VERSION,
                namespace,
                PLURALS[kind],
                name,
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    async def names(self, kind: str, namespace: str) -> set[str]:
        """Names of the objects of one of our kinds in a namespace (a fresh list call)."""
        listed: dict[str, Any] = await self.call(
            self.custom.list_namespaced_custom_object, API_GROUP, VERSION, namespace, PLURALS[kind]
        )
        return {item["metadata"]["name"] for item in listed.get("items", [])}

    async def patch_annotations(
        self, ref: ObjectRef, annotations: Mapping[str, str | None]
    ) -> None:
        """Set (or, with None, remove) annotations on one of our resources."""
        await self.call(
            self.custom.patch_namespaced_custom_object,
            API_GROUP,
            VERSION,
            ref.namespace,
            PLURALS[ref.kind],
            ref.name,
            {"metadata": {"annotations": dict(annotations)}},
        )

    async def event(self, ref: ObjectRef, *, type_: str, reason: str, message: str) -> None:
        """A core/v1 Event on the resource, as ``kubectl describe`` shows it."""
        stamp = now()
        body = {
            "metadata": {"generateName": f"{ref.name}.", "namespace": ref.namespace},
            "involvedObject": {
                "apiVersion": f"{API_GROUP}/{VERSION}",
                "kind": ref.kind,
                "namespace": ref.namespace,
                "name": ref.name,
                "uid": ref.uid,
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": "dirigent-operator"},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": "dirigent-operator",
        }
        try:
            await self.call(self.core.create_namespaced_event, ref.namespace, body)
        except ApiException as exc:
            # An Event is a courtesy: a terminating namespace (403) or a hiccup must never
            # fail the reconcile or the deletion that raised it.
            log.warning("event not recorded", reason=reason, name=ref.name, status=exc.status)
