"""How a process reaches a Kubernetes API server: a tenant's Connection, or its own access.

Two models, because two people decide. A **Connection** of kind ``kubernetes`` is written
in a tenant's namespace and opened in the worker (docker.run's ``cluster``) and in the
operator (its health check), processes that hold credentials of their own. So it must bring
its own credentials and nothing that reaches into the process opening it: a ``kubeconfig``
text or a ``server`` with a bearer ``token``, never the pod's account (``inCluster``), a
file of the process (``kubeconfigPath``, or a kubeconfig naming ``tokenFile``,
``client-key``, ``certificate-authority`` paths) or a program to run (a kubeconfig
``exec`` or ``auth-provider`` plugin runs a command where the connection is opened). Only
inline credentials are accepted in a kubeconfig (``KUBECONFIG_USER_KEYS``,
``KUBECONFIG_CLUSTER_KEYS``); anything else is refused with the key named.

``ClusterAccess`` is the process's own access (``DIRIGENT_KUBE_*``): it may also use the
pod's account, a kubeconfig file, or the default kubeconfig. Nothing a tenant writes is
ever validated as ``ClusterAccess``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterable
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, Field, SecretStr, model_validator

from dirigent.blocks.base import CheckedKind, ConnectionConfig
from dirigent.sdk import HealthReport, secret_values

__all__ = [
    "KUBECONFIG_CLUSTER_KEYS",
    "KUBECONFIG_USER_KEYS",
    "ClusterAccess",
    "KubernetesConnection",
    "KubernetesConnectionKind",
]

KUBECONFIG_USER_KEYS = frozenset(
    {"token", "client-certificate-data", "client-key-data", "username", "password"}
)
KUBECONFIG_CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "disable-compression",
    }
)


class KubernetesConnection(ConnectionConfig):
    """A Kubernetes API server, reached with credentials of the connection's own: a
    ``kubeconfig`` (its YAML text, a secret, inline credentials only), or a ``server`` with a
    bearer ``token`` and the ``certificateAuthority`` that signed the server's certificate."""

    # A Connection must name one way; ClusterAccess may name none (the default kubeconfig).
    needs_a_way: ClassVar[bool] = True

    kubeconfig: SecretStr | None = Field(default=None, description="Kubeconfig YAML text.")
    context: str | None = Field(default=None, description="A context of the kubeconfig.")
    server: str | None = Field(default=None, description="API server URL, e.g. https://host:6443.")
    token: SecretStr | None = Field(default=None, description="Bearer token, with `server`.")
    certificate_authority: str | None = Field(
        default=None, description="PEM of the CA that signed the server's certificate."
    )
    qps: float = Field(default=20.0, gt=0, description="Requests per second to the API server.")
    burst: int = Field(default=40, ge=1, description="Requests allowed at once above qps.")

    def ways(self) -> list[str]:
        """The ways to the cluster this config names."""
        given = (("kubeconfig", self.kubeconfig is not None), ("server", self.server is not None))
        return [name for name, named in given if named]

    @model_validator(mode="after")
    def _one_way(self) -> KubernetesConnection:
        ways = self.ways()
        if len(ways) > 1:
            raise ValueError(f"give one way to reach the cluster, not {' and '.join(ways)}")
        if not ways and self.needs_a_way:
            raise ValueError(
                "give a 'kubeconfig', or a 'server' and a 'token': a Connection brings its "
                "own credentials"
            )
        if (self.server is None) != (self.token is None):
            raise ValueError("'server' and 'token' go together")
        if self.kubeconfig is not None:
            _self_contained(_parse_kubeconfig(self.kubeconfig.get_secret_value()))
        return self

    def kubeconfig_dict(self) -> dict[str, Any] | None:
        """The connection as a kubeconfig (from its text, or built from server and token);
        None when it names a file, the pod's account or nothing."""
        if self.kubeconfig is not None:
            return _parse_kubeconfig(self.kubeconfig.get_secret_value())
        if self.server is None or self.token is None:
            return None
        cluster: dict[str, Any] = {"server": self.server}
        if self.certificate_authority is not None:
            pem = self.certificate_authority.encode()
            cluster["certificate-authority-data"] = base64.b64encode(pem).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "cluster", "cluster": cluster}],
            "users": [{"name": "user", "user": {"token": self.token.get_secret_value()}}],
            "contexts": [{"name": "ctx", "context": {"cluster": "cluster", "user": "user"}}],
            "current-context": "ctx",
        }

    def secret_parts(self) -> frozenset[str]:
        """The secret values, and each credential inside a kubeconfig text (a token, a key):
        an error can quote one line of the text, never the whole of it."""
        found = set(secret_values(self))
        if self.kubeconfig is not None:
            try:
                data = _parse_kubeconfig(self.kubeconfig.get_secret_value())
            except ValueError:
                data = {}
            for user in data.get("users") or []:
                if isinstance(user, dict):
                    found |= _strings(user.get("user"))
        return frozenset(found)

    def identity(self) -> str:
        """A digest of everything that says how to reach the cluster (secrets included), so
        a process can keep one client per distinct connection and drop a changed one."""
        parts = {
            name: value.get_secret_value() if isinstance(value, SecretStr) else value
            for name, value in ((n, getattr(self, n)) for n in type(self).model_fields)
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class ClusterAccess(KubernetesConnection):
    """This process's own access to its cluster (never a tenant's Connection): also the
    pod's service account, a kubeconfig file, or (naming nothing) the default kubeconfig."""

    needs_a_way: ClassVar[bool] = False

    in_cluster: bool = Field(default=False, description="Use the pod's service account.")
    kubeconfig_path: str | None = Field(default=None, description="Path to a kubeconfig.")

    def ways(self) -> list[str]:
        own = (("inCluster", self.in_cluster), ("kubeconfigPath", self.kubeconfig_path is not None))
        return [*super().ways(), *(name for name, named in own if named)]


def _parse_kubeconfig(text: str) -> dict[str, Any]:
    """The kubeconfig's mapping. A YAML error is re-said with its line only: PyYAML's own
    message quotes the text around the error, and that text holds the credentials."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ValueError(f"'kubeconfig' is not valid YAML{where}") from None
    if not isinstance(data, dict):
        raise ValueError("'kubeconfig' is not a YAML mapping")
    return data


def _self_contained(data: dict[str, Any]) -> None:
    """Refuse a kubeconfig whose users or clusters name anything but inline credentials."""
    for section, inner, allowed in (
        ("users", "user", KUBECONFIG_USER_KEYS),
        ("clusters", "cluster", KUBECONFIG_CLUSTER_KEYS),
    ):
        for index, entry in enumerate(data.get(section) or []):
            body = entry.get(inner) if isinstance(entry, dict) else None
            for key in sorted(body or {}):
                if key not in allowed:
                    raise ValueError(
                        f"'kubeconfig': {section}[{index}].{inner}.{key} is not allowed in a "
                        "Connection (it would run a program or read a file where the "
                        f"connection is opened); use only {', '.join(sorted(allowed))}"
                    )


def _strings(value: object) -> set[str]:
    """Every string in ``value`` (nested dicts and lists), for redaction."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value)) if value else set()
    return set()


class KubernetesConnectionKind(CheckedKind[KubernetesConnection]):
    id: ClassVar[str] = "kubernetes"
    summary: ClassVar[str] = (
        "A Kubernetes API server: a kubeconfig (inline credentials), or a server with a "
        "token and CA."
    )
    config_model: ClassVar[type[BaseModel]] = KubernetesConnection

    def secrets(self, config: KubernetesConnection) -> Iterable[str]:
        return config.secret_parts()

    async def reach(self, config: KubernetesConnection) -> HealthReport:
        from dirigent.blocks.kubernetes.client import KubeClient

        started = time.monotonic()
        try:
            async with KubeClient.connect(config) as kube:
                version = await kube.server_version()
        except Exception as err:
            return HealthReport(ok=False, message=f"API server unreachable: {err}")
        return HealthReport(
            ok=True,
            message=f"API server {version}",
            latency_ms=int((time.monotonic() - started) * 1000),
            details={"version": version},
        )
