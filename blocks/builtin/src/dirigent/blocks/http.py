"""The ``http`` family: ``http.request`` (operator) and ``http.ready`` (sensor).

A step names either an absolute ``url``, or a ``connection`` of kind http plus a ``path``;
the connection brings the base URL, headers, auth, TLS verification and timeout, so a
document carries no credential. Error classes are honest: 5xx, 408, 425, 429 and timeouts
are transient, every other 4xx rejected. A 429 (or, for an idempotent method, a 503)
with a short ``Retry-After`` is waited out and asked once more inside the attempt, because
the server said when to come back; a longer one fails the attempt as transient with ``retry_after_s`` in its params.
Transport retries (a refused or reset connection before anything was sent) are made only
for idempotent methods, so a POST is never sent twice by us.

A connection's credentials stay with its host: ``path`` is resolved against the connection's
base URL, and a path that would leave it (an absolute URL, a scheme-relative ``//host``, or
anything whose resolved scheme, host or port differs) is refused (``http.path.host_change``)
at apply when the path is written out, else before anything is sent; a step that needs
another host names another connection. Redirects are never followed. No error, output or
log line carries the connection's secret values (the token, the password, the basic
credential as sent): they are redacted before a body is cut to its quoted length, and from
a body stored above ``maxInline`` as it streams (a later step could read it back).

The response body is read as a stream: up to ``maxInline`` it lands in the output (parsed
as ``json`` when it is JSON, else ``text``); above that the whole body goes to storage
under the attempt's scratch and the output carries its URI, so memory stays bounded.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Literal
from urllib.parse import urljoin, urlparse, urlsplit

import httpx
import jq
from pydantic import BaseModel, Field, JsonValue

from dirigent.blocks.base import Config, Output, has_reference
from dirigent.blocks.connections import HttpConnection
from dirigent.sdk import (
    BlockFailure,
    Duration,
    ErrorClass,
    Issue,
    Message,
    NotYet,
    Operator,
    OperatorSpec,
    Sensor,
    SensorSpec,
    Size,
    StepContext,
    classify_default,
    http_status_class,
    redact,
    redact_json,
    redacting,
)

__all__ = ["HttpReadySensor", "HttpRequestOperator"]

STATUS = Message("http.status", "{method} {url} answered {status}: {body}")
TIMEOUT = Message("http.timeout", "{method} {url} did not answer within {timeout}")
TRANSPORT = Message("http.transport", "{method} {url} failed before an answer: {error}")
TARGET_BOTH = Message(
    "http.target.ambiguous", "give either 'url' or 'connection' (with 'path'), not both"
)
TARGET_NONE = Message("http.target.missing", "give an absolute 'url', or a 'connection' and 'path'")
URL_RELATIVE = Message(
    "http.url.relative", "'{url}' is not an absolute http(s) URL; use 'connection' and 'path'"
)
HOST_CHANGE = Message(
    "http.path.host_change",
    "path '{path}' would leave connection '{connection}': a path is joined to the "
    "connection's base URL and cannot change its scheme, host or port; to reach another "
    "host, name another connection",
)
BODY_BOTH = Message("http.body.ambiguous", "give 'json' or 'body', not both")
CONDITION_INVALID = Message("http.condition.invalid", "condition does not compile: {error}")

Method = Literal["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
Scalar = str | int | float | bool


class Target(Config):
    """Where a request goes: an absolute URL, or a connection plus a path."""

    url: str | None = Field(default=None, description="Absolute http(s) URL.")
    connection: str | None = Field(default=None, description="Connection of kind http.")
    path: str = Field(default="", description="Joined to the connection's base URL.")
    query: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict, description="Added to the connection's.")
    timeout: Duration | None = Field(default=None, description="Default: the connection's, or 30s.")


def check_target(config: Target) -> list[Issue]:
    if config.url is not None and config.connection is not None:
        return [Issue.of(TARGET_BOTH, location=("url",))]
    if config.url is None and config.connection is None:
        return [Issue.of(TARGET_NONE)]
    if config.url is not None and not has_reference(config.url):
        parsed = urlparse(config.url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            return [Issue.of(URL_RELATIVE, location=("url",), url=config.url)]
    if config.connection is not None and not has_reference(config.path) and _leaves(config.path):
        return [
            Issue.of(
                HOST_CHANGE, location=("path",), path=config.path, connection=config.connection
            )
        ]
    return []


SCHEME_RELATIVE = re.compile(r"^\s*[/\\]{2}")
DEFAULT_PORTS = {"http": 80, "https": 443}


def _leaves(path: str) -> bool:
    """A path that names a host of its own: absolute (``https://x``) or scheme-relative."""
    try:
        netloc = urlsplit(path.strip()).netloc
    except ValueError:  # e.g. an unclosed "[" of an IPv6 host: it names a host, badly
        return True
    return bool(SCHEME_RELATIVE.match(path)) or bool(netloc)


def _origin(url: str) -> tuple[str, str, int | None]:
    parsed = httpx.URL(url)
    return parsed.scheme, parsed.host, parsed.port or DEFAULT_PORTS.get(parsed.scheme)


def resolve(base: str, path: str, connection: str) -> str:
    """``path`` joined under ``base``; refused (rejected) if the result leaves base's origin.

    A leading ``/`` stays under the base path (``/items`` on ``https://h/api`` is
    ``https://h/api/items``); a first segment with a colon (``documents:batchGet``) is a
    path, not a scheme.
    """
    if not path:
        return base
    refusal = BlockFailure(
        HOST_CHANGE, error_class=ErrorClass.REJECTED, path=path, connection=connection
    )
    if _leaves(path):
        raise refusal
    relative = path.lstrip("/")
    if ":" in relative.split("/", 1)[0]:
        relative = "./" + relative
    url = urljoin(base if base.endswith("/") else base + "/", relative)
    try:
        same = _origin(url) == _origin(base)
    except httpx.InvalidURL:
        same = False
    if not same:
        raise refusal
    return url


class Prepared:
    """A target resolved against its connection: the URL, headers, auth, TLS and timeout,
    and the secret values nothing this request reports may carry."""

    def __init__(self, config: Target, ctx: StepContext) -> None:
        conn = ctx.connection(config.connection, HttpConnection) if config.connection else None
        self.secrets: frozenset[str] = frozenset()
        if conn is not None:
            assert config.connection is not None
            self.url = resolve(conn.url, config.path, config.connection)
            self.headers = {**conn.all_headers(), **config.headers}
            self.auth = conn.auth()
            self.verify = conn.verify_tls
            self.secrets = conn.sent_secrets()
            timeout = config.timeout or conn.timeout
        else:
            assert config.url is not None
            self.url = config.url
            self.headers = dict(config.headers)
            self.auth = None
            self.verify = True
            timeout = config.timeout or Duration.of(seconds=30)
        self.timeout = timeout
        self.query = config.query

    def hide(self, text: str) -> str:
        """``text`` without this request's secret values."""
        return redact(text, self.secrets)

    @asynccontextmanager
    async def client(self, method: str) -> AsyncIterator[httpx.AsyncClient]:
        transport = httpx.AsyncHTTPTransport(
            verify=self.verify, retries=2 if method in IDEMPOTENT else 0
        )
        # follow_redirects stays off: a redirect is an answer, never a second request that
        # could carry the connection's credentials somewhere else.
        async with httpx.AsyncClient(
            transport=transport,
            timeout=self.timeout.total_seconds(),
            auth=self.auth,
            follow_redirects=False,
        ) as client:
            yield client


def failure_for(err: Exception, method: str, p: Prepared) -> BlockFailure:
    url = p.hide(p.url)
    if isinstance(err, httpx.TimeoutException):
        return BlockFailure(
            TIMEOUT, error_class=ErrorClass.TRANSIENT, method=method, url=url, timeout=p.timeout
        )
    return BlockFailure(
        TRANSPORT,
        error_class=ErrorClass.TRANSIENT,
        method=method,
        url=url,
        error=p.hide(repr(err)),
    )


class RequestConfig(Target):
    method: Method = "GET"
    json_body: JsonValue = Field(default=None, alias="json", description="Sent as JSON.")
    body: str | None = Field(default=None, description="Sent as is (text).")
    max_inline: Size = Field(
        default=Size(256 * 1024), description="Bodies above this go to storage, not the output."
    )
    max_retry_after: Duration = Field(
        default=Duration.of(seconds=30),
        description="A Retry-After up to this is waited out within the attempt.",
    )


class RequestOutput(Output):
    status: int
    headers: dict[str, str]
    json_body: JsonValue = Field(default=None, alias="json")
    text: str | None = None
    size: int = Field(description="Body size in bytes.")
    body_uri: str | None = Field(default=None, description="The whole body, when above maxInline.")
    elapsed_ms: int


class HttpRequestOperator(Operator[RequestConfig, RequestOutput]):
    """Sends one HTTP request and returns the answer."""

    spec: ClassVar[OperatorSpec] = OperatorSpec(
        id="http.request",
        summary="Send an HTTP request; output status, headers and body.",
        description="5xx, 408, 425, 429 and timeouts are transient; other 4xx rejected.",
    )
    config_model: ClassVar[type[BaseModel]] = RequestConfig
    output_model: ClassVar[type[BaseModel]] = RequestOutput

    def check_config(self, config: RequestConfig) -> list[Issue]:
        issues = check_target(config)
        if config.json_body is not None and config.body is not None:
            issues.append(Issue.of(BODY_BOTH, location=("json",)))
        return issues

    async def execute(self, config: RequestConfig, ctx: StepContext) -> RequestOutput:
        prepared = Prepared(config, ctx)
        started = time.monotonic()
        output = await self._send(config, prepared, ctx, started)
        # 429 means "not processed": asking again is safe for any method; a 503 only for
        # an idempotent one.
        if output.status == 429 or (output.status == 503 and config.method in IDEMPOTENT):
            wait = retry_after_from(output)
            if wait is not None and wait <= config.max_retry_after.total_seconds():
                ctx.log.info(f"{output.status}: waiting {wait}s as Retry-After asks")
                await asyncio.sleep(wait)
                output = await self._send(config, prepared, ctx, started)
        if output.status >= 400:
            raise self._status_failure(config.method, prepared, output)
        return output

    def _status_failure(self, method: str, p: Prepared, out: RequestOutput) -> BlockFailure:
        body = out.text if out.text is not None else json.dumps(out.json_body)
        return BlockFailure(
            STATUS,
            error_class=http_status_class(out.status),
            method=method,
            url=p.hide(p.url),
            status=out.status,
            body=p.hide(body or "")[:500],  # redacted whole, then cut: no half secret
            retry_after_s=retry_after_from(out),
        )

    async def _send(
        self, config: RequestConfig, p: Prepared, ctx: StepContext, started: float
    ) -> RequestOutput:
        kwargs: dict[str, Any] = {"params": p.query, "headers": p.headers}
        if config.json_body is not None:
            kwargs["json"] = config.json_body
        elif config.body is not None:
            kwargs["content"] = config.body.encode()
        try:
            async with (
                p.client(config.method) as client,
                client.stream(config.method, p.url, **kwargs) as response,
            ):
                output = await read_body(response, config.max_inline.bytes, ctx, started, p.secrets)
        except httpx.HTTPError as err:
            raise failure_for(err, config.method, p) from err
        if not p.secrets:
            return output
        # An answer echoing the request back (headers, a debug body) would put the
        # credential in the output, which every viewer of the run reads.
        shown = redact_json(output.model_dump(mode="json"), p.secrets)
        return RequestOutput.model_validate(shown)

    def classify_error(self, error: Exception) -> ErrorClass:
        if isinstance(error, httpx.TimeoutException | httpx.TransportError):
            return ErrorClass.TRANSIENT
        return classify_default(error)


def retry_after_from(output: RequestOutput) -> float | None:
    value = output.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None


async def read_body(
    response: httpx.Response,
    limit: int,
    ctx: StepContext,
    started: float,
    secrets: frozenset[str] = frozenset(),
) -> RequestOutput:
    """Up to ``limit`` bytes inline; beyond that, the whole body streamed to storage (with
    ``secrets`` redacted: what is stored, a later step can read into its output)."""
    head = bytearray()
    body_uri: str | None = None
    size = 0
    chunks = response.aiter_bytes()

    async def whole() -> AsyncIterator[bytes]:
        nonlocal size
        yield bytes(head)
        async for more in chunks:
            size += len(more)
            yield more

    async for chunk in chunks:
        head += chunk
        size += len(chunk)
        if len(head) > limit:
            body_uri = f"{ctx.scratch}/steps/{ctx.step}/{ctx.attempt_id}/body"
            async with ctx.storage.open_write(body_uri, _content_type(response)) as writer:
                async for piece in redacting(whole(), secrets):
                    await writer.write(piece)
            break
    headers = {k.lower(): v for k, v in response.headers.items()}
    out: dict[str, Any] = {
        "status": response.status_code,
        "headers": headers,
        "size": size,
        "body_uri": body_uri,
        "elapsed_ms": int((time.monotonic() - started) * 1000),
    }
    if secrets:  # before the cut below: a secret cut in half is no longer found
        text = redact(bytes(head).decode("utf-8", "surrogateescape"), secrets)
        head = bytearray(text.encode("utf-8", "surrogateescape"))
    inline = bytes(head[:limit])
    if body_uri is None and "json" in _content_type(response):
        try:
            out["json"] = json.loads(inline) if inline else None
        except ValueError:
            out["text"] = inline.decode("utf-8", errors="replace")
    elif inline or body_uri is None:
        out["text"] = inline.decode(response.encoding or "utf-8", errors="replace")
    return RequestOutput.model_validate(out)


def _content_type(response: httpx.Response) -> str:
    value: str = response.headers.get("content-type", "application/octet-stream")
    return value.split(";")[0]


class ReadyConfig(Target):
    status: list[int] = Field(default_factory=lambda: [200], description="Statuses that count.")
    condition: str | None = Field(
        default=None, description="A jq program over the JSON body that must yield true."
    )


class ReadyOutput(Output):
    status: int
    json_body: JsonValue = Field(default=None, alias="json")


class HttpReadySensor(Sensor[ReadyConfig, ReadyOutput]):
    """Waits until a URL answers with an expected status (and a JSON condition holds)."""

    spec: ClassVar[SensorSpec] = SensorSpec(
        id="http.ready",
        summary="Wait until a URL answers with a status (and a jq condition on its JSON).",
        default_poll=Duration.of(seconds=10),
    )
    config_model: ClassVar[type[BaseModel]] = ReadyConfig
    output_model: ClassVar[type[BaseModel]] = ReadyOutput

    def check_config(self, config: ReadyConfig) -> list[Issue]:
        issues = check_target(config)
        if config.condition is not None and not has_reference(config.condition):
            try:
                jq.compile(config.condition)
            except ValueError as err:
                issues.append(Issue.of(CONDITION_INVALID, location=("condition",), error=str(err)))
        return issues

    async def poke(self, config: ReadyConfig, ctx: StepContext) -> ReadyOutput | NotYet:
        p = Prepared(config, ctx)
        shown = p.hide(p.url)
        try:
            async with p.client("GET") as client:
                response = await client.get(p.url, params=p.query, headers=p.headers)
        except httpx.HTTPError as err:
            return NotYet(message=f"waiting for {shown}: not answering ({type(err).__name__})")
        if response.status_code not in config.status:
            return NotYet(message=f"waiting for {shown}: answered {response.status_code}")
        try:
            body: JsonValue = response.json() if response.content else None
        except ValueError:
            body = None
        if config.condition is not None and not _holds(config.condition, body, p):
            return NotYet(message=f"waiting for {shown}: condition does not hold yet")
        body = redact_json(body, p.secrets)
        return ReadyOutput.model_validate({"status": response.status_code, "json": body})


def _holds(condition: str, body: JsonValue, p: Prepared) -> bool:
    try:
        return jq.compile(condition).input_value(body).first() is True
    except (ValueError, StopIteration) as err:
        # jq's message can quote the value it choked on, a piece of the body.
        raise BlockFailure(
            CONDITION_INVALID, error_class=ErrorClass.REJECTED, error=p.hide(str(err))
        ) from err
