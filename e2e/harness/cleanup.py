"""Remove what a killed dirigent operator leaves in a cluster.

Why: the operator registers its own admission webhook configurations. If it dies without
cleaning up, a configuration with failurePolicy=Fail points at a server that is gone and
every later matching request is refused, so one crashed test poisons the rest. Everything
named ``dirigent*`` is ours by convention and safe to delete between test sessions.
"""

from __future__ import annotations

from typing import Any

WEBHOOK_PREFIX = "dirigent"


def delete_dirigent_webhook_configurations(
    api_client: Any, prefix: str = WEBHOOK_PREFIX
) -> list[str]:
    """Delete Validating/MutatingWebhookConfigurations whose name starts with ``prefix``.

    Returns ``kind/name`` of each deleted object. ``api_client`` is a
    ``kubernetes.client.ApiClient``.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    adm: Any = client.AdmissionregistrationV1Api(api_client)
    kinds = (
        (
            "ValidatingWebhookConfiguration",
            adm.list_validating_webhook_configuration,
            adm.delete_validating_webhook_configuration,
        ),
        (
            "MutatingWebhookConfiguration",
            adm.list_mutating_webhook_configuration,
            adm.delete_mutating_webhook_configuration,
        ),
    )
    deleted: list[str] = []
    for kind, list_fn, delete_fn in kinds:
        for item in list_fn().items:
            name = item.metadata.name
            if not name.startswith(prefix):
                continue
            try:
                delete_fn(name)
            except ApiException as exc:
                if exc.status != 404:  # gone already: someone else cleaned up
                    raise
            deleted.append(f"{kind}/{name}")
    return deleted
