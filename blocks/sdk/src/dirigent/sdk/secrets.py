"""Secrets out of text: redact known secret values, describe a refusal without its input.

Why here: a secret is opened in one place (``ctx.connection``) but can surface in many (a
block's error, a server echoing a header back in an error body, a health check's message,
pydantic's error text, which quotes the input it refused). Whoever writes text a person
will read — a block, the engine recording an attempt, the operator writing an Event — can
remove the values it knows to be secret with ``redact`` and describe a model refusal with
``validation_summary``, which never quotes the input.

Invariants:

* ``redact`` replaces every occurrence of every non-empty secret, longest first (so a secret
  containing another is replaced whole), and also the forms a secret takes when it travels:
  percent-encoded (a URL, a form body) and JSON-escaped (a JSON body echoing it back).
* Redact before truncating: a secret cut in half by ``text[:500]`` is no longer found.
  ``redacting`` does the same for a stream of bytes, holding back just enough of each chunk
  that a secret split across two chunks is still found.
* ``validation_summary`` uses locations and pydantic's messages only; it never reads an
  error's ``input`` or ``ctx`` (a refused ``SecretStr`` or a whole refused dict lands there).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from urllib.parse import quote, quote_plus

from pydantic import BaseModel, JsonValue, SecretStr, ValidationError

__all__ = [
    "REDACTED",
    "redact",
    "redact_json",
    "redacting",
    "secret_values",
    "validation_summary",
]

REDACTED = "[redacted]"


def _forms(secret: str) -> set[str]:
    """The spellings of ``secret`` that text can carry: as is, percent- and JSON-escaped."""
    return {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1]}


def _all_forms(secrets: Iterable[str]) -> list[str]:
    found: set[str] = set()
    for secret in secrets:
        if secret:
            found |= _forms(secret)
    return sorted(found, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every known secret value (and its escaped forms) replaced by REDACTED."""
    for form in _all_forms(secrets):
        text = text.replace(form, REDACTED)
    return text


async def redacting(chunks: AsyncIterable[bytes], secrets: Iterable[str]) -> AsyncIterator[bytes]:
    """``chunks`` with every secret form (UTF-8) replaced, as a stream.

    The last ``longest form - 1`` bytes of what has arrived are held back until more comes
    (or the stream ends), so a secret split across chunks is replaced whole.
    """
    forms = [f.encode() for f in _all_forms(secrets)]
    mark = REDACTED.encode()
    keep = max((len(f) for f in forms), default=1) - 1
    pending = b""
    async for chunk in chunks:
        pending += chunk
        for form in forms:
            pending = pending.replace(form, mark)
        if len(pending) > keep:
            cut = len(pending) - keep
            yield pending[:cut]
            pending = pending[cut:]
    if pending:
        yield pending


def redact_json(value: JsonValue, secrets: Iterable[str]) -> JsonValue:
    """``redact`` through JSON data: every string, keys included, at any depth."""
    forms = _all_forms(secrets)
    return _walk(value, forms) if forms else value


def _walk(value: JsonValue, forms: list[str]) -> JsonValue:
    if isinstance(value, str):
        for form in forms:
            value = value.replace(form, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {str(_walk(k, forms)): _walk(v, forms) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, forms) for v in value]
    return value


def secret_values(model: BaseModel) -> frozenset[str]:
    """Every opened ``SecretStr`` value in ``model``, nested models and containers included."""
    found: set[str] = set()
    _collect(model, found)
    return frozenset(v for v in found if v)


def _collect(value: object, found: set[str]) -> None:
    if isinstance(value, SecretStr):
        found.add(value.get_secret_value())
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            _collect(getattr(value, name), found)
    elif isinstance(value, Mapping):
        for item in value.values():
            _collect(item, found)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _collect(item, found)


def validation_summary(error: ValidationError, secrets: Iterable[str] = ()) -> str:
    """``loc: message; ...`` for each problem, never quoting the refused input.

    ``secrets``, when given, are also redacted from the messages, for a validator whose own
    message quotes a value.
    """
    parts = []
    for problem in error.errors(include_url=False, include_input=False, include_context=False):
        where = ".".join(str(p) for p in problem["loc"]) or "(the whole value)"
        parts.append(f"{where}: {problem['msg']}")
    return redact("; ".join(parts), secrets)
