"""Who is asking, and may they: bearer tokens, checked by the cluster or by a dev token.

Every route under ``/api/v1`` names the permission it needs as a ``Permission`` (a verb on a
``dirigent.dev`` resource, optionally a subresource, in the request's namespace); the
dependency in ``deps.py`` authenticates the bearer token and asks the configured ``Auth``
whether that principal holds the permission. Two implementations:

- ``StaticToken``: one token for ``dirigent dev`` and tests; whoever holds it may do anything.
- ``ClusterAuth``: the Kubernetes way. The token is checked with a TokenReview and the
  permission with a SubjectAccessReview, both answered by the API server, so RBAC bindings
  (the viewer / editor / admin ClusterRoles in ``config/rbac/``) decide. Both
  answers are cached for ``ttl`` seconds, keyed by the token's SHA-256 and by the
  (user, permission) pair, so a burst of requests costs the API server one review each.

A missing or unrecognised token is 401 (``auth.unauthenticated``); a known principal without
the permission is 403 (``auth.forbidden``) naming the verb and resource it lacked. The verbs
are documented in ``docs/security.md``.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import structlog

from dirigent.api.problems import ApiProblem

log = structlog.get_logger("dirigent.api.auth")

API_GROUP = "dirigent.dev"
SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class Principal:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Permission:
    """A verb on a dirigent.dev resource (optionally its subresource), e.g. create pipelines/run."""

    verb: str
    resource: str
    subresource: str = ""

    def __str__(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.verb} {self.resource}{sub}"


class Auth(Protocol):
    async def authenticate(self, token: str) -> Principal | None: ...

    async def authorize(
        self, principal: Principal, permission: Permission, namespace: str | None
    ) -> bool: ...


class StaticToken:
    """Dev mode: one shared token; its holder may do everything."""

    def __init__(self, token: str) -> None:
        if len(token) < 16:
            raise ValueError("a static API token must be at least 16 characters")
        self._token = token.encode()

    async def authenticate(self, token: str) -> Principal | None:
        if hmac.compare_digest(token.encode(), self._token):
            return Principal("dev")
        return None

    async def authorize(
        self, principal: Principal, permission: Permission, namespace: str | None
    ) -> bool:
        return True


class _TtlCache:
    """A small LRU whose entries expire ``ttl`` seconds after they were stored."""

    def __init__(self, ttl: float, size: int = 10_000) -> None:
        self.ttl = ttl
        self.size = size
        self._items: collections.OrderedDict[Any, tuple[float, Any]] = collections.OrderedDict()

    def get(self, key: Any) -> tuple[bool, Any]:
        found = self._items.get(key)
        if found is None or found[0] < time.monotonic():
            self._items.pop(key, None)
            return False, None
        self._items.move_to_end(key)
        return True, found[1]

    def put(self, key: Any, value: Any) -> None:
        self._items[key] = (time.monotonic() + self.ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


class TokenFile(httpx.Auth):
    """A bearer token read from a file, read again whenever the file changes.

    A pod's projected service-account token is rotated by the kubelet (about hourly, and it
    expires): a token read once at start stops authenticating this API's reviews. The file's
    modification time is checked on each request (one ``stat``), so a rotation is picked up
    by the next review.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._token = ""

    def current(self) -> str:
        stat = self.path.stat()
        stamp = (stat.st_mtime_ns, stat.st_ino)
        if stamp != self._stamp:
            self._token = self.path.read_text().strip()
            self._stamp = stamp
        return self._token

    def auth_flow(self, request: httpx.Request) -> Any:
        request.headers["Authorization"] = f"Bearer {self.current()}"
        yield request


@dataclass(frozen=True)
class KubeAccess:
    """How the API reaches the Kubernetes API server: URL, CA, and its own credentials."""

    server: str
    ca_file: str | None = None
    token: str | None = None
    token_file: str | None = None  # read again when it changes (a projected token rotates)
    cert_file: str | None = None
    key_file: str | None = None

    @classmethod
    def in_cluster(cls) -> KubeAccess:
        """The pod's service account (needs system:auth-delegator or config/rbac's api role)."""
        import os

        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        return cls(
            server=f"https://{host}:{port}",
            ca_file=str(SA_DIR / "ca.crt"),
            token_file=str(SA_DIR / "token"),
        )

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, context: str | None = None) -> KubeAccess:
        from kubernetes import client, config  # the loader writes inline certificates to files

        configuration = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, client_configuration=configuration
        )
        bearer = configuration.api_key.get("authorization", "")
        return cls(
            server=configuration.host,
            ca_file=configuration.ssl_ca_cert,
            token=bearer.removeprefix("Bearer ") or None,
            cert_file=configuration.cert_file,
            key_file=configuration.key_file,
        )

    def client(self, timeout: float = 5.0) -> httpx.AsyncClient:
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        auth = TokenFile(Path(self.token_file)) if self.token_file else None
        return httpx.AsyncClient(
            base_url=self.server, verify=context, headers=headers, timeout=timeout, auth=auth
        )


