"""What opens an S3 store: explicit settings (a Connection of kind ``s3``) or the ambient ones.

Why one model for both: a Connection's fields and the backend's ``config_model`` are the
same shape, so an installation moves from ambient identity to a named Connection without
learning new names. ``resolve`` fills what a setting leaves open from the standard
environment, the way every AWS SDK does, so ``make s3-up``'s exports (``AWS_ENDPOINT_URL``,
``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``) are enough for
``dirigent run --local`` to reach the server with no Connection at all.

Credentials: explicit key and secret when both are set; otherwise botocore's provider chain
(environment, web identity token via ``AWS_WEB_IDENTITY_TOKEN_FILE`` + ``AWS_ROLE_ARN``,
shared config files, container and instance roles). Neither is ever logged or put in an
error message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from dirigent.sdk import Size

__all__ = ["MAX_PARTS", "MIN_PART_SIZE", "ResolvedSettings", "S3Settings", "resolve"]

MIN_PART_SIZE = 5 * 1024 * 1024
"""S3's smallest part (all but the last); also the largest object sent in one PUT."""
MAX_PARTS = 10_000
SINGLE_COPY_LIMIT = 5 * 1024**3
"""S3's largest single-request copy; larger objects are copied part by part."""
DEFAULT_REGION = "us-east-1"


class S3Settings(BaseModel):
    """How to reach an S3-compatible store; every field may be left to the environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^/\s]+/?$",
        description="Endpoint such as http://127.0.0.1:8333; default: AWS_ENDPOINT_URL_S3, "
        "AWS_ENDPOINT_URL, else AWS itself.",
    )
    region: str | None = Field(
        default=None, description="Default: AWS_REGION, AWS_DEFAULT_REGION, else us-east-1."
    )
    path_style: bool | None = Field(
        default=None,
        description="Bucket in the path rather than the host name; default: on when an "
        "endpoint is set (most S3-compatible servers), off for AWS.",
    )
    access_key_id: str | None = Field(default=None, description="With secret_access_key.")
    secret_access_key: SecretStr | None = Field(default=None)
    session_token: SecretStr | None = Field(default=None)
    bucket: str | None = Field(
        default=None, description="The bucket a connection check looks at (URIs name theirs)."
    )
    part_size: Size = Field(
        default=Size(8 * 1024 * 1024),
        description="Multipart part size, at least 5mb: memory per part in flight.",
    )
    max_concurrency: int = Field(default=2, ge=1, le=16, description="Parts in flight per write.")
    max_attempts: int = Field(
        default=5, ge=1, le=20, description="Attempts per request (throttling, 5xx, dropped)."
    )
    connect_timeout: float = Field(default=10.0, gt=0)
    read_timeout: float = Field(default=60.0, gt=0)
    checksum: Literal["CRC32", "CRC32C", "SHA1", "SHA256"] = Field(
        default="CRC32", description="Checksum sent with every upload and part; S3 verifies it."
    )
    copy_part_threshold: Size = Field(
        default=Size(SINGLE_COPY_LIMIT),
        description="Server-side copies above this go part by part (UploadPartCopy).",
    )

    @model_validator(mode="after")
    def _key_pairs(self) -> Self:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("access_key_id and secret_access_key are set together or not at all")
        if self.session_token is not None and self.access_key_id is None:
            raise ValueError("session_token needs access_key_id and secret_access_key")
        if self.part_size.bytes < MIN_PART_SIZE:
            raise ValueError(f"part_size must be at least {Size(MIN_PART_SIZE)}")
        if self.copy_part_threshold.bytes > SINGLE_COPY_LIMIT:
            raise ValueError(f"copy_part_threshold is at most {Size(SINGLE_COPY_LIMIT)}")
        return self


@dataclass(frozen=True)
class ResolvedSettings:
    """The settings with the environment's answers filled in; what the client is built from."""

    settings: S3Settings
    endpoint_url: str | None
    region: str
    path_style: bool

    @property
    def where(self) -> str:
        """The endpoint for messages: never a credential."""
        return self.endpoint_url or f"AWS S3 ({self.region})"


def resolve(
    settings: S3Settings | None, environ: Mapping[str, str] | None = None
) -> ResolvedSettings:
    """Fill endpoint, region and addressing style from ``environ`` (default: the process's)."""
    env = os.environ if environ is None else environ
    chosen = settings or S3Settings()
    endpoint = (
        chosen.endpoint_url or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
    )
    region = (
        chosen.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    )
    path_style = chosen.path_style if chosen.path_style is not None else endpoint is not None
    return ResolvedSettings(
        settings=chosen,
        endpoint_url=endpoint.rstrip("/") if endpoint else None,
        region=region,
        path_style=path_style,
    )
