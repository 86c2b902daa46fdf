"""dirigent.storage.s3 -- the ``s3://`` storage backend (a plugin; imports only dirigent.sdk).

``S3Backend`` serves the scheme, ``S3ConnectionKind`` is the Connection kind ``s3`` whose
settings (``S3Settings``) open it. To use a store directly, ``client.open_store`` opens an
``S3Store`` (``store``) from explicit settings, or from the standard ``AWS_*`` environment
when given none; it is kept out of this module so that discovering the plugin stays cheap.
The README beside this package says why aiobotocore and how the storage contract is kept.
"""

from dirigent.storage.s3.backend import S3Backend, S3ConnectionKind
from dirigent.storage.s3.settings import S3Settings

__all__ = ["S3Backend", "S3ConnectionKind", "S3Settings"]
