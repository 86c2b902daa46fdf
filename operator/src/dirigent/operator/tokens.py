"""Webhook tokens: minted once into a Secret ``<webhook>-token`` that the Webhook owns.

Invariants:
- the plaintext lives only in that Secret (for the Webhook's owner to read) and passes
  through the engine's apply, which stores its SHA-256 hash; it is never logged or written
  to status;
- a token is minted when the Secret or its key is missing, and replaced only when the
  annotation ``dirigent.dev/rotate-token`` is present; the caller clears the annotation
  after the engine holds the new hash, so a crash in between rotates again rather than
  leaving the engine and the Secret disagreeing;
- the Secret carries an owner reference to the Webhook, so deleting the Webhook deletes it;
- a Secret of that name that this Webhook does not own is never adopted or overwritten
  (``TokenSecretNotOwned``: the Webhook's status says so): otherwise anyone who may create a
  Webhook could have the operator overwrite any ``<name>-token`` Secret in the namespace;
- a token Secret whose value is not text is refused the same way, never a crash loop.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from .kube import Kube, ObjectRef

__all__ = [
    "ROTATE_ANNOTATION",
    "TOKEN_KEY",
    "Token",
    "TokenSecretNotOwned",
    "ensure_token",
    "secret_name",
]

ROTATE_ANNOTATION = "dirigent.dev/rotate-token"
TOKEN_KEY = "token"
_TOKEN_BYTES = 32


@dataclass(frozen=True)
class Token:
    value: str
    rotated: bool
    minted: bool


class TokenSecretNotOwned(Exception):
    """The token Secret's name is taken by a Secret this Webhook does not own (or it holds
    something that is not a token); ``str()`` says which and what to do."""


def secret_name(webhook: str) -> str:
    return f"{webhook}-token"


def mint() -> str:
    """A fresh token: 32 random bytes, URL-safe (it is a path segment of /hooks/{token})."""
    return secrets.token_urlsafe(_TOKEN_BYTES)


async def ensure_token(kube: Kube, ref: ObjectRef, annotations: Mapping[str, str]) -> Token:
    """The Webhook's current token, minting or rotating it in its Secret first if needed."""
    name = secret_name(ref.name)
    found = await kube.secret(ref.namespace, name)
    rotate = ROTATE_ANNOTATION in annotations
    if found is None:
        token = mint()
        await kube.create_secret(ref.namespace, name, {TOKEN_KEY: token}, owner=ref)
        return Token(token, rotated=rotate, minted=True)
    if ref.uid not in found.owner_uids:
        raise TokenSecretNotOwned(
            f"Secret {name} exists in {ref.namespace} and is not owned by this Webhook: it is "
            "never adopted; delete or rename that Secret, or rename the Webhook"
        )
    if TOKEN_KEY in found.binary:
        raise TokenSecretNotOwned(f"Secret {name}: key {TOKEN_KEY} is not UTF-8 text")
    data = found.data
    if rotate or not data.get(TOKEN_KEY):
        token = mint()
        await kube.replace_secret_data(ref.namespace, name, {TOKEN_KEY: token})
        return Token(token, rotated=rotate, minted=not rotate)
    return Token(data[TOKEN_KEY], rotated=False, minted=False)