class ClusterAuth:
    """TokenReview for who, SubjectAccessReview for may; both cached for ``ttl`` seconds."""

    def __init__(
        self, access: KubeAccess, *, ttl: float = 10.0, audiences: tuple[str, ...] = ()
    ) -> None:
        self.access = access
        self.audiences = audiences
        self._tokens = _TtlCache(ttl)
        self._decisions = _TtlCache(ttl)
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = self.access.client()
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def authenticate(self, token: str) -> Principal | None:
        key = hashlib.sha256(token.encode()).digest()
        hit, principal = self._tokens.get(key)
        if hit:
            return principal  # type: ignore[no-any-return]
        spec: dict[str, Any] = {"token": token}
        if self.audiences:
            spec["audiences"] = list(self.audiences)
        status = await self._review("authentication.k8s.io", "tokenreviews", spec)
        found = None
        if status.get("authenticated") and self._for_us(status):
            user = status.get("user", {})
            found = Principal(
                name=user.get("username", ""),
                uid=user.get("uid", ""),
                groups=tuple(user.get("groups", [])),
                extra=user.get("extra", {}) or {},
            )
        self._tokens.put(key, found)
        return found

    def _for_us(self, status: dict[str, Any]) -> bool:
        """A token minted for another audience (a full-power Kubernetes token, say) is not
        accepted even when the cluster knows it: the review's audiences must meet ours."""
        if not self.audiences:
            return True
        return bool(set(status.get("audiences") or ()) & set(self.audiences))

    async def authorize(
        self, principal: Principal, permission: Permission, namespace: str | None
    ) -> bool:
        key = (principal.name, principal.uid, principal.groups, permission, namespace)
        hit, allowed = self._decisions.get(key)
        if hit:
            return bool(allowed)
        attributes = {
            "group": API_GROUP,
            "resource": permission.resource,
            "subresource": permission.subresource,
            "verb": permission.verb,
            "namespace": namespace or "",
        }
        spec = {
            "user": principal.name,
            "uid": principal.uid,
            "groups": list(principal.groups),
            "extra": principal.extra,
            "resourceAttributes": attributes,
        }
        status = await self._review("authorization.k8s.io", "subjectaccessreviews", spec)
        allowed = bool(status.get("allowed")) and not status.get("denied")
        self._decisions.put(key, allowed)
        return allowed

    async def _review(self, group: str, plural: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": f"{group}/v1", "kind": _KINDS[plural], "spec": spec}
        try:
            response = await self._http().post(f"/apis/{group}/v1/{plural}", json=body)
        except httpx.HTTPError as err:
            log.warning("auth.review_failed", review=plural, error=str(err))
            raise ApiProblem(
                503, "auth.unavailable", "the cluster could not be asked who you are; retry"
            ) from None
        if response.status_code >= 300:
            log.warning("auth.review_refused", review=plural, status=response.status_code)
            raise ApiProblem(
                503,
                "auth.unavailable",
                f"the cluster refused this API's {plural} ({response.status_code}); "
                "is the API's service account bound to the dirigent-api ClusterRole?",
            )
        status: dict[str, Any] = response.json().get("status", {})
        return status


_KINDS = {"tokenreviews": "TokenReview", "subjectaccessreviews": "SubjectAccessReview"}


class StreamBudget:
    """How many event and log streams each principal may hold open at once.

    ``take`` is called before a stream's response starts (so the refusal is a 429 Problem)
    and ``give_back`` when the stream's generator finishes, however it finishes.
    """

    def __init__(self, per_principal: int = 8) -> None:
        self.per_principal = per_principal
        self._open: collections.Counter[str] = collections.Counter()

    def take(self, principal: Principal) -> None:
        if self._open[principal.name] >= self.per_principal:
            raise ApiProblem(
                429,
                "stream.budget.exceeded",
                f"{principal.name} already holds {self.per_principal} open streams; "
                "close one (a run page needs only its $events stream)",
                params={"budget": self.per_principal},
            )
        self._open[principal.name] += 1

    def give_back(self, principal: Principal) -> None:
        self._open[principal.name] -= 1
        if self._open[principal.name] <= 0:
            del self._open[principal.name]

    def held(self, principal: Principal) -> int:
        return self._open[principal.name]
