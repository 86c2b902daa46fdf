"""Kubernetes ``Secret`` documents as the source of ``secretKeyRef`` values outside a cluster.

In a cluster the operator reads a Connection's ``secretKeyRef``s from Secrets. ``dirigent
dev`` and ``dirigent run --local`` have no cluster, so the same folder carries its Secrets as
ordinary ``v1`` Secret documents (``stringData`` or base64 ``data``) — one folder works in
both places. Secrets are split off before validation (they are not dirigent kinds) and
resolved into the ``secret_values`` that ``Engine.apply`` seals.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dirigent.engine.shapes.manifests.connection import Connection
from dirigent.engine.shapes.manifests.loading import Manifest, SourceDocument
from dirigent.engine.shapes.manifests.webhook import Webhook
from dirigent.engine.shapes.problems import Problem, problem

__all__ = ["SecretStore", "is_secret", "split_secrets"]

DEFAULT_NAMESPACE = "default"


def is_secret(data: object) -> bool:
    return (
        isinstance(data, dict) and data.get("apiVersion") == "v1" and data.get("kind") == "Secret"
    )


@dataclass
class SecretStore:
    """Secret values by (namespace, name) -> key -> text."""

    values: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)

    def add(self, doc: SourceDocument) -> list[Problem]:
        """Take one Secret document; problems for a malformed one, located at its source."""
        found = _decode(doc.data)
        if isinstance(found, Problem):
            return [found.at(file=doc.file, document=doc.index)]
        key, values = found
        self.values.setdefault(key, {}).update(values)
        return []

    def resolve(self, manifest: Manifest, namespace: str) -> tuple[dict[str, str], list[Problem]]:
        """The ``secret_values`` for ``Engine.apply``, or a problem per reference not found."""
        refs: dict[str, tuple[str, str, tuple[str | int, ...]]] = {}
        if isinstance(manifest, Connection):
            for name, ref in manifest.spec.secrets.items():
                refs[name] = (ref.name, ref.key, ("spec", "secrets", name))
        elif isinstance(manifest, Webhook) and manifest.spec.hmac_secret_ref is not None:
            ref = manifest.spec.hmac_secret_ref
            refs["hmacSecret"] = (ref.name, ref.key, ("spec", "hmacSecretRef"))
        out: dict[str, str] = {}
        problems: list[Problem] = []
        for field_name, (secret, key, where) in refs.items():
            held = self.values.get((namespace, secret))
            if held is None:
                problems.append(
                    problem(
                        "secret.not_found",
                        f"no Secret '{secret}' in namespace {namespace}: add a v1 Secret "
                        f"document with stringData.{key} to the folder, or pass --secrets FILE",
                        *where,
                    )
                )
            elif key not in held:
                keys = ", ".join(sorted(held)) or "none"
                problems.append(
                    problem(
                        "secret.key.not_found",
                        f"Secret '{secret}' has no key '{key}' (it has: {keys})",
                        *where,
                    )
                )
            else:
                out[field_name] = held[key]
        return out, problems


def _decode(data: object) -> tuple[tuple[str, str], dict[str, str]] | Problem:
    assert isinstance(data, dict)
    meta = data.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        return problem("secret.name.missing", "a Secret needs metadata.name", "metadata", "name")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    values: dict[str, str] = {}
    raw = data.get("data") or {}
    text = data.get("stringData") or {}
    if not isinstance(raw, dict) or not isinstance(text, dict):
        return problem("secret.data.invalid", "data and stringData are maps of key to value")
    for key, value in raw.items():
        try:
            values[str(key)] = base64.b64decode(str(value), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return problem(
                "secret.data.invalid",
                "data values are base64 of UTF-8 text; use stringData for plain text",
                "data",
                str(key),
            )
    values.update({str(k): str(v) for k, v in text.items()})  # stringData wins, as in Kubernetes
    return (namespace if isinstance(namespace, str) else DEFAULT_NAMESPACE, name), values


def split_secrets(
    docs: Sequence[SourceDocument], extra: Iterable[SourceDocument] = ()
) -> tuple[list[SourceDocument], SecretStore, list[Problem]]:
    """The dirigent documents, and every Secret among ``docs`` and ``extra`` in one store."""
    store = SecretStore()
    problems: list[Problem] = []
    rest: list[SourceDocument] = []
    for doc in docs:
        if is_secret(doc.data):
            problems += store.add(doc)
        else:
            rest.append(doc)
    for doc in extra:
        if is_secret(doc.data):
            problems += store.add(doc)
    return rest, store, problems


def merged(stores: Mapping[str, SecretStore]) -> SecretStore:
    """One store from several (a folder's files), later files winning per key."""
    out = SecretStore()
    for name in sorted(stores):
        for key, values in stores[name].values.items():
            out.values.setdefault(key, {}).update(values)
    return out
