"""From botocore's exceptions to the SDK's storage errors, sorted by what a caller can do.

Why here and once: botocore raises dozens of exception types and error codes; blocks, the
artifact store and the API understand four (``dirigent.sdk.storage``). Retrying is done
before anything reaches this module (botocore's ``standard`` mode retries throttling, 5xx,
timeouts and dropped connections with jittered backoff; ``reading`` resumes a dropped
stream), so what arrives here is final:

=====================================================  =======================
botocore says                                          the caller gets
=====================================================  =======================
404, ``NoSuchKey``, ``NotFound``                       ``ObjectNotFound``
``NoSuchBucket``                                       ``StorageRefused`` (set-up, not data)
403, ``AccessDenied``, bad key or signature,           ``StorageRefused``
no credentials
416, ``InvalidRange``                                  ``InvalidRange``
cannot connect, timeouts, closed connections, 5xx,     ``StorageUnavailable``
throttling (all after their retries)
anything else                                          ``StorageError``
=====================================================  =======================

Messages name the URI and the endpoint and the server's error code; never a credential.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore import exceptions as boto

from dirigent.sdk import (
    InvalidRange,
    ObjectNotFound,
    StorageError,
    StorageRefused,
    StorageUnavailable,
)

__all__ = ["error_code", "translate", "translating"]

_NOT_FOUND = frozenset({"NoSuchKey", "NotFound", "404", "NoSuchUpload"})
_DENIED = frozenset(
    {
        "AccessDenied",
        "403",
        "Forbidden",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "AllAccessDisabled",
        "AccountProblem",
    }
)
_UNAVAILABLE = frozenset(
    {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling"}
)


def error_code(err: boto.ClientError) -> tuple[str, int]:
    """The S3 error code (the HTTP status as text when the body had none) and the status."""
    response: Any = err.response
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    code = str(response.get("Error", {}).get("Code") or status)
    return code, status


def translate(err: Exception, uri: str, where: str) -> StorageError:
    """The storage error for ``err``, raised while working on ``uri`` at ``where``."""
    if isinstance(err, boto.ClientError):
        code, status = error_code(err)
        if code == "NoSuchBucket":
            return StorageRefused(f"{uri}: the bucket does not exist at {where}")
        if code in _NOT_FOUND or status == 404:
            return ObjectNotFound(f"{uri} does not exist")
        if code in _DENIED or status == 403:
            return StorageRefused(f"{uri}: access denied by {where} ({code})")
        if code == "InvalidRange" or status == 416:
            return InvalidRange(f"{uri}: the requested range is past the object's end")
        if code in _UNAVAILABLE or status >= 500:
            return StorageUnavailable(f"{uri}: {where} answered {code} after retries")
        return StorageError(f"{uri}: {where} refused the request ({code}, HTTP {status})")
    if isinstance(err, boto.NoCredentialsError | boto.PartialCredentialsError):
        return StorageRefused(
            f"{uri}: no S3 credentials: name a Connection of kind s3, or set AWS_ACCESS_KEY_ID "
            "and AWS_SECRET_ACCESS_KEY (or a web identity) in the environment"
        )
    if isinstance(err, boto.CredentialRetrievalError):
        return StorageRefused(
            f"{uri}: the ambient identity gave no credentials ({type(err).__name__})"
        )
    if isinstance(err, boto.HTTPClientError | boto.ConnectionError | TimeoutError | OSError):
        return StorageUnavailable(f"{uri}: {where} is unreachable ({_reason(err)})")
    if isinstance(err, boto.ChecksumError):
        return StorageError(f"{uri}: the checksum of the data from {where} does not match")
    return StorageError(f"{uri}: {type(err).__name__} talking to {where}")


def _reason(err: Exception) -> str:
    if isinstance(err, boto.EndpointConnectionError):
        return "could not connect"
    if isinstance(err, boto.ConnectTimeoutError):
        return "connect timed out"
    if isinstance(err, boto.ReadTimeoutError | TimeoutError):
        return "read timed out"
    return f"connection failed: {type(err).__name__}"


@contextmanager
def translating(uri: str, where: str) -> Iterator[None]:
    """Re-raise botocore's (and the network's) exceptions as storage errors."""
    try:
        yield
    except StorageError:
        raise
    except (boto.BotoCoreError, boto.ClientError, OSError, TimeoutError) as err:
        raise translate(err, uri, where) from err
