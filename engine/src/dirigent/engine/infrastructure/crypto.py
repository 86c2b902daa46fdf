"""Sealing connection secret fields at rest (AES-256-GCM).

Why: the operator copies secret fields from Kubernetes Secrets into the database so workers
need no access to Secrets; a database dump or backup must not give those values away.

Format of a sealed value (base64 of the bytes)::

    version (1 byte, 0x01) | key id (8 bytes) | nonce (12 bytes, random) | ciphertext + tag

- The nonce is random per value. With 96-bit random nonces the collision bound is far
  beyond the number of secrets one key will ever seal.
- The associated data binds a value to (namespace, connection name, field): a ciphertext
  copied into another row or field fails to open, even under the right key.
- The key id (derived from the key, not the key itself) turns "wrong key" into a precise
  error instead of a bare authentication failure, and lets older keys be supplied for
  opening while values are re-sealed under a new one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

if TYPE_CHECKING:
    from dirigent.engine.infrastructure.settings import EngineSettings

__all__ = ["SealError", "SecretSealer", "WrongKeyError", "key_id"]

_VERSION: Final = 1
_KEY_ID_BYTES: Final = 8
_NONCE_BYTES: Final = 12
_HEADER: Final = 1 + _KEY_ID_BYTES + _NONCE_BYTES
_AAD_PREFIX: Final = b"dirigent/connection-secret/v1\n"


class SealError(ValueError):
    """A sealed value cannot be opened: malformed, moved to another row, or tampered with."""


class WrongKeyError(SealError):
    """The value was sealed under a key this sealer does not hold."""


def key_id(key: bytes) -> bytes:
    """A non-secret fingerprint of `key` (HMAC, so it reveals nothing usable about the key)."""
    return hmac.digest(key, b"dirigent key id", hashlib.sha256)[:_KEY_ID_BYTES]


def _associated_data(namespace: str, connection: str, field: str) -> bytes:
    # JSON array: unambiguous for any strings, so ("a", "b/c") never equals ("a/b", "c").
    return _AAD_PREFIX + json.dumps([namespace, connection, field]).encode()


class SecretSealer:
    """Seals and opens connection secret fields with one current key (and optional old ones)."""

    def __init__(self, key: bytes, *, old_keys: Iterable[bytes] = ()) -> None:
        keys = [key, *old_keys]
        for k in keys:
            if len(k) != 32:
                raise ValueError(f"an AES-256 key is 32 bytes, got {len(k)}")
        self._current = key_id(key)
        self._ciphers = {key_id(k): AESGCM(k) for k in reversed(keys)}

    @classmethod
    def from_settings(cls, settings: EngineSettings) -> SecretSealer:
        """The sealer for `DIRIGENT_SECRET_KEY`; a clear error when it is unset."""
        return cls(settings.secret_key_bytes())

    def seal(self, plaintext: str, *, namespace: str, connection: str, field: str) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._ciphers[self._current].encrypt(
            nonce, plaintext.encode(), _associated_data(namespace, connection, field)
        )
        return base64.b64encode(bytes([_VERSION]) + self._current + nonce + sealed).decode()

    def open(self, sealed: str, *, namespace: str, connection: str, field: str) -> str:
        where = f"secret field {field!r} of connection {namespace}/{connection}"
        try:
            raw = base64.b64decode(sealed, validate=True)
        except (binascii.Error, ValueError):
            raise SealError(f"{where} is not a sealed value (bad base64)") from None
        if len(raw) < _HEADER + 16 or raw[0] != _VERSION:
            raise SealError(f"{where} is not a sealed value (unknown format)")
        kid, nonce, body = (
            raw[1 : 1 + _KEY_ID_BYTES],
            raw[1 + _KEY_ID_BYTES : _HEADER],
            raw[_HEADER:],
        )
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise WrongKeyError(
                f"{where} was sealed with a different DIRIGENT_SECRET_KEY (key id {kid.hex()}; "
                f"this process has {self._current.hex()}); set the key it was sealed with"
            )
        try:
            return cipher.decrypt(
                nonce, body, _associated_data(namespace, connection, field)
            ).decode()
        except InvalidTag:
            raise SealError(
                f"{where} does not open: it was sealed for another connection or field, "
                f"or it was altered"
            ) from None

    def needs_reseal(self, sealed: str) -> bool:
        """True when `sealed` is under an old key (re-seal it with the current one)."""
        try:
            raw = base64.b64decode(sealed, validate=True)
        except (binascii.Error, ValueError):
            return True
        return raw[1 : 1 + _KEY_ID_BYTES] != self._current

    def seal_fields(
        self, fields: Mapping[str, str], *, namespace: str, connection: str
    ) -> dict[str, str]:
        """Seal every field of a connection: the value of `connections.secrets`."""
        return {
            name: self.seal(value, namespace=namespace, connection=connection, field=name)
            for name, value in fields.items()
        }

    def open_fields(
        self, sealed: Mapping[str, str], *, namespace: str, connection: str
    ) -> dict[str, str]:
        return {
            name: self.open(value, namespace=namespace, connection=connection, field=name)
            for name, value in sealed.items()
        }
