"""One active operator: a coordination.k8s.io Lease, held by renewing it.

Why a Lease rather than kopf's peering: peering needs kopf's own CRDs installed and pauses
only kopf's handlers, while the active operator also runs the status feedback loop and the
admission server. With a Lease, a standby does nothing at all until it holds the Lease;
then it starts everything. The Lease also carries the feedback loop's durable cursor
(annotation ``dirigent.dev/events-cursor``), so the new leader resumes where the old one
stopped.

Invariants:
- a Lease is taken only when it is free or its holder has not renewed within
  ``leaseDurationSeconds``; every write is a replace at the read ``resourceVersion``, so two
  candidates never both win (one gets 409 Conflict);
- a holder that has not renewed for ``renew_deadline_seconds`` stops (``lost`` is set) —
  shorter than ``lease_seconds``, so it has stopped before a standby may take the Lease; a
  renewal that hangs counts as failed when the deadline passes (every call to the API server
  carries ``kube_timeout_seconds``, and the wait for it is bounded too): the process exits
  rather than risk two active operators.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from .context import log
from .kube import ApiException, Kube
from .settings import OperatorSettings

__all__ = ["CURSOR_ANNOTATION", "Leadership"]

CURSOR_ANNOTATION = "dirigent.dev/events-cursor"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Leadership:
    def __init__(self, kube: Kube, settings: OperatorSettings, identity: str) -> None:
        self.kube = kube
        self.settings = settings
        self.identity = identity
        self.cursor: str | None = None
        self.cursor_source: Callable[[], str | None] = lambda: None
        self.lost = asyncio.Event()
        self.leading = False  # readiness says standby or leader

    async def acquire(self) -> None:
        """Wait until this instance holds the Lease."""
        announced = False
        while True:
            try:
                if await self._attempt(False):
                    break
            except Exception as exc:  # the API server away: a standby keeps standing by
                log.warning("lease acquisition failed", error=str(exc) or type(exc).__name__)
            if not announced:
                log.info("standing by", lease=self.settings.lease_name, identity=self.identity)
                announced = True
            await asyncio.sleep(self.settings.renew_seconds / 2)
        self.leading = True
        log.info("leading", lease=self.settings.lease_name, identity=self.identity)

    async def keep(self) -> None:
        """Renew until stopped; set ``lost`` and return when the Lease cannot be kept."""
        s = self.settings
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(
                max(0.0, min(s.renew_seconds, renewed + s.renew_deadline - time.monotonic()))
            )
            left = renewed + s.renew_deadline - time.monotonic()
            try:
                held = await asyncio.wait_for(self._attempt(True), timeout=max(left, 0.001))
            except Exception as exc:  # an API hiccup or a hang: retry until the deadline
                log.warning("lease renewal failed", error=str(exc) or type(exc).__name__)
                if time.monotonic() - renewed < s.renew_deadline:
                    continue
                held = False
            if not held:
                log.error("lost the lease; stopping", identity=self.identity)
                self.lost.set()
                return
            renewed = time.monotonic()

    async def _attempt(self, renewing: bool) -> bool:
        return await asyncio.to_thread(self._try, renewing)

    def _spec(self, old: Any, renewing: bool) -> Any:
        stamp = _now()
        transitions = (old.lease_transitions or 0) if old is not None else 0
        return client.V1LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=max(1, round(self.settings.lease_seconds)),
            acquire_time=old.acquire_time if renewing and old is not None else stamp,
            renew_time=stamp,
            lease_transitions=transitions if renewing else transitions + 1,
        )

    def _try(self, renewing: bool) -> bool:
        """One attempt to take or renew the Lease (blocking; run in a thread)."""
        ns, name = self.settings.lease_namespace, self.settings.lease_name
        api = self.kube.coordination
        timeout = self.settings.kube_timeout_seconds
        try:
            lease = api.read_namespaced_lease(name, ns, _request_timeout=timeout)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=name, namespace=ns),
                spec=self._spec(None, False),
            )
            try:
                api.create_namespaced_lease(ns, body, _request_timeout=timeout)
            except ApiException as err:
                if err.status == 409:
                    return False
                raise
            return True
        spec = lease.spec
        mine = spec.holder_identity == self.identity
        if renewing and not mine:
            return False
        if not mine and not self._expired(spec):
            return False
        annotations = dict(lease.metadata.annotations or {})
        if not renewing:
            self.cursor = annotations.get(CURSOR_ANNOTATION)
        cursor = self.cursor_source()
        if cursor:
            annotations[CURSOR_ANNOTATION] = cursor
        lease.metadata.annotations = annotations
        lease.spec = self._spec(spec, renewing and mine)
        try:
            api.replace_namespaced_lease(name, ns, lease, _request_timeout=timeout)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def _expired(self, spec: Any) -> bool:
        if not spec.holder_identity or spec.renew_time is None:
            return True
        duration = dt.timedelta(seconds=spec.lease_duration_seconds or 0)
        renewed: dt.datetime = spec.renew_time
        if renewed.tzinfo is None:
            renewed = renewed.replace(tzinfo=dt.UTC)
        return _now() > renewed + duration

    async def release(self) -> None:
        """Give the Lease up on a clean stop, so a standby takes over without waiting."""

        def clear() -> None:
            ns, name = self.settings.lease_namespace, self.settings.lease_name
            timeout = self.settings.kube_timeout_seconds
            lease = self.kube.coordination.read_namespaced_lease(name, ns, _request_timeout=timeout)
            if lease.spec.holder_identity != self.identity:
                return
            cursor = self.cursor_source()
            if cursor:
                lease.metadata.annotations = {
                    **(lease.metadata.annotations or {}),
                    CURSOR_ANNOTATION: cursor,
                }
            lease.spec.holder_identity = None
            lease.spec.renew_time = None
            self.kube.coordination.replace_namespaced_lease(
                name, ns, lease, _request_timeout=timeout
            )

        try:
            await asyncio.to_thread(clear)
        except Exception as exc:
            log.warning("could not release the lease", error=str(exc))
