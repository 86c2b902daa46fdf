"""The entry point: ``dirigent.plugins.v1`` → ``s3`` contributes the scheme and its kind."""

from __future__ import annotations

from dirigent.sdk import Contribution
from dirigent.storage.s3.backend import S3Backend, S3ConnectionKind


class S3Plugin:
    """Contributes the ``s3://`` storage backend and the ``s3`` connection kind."""

    def contribute(self) -> Contribution:
        return Contribution(storage_backends=[S3Backend()], connection_kinds=[S3ConnectionKind()])


plugin = S3Plugin()
