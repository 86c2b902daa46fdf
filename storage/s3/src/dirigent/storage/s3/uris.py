"""``s3://bucket/key`` URIs: the grammar this backend serves.

The key is the URI's path after the bucket, taken literally (no percent-decoding), as the
AWS command line does: ``s3://data/in/a b.csv`` names the key ``in/a b.csv``. A prefix URI
may stop at the bucket (``s3://data``, ``s3://data/``). Bucket names follow S3's rules for
new buckets (3 to 63 lower-case letters, digits, dots and hyphens), so a typo is refused
here, before any request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from dirigent.sdk import StorageRefused

__all__ = ["SCHEME", "Location", "parse"]

SCHEME: Final = "s3"
_BUCKET: Final = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class Location:
    """A bucket and a key (or key prefix) inside it."""

    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"{SCHEME}://{self.bucket}/{self.key}"

    def sibling(self, key: str) -> Location:
        """Another key in the same bucket."""
        return Location(self.bucket, key)


def parse(uri: str, *, object_key: bool = True) -> Location:
    """The bucket and key of ``uri``; ``object_key=False`` allows an empty key (a prefix)."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme != SCHEME:
        raise StorageRefused(f"{uri}: only {SCHEME}:// URIs are served by the S3 backend")
    bucket, _, key = rest.partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise StorageRefused(f"{uri}: {bucket!r} is not a valid S3 bucket name")
    if object_key and (not key or key.endswith("/")):
        raise StorageRefused(f"{uri}: names a prefix, not an object (no key after the bucket)")
    return Location(bucket, key)
