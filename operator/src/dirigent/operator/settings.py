"""Operator settings, read from ``DIRIGENT_OPERATOR_*`` environment variables.

Why a model of its own: the engine's settings (database, secret key, metrics port) come from
``EngineSettings``; what only the operator needs — where admission listens, the Lease that
elects one active instance, how often status is resynced — lives here, built once by
``dirigent operator`` and passed down (no global instance).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["OperatorSettings"]


class OperatorSettings(BaseSettings):
    """Everything ``dirigent operator`` needs beyond the engine's settings."""

    model_config = SettingsConfigDict(env_prefix="DIRIGENT_OPERATOR_", extra="ignore", frozen=True)

    namespaces: list[str] = Field(
        default_factory=list, description="Namespaces to watch; empty means the whole cluster."
    )
    admission: bool = Field(default=True, description="Serve the validating admission webhook.")
    admission_addr: str = Field(default="127.0.0.1", description="Address the webhook binds.")
    admission_port: int = Field(default=9443, ge=0, le=65535)
    admission_host: str | None = Field(
        default=None,
        description="Hostname the apiserver dials (a Service DNS name in a cluster); "
        "defaults to the bind address.",
    )
    admission_cert_dir: Path = Field(
        default=Path("./.dirigent/operator-certs"),
        description="Where the self-signed serving certificate is written.",
    )
    webhook_configuration: str = Field(
        default="dirigent.dev",
        description="Name of the ValidatingWebhookConfiguration the operator manages.",
    )
    lease_namespace: str = Field(default="default", description="Namespace of the leader Lease.")
    lease_name: str = "dirigent-operator"
    lease_seconds: float = Field(default=15.0, gt=0, description="How long a lease is held.")
    renew_seconds: float = Field(default=5.0, gt=0, description="How often the holder renews.")
    renew_deadline_seconds: float | None = Field(
        default=None,
        gt=0,
        description="A holder that has not renewed for this long stops leading; shorter than "
        "lease_seconds, so it stops before a standby may take the Lease (default: two thirds "
        "of lease_seconds).",
    )
    kube_timeout_seconds: float = Field(
        default=10.0, gt=0, description="Deadline of every call the operator makes to Kubernetes."
    )
    identity: str | None = Field(default=None, description="This instance's name in the Lease.")
    resync_seconds: float = Field(
        default=60.0, gt=0, description="Full status resync from the engine, beside events."
    )
    health_check_seconds: float = Field(
        default=300.0, gt=0, description="How often a Connection's check() runs."
    )
    health_check_timeout: float = Field(
        default=10.0, gt=0, description="How long one check() may take before it is Unhealthy."
    )
    hook_base_path: str = Field(default="/hooks", description="Path prefix of webhook URLs.")

    @property
    def renew_deadline(self) -> float:
        given = self.renew_deadline_seconds
        return given if given is not None else self.lease_seconds * 2 / 3

    @model_validator(mode="after")
    def _deadline_before_expiry(self) -> OperatorSettings:
        if not self.renew_seconds < self.renew_deadline < self.lease_seconds:
            raise ValueError(
                "renew_seconds < renew_deadline_seconds < lease_seconds must hold: a holder "
                "that cannot renew must stop leading before its Lease can be taken"
            )
        return self
