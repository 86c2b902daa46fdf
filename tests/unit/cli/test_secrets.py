"""Secret documents resolving secretKeyRefs: stringData and data, namespaces, located misses."""

from __future__ import annotations

import base64

from dirigent.cli.secrets import split_secrets
from dirigent.engine.shapes.manifests.connection import Connection
from dirigent.engine.shapes.manifests.loading import SourceDocument

CONNECTION = Connection.model_validate(
    {
        "apiVersion": "dirigent.dev/v1alpha1",
        "kind": "Connection",
        "metadata": {"name": "api"},
        "spec": {
            "type": "http",
            "secrets": {
                "token": {"name": "creds", "key": "token"},
                "user": {"name": "creds", "key": "user"},
            },
        },
    }
)


def secret(name: str, namespace: str | None = None, **body: object) -> SourceDocument:
    meta: dict[str, object] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return SourceDocument(
        "s.yaml", 0, {"apiVersion": "v1", "kind": "Secret", "metadata": meta, **body}
    )


def test_string_data_and_base64_data_both_resolve() -> None:
    encoded = base64.b64encode(b"alice").decode()
    other = SourceDocument("p.yaml", 0, {"kind": "Pipeline"})
    rest, store, problems = split_secrets(
        [other, secret("creds", stringData={"token": "t0k"}, data={"user": encoded})]
    )
    assert rest == [other] and problems == []
    values, missing = store.resolve(CONNECTION, "default")
    assert values == {"token": "t0k", "user": "alice"} and missing == []


def test_a_secret_in_another_namespace_does_not_count() -> None:
    _, store, _ = split_secrets([secret("creds", "team", stringData={"token": "a", "user": "b"})])
    values, missing = store.resolve(CONNECTION, "default")
    assert values == {}
    assert [(p.code, p.location) for p in missing] == [
        ("secret.not_found", "spec.secrets.token"),
        ("secret.not_found", "spec.secrets.user"),
    ]


def test_a_missing_key_names_the_keys_the_secret_has() -> None:
    _, store, _ = split_secrets([secret("creds", stringData={"token": "a"})])
    _, missing = store.resolve(CONNECTION, "default")
    assert [(p.code, p.location) for p in missing] == [
        ("secret.key.not_found", "spec.secrets.user")
    ]
    assert "it has: token" in missing[0].message


def test_data_that_is_not_base64_is_a_located_problem() -> None:
    _, _, problems = split_secrets([secret("creds", data={"token": "not base64!"})])
    assert [(p.code, p.location, p.file) for p in problems] == [
        ("secret.data.invalid", "data.token", "s.yaml")
    ]
