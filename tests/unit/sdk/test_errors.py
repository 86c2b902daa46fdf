"""Messages, BlockFailure, Issue and the default error classification."""

from __future__ import annotations

import errno
import pickle
import socket

import pytest
from pydantic import ValidationError

from dirigent.sdk import (
    BlockFailure,
    ErrorClass,
    Issue,
    Message,
    classify_default,
    http_status_class,
    json_safe,
)

HTTP_STATUS = Message("http.status", "{method} {url} answered {status}")


def test_message_renders_and_tolerates_missing_params() -> None:
    assert HTTP_STATUS.render(method="GET", url="u", status=503) == "GET u answered 503"
    assert HTTP_STATUS.render(status=503) == "{method} {url} answered 503"
    assert Message("a.b", "{x:d}").render(x="not a number") == "not a number"
    assert Message("a.b", "broken {").render() == "broken {"
    assert Message("a.b", "{x.y}").render() == "{x.y}"


@pytest.mark.parametrize("code", ["status", "Http.status", "http..status", "http.", ""])
def test_message_codes_are_dotted(code: str) -> None:
    with pytest.raises(ValueError, match="dotted snake_case"):
        Message(code, "x")


def test_block_failure_carries_code_message_params() -> None:
    failure = BlockFailure(
        HTTP_STATUS, error_class=ErrorClass.TRANSIENT, method="GET", url="http://x", status=503
    )
    assert failure.code == "http.status"
    assert failure.message == "GET http://x answered 503"
    assert str(failure) == failure.message
    assert failure.params == {"method": "GET", "url": "http://x", "status": 503}
    assert failure.error_class is ErrorClass.TRANSIENT
    assert failure.source is HTTP_STATUS
    assert classify_default(failure) is ErrorClass.TRANSIENT
    assert "http.status" in repr(failure)


def test_block_failure_defaults_and_coercion() -> None:
    failure = BlockFailure(HTTP_STATUS, method=b"GET", url=("a", 1), status=float("nan"))
    assert failure.error_class is ErrorClass.UNKNOWN
    assert failure.params == {"method": "b'GET'", "url": ["a", 1], "status": "nan"}


def test_block_failure_pickles() -> None:
    failure = BlockFailure(HTTP_STATUS, error_class=ErrorClass.REJECTED, status=404)
    copy = pickle.loads(pickle.dumps(failure))
    assert (copy.code, copy.message, copy.params, copy.error_class) == (
        failure.code,
        failure.message,
        failure.params,
        failure.error_class,
    )


def test_json_safe() -> None:
    assert json_safe({"a": [1, 2.5, None, True], 3: {"b": object}}) == {
        "a": [1, 2.5, None, True],
        "3": {"b": str(object)},
    }


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (TimeoutError(), ErrorClass.TRANSIENT),
        (ConnectionRefusedError(), ErrorClass.TRANSIENT),
        (ConnectionResetError(), ErrorClass.TRANSIENT),
        (BrokenPipeError(), ErrorClass.TRANSIENT),
        (OSError(errno.EHOSTUNREACH, "no route"), ErrorClass.TRANSIENT),
        (OSError(errno.ENOENT, "missing"), ErrorClass.UNKNOWN),
        (socket.gaierror(socket.EAI_AGAIN, "try again"), ErrorClass.TRANSIENT),
        (socket.gaierror(socket.EAI_NONAME, "no such host"), ErrorClass.UNKNOWN),
        (PermissionError(), ErrorClass.REJECTED),
        (NotImplementedError(), ErrorClass.REJECTED),
        (ValueError(), ErrorClass.UNKNOWN),
        (TypeError(), ErrorClass.UNKNOWN),
        (KeyError("k"), ErrorClass.UNKNOWN),
        (RuntimeError(), ErrorClass.UNKNOWN),
    ],
)
def test_classify_default_table(error: BaseException, expected: ErrorClass) -> None:
    assert classify_default(error) is expected


def test_classify_default_pydantic_validation_is_unknown() -> None:
    with pytest.raises(ValidationError) as info:
        Issue(code=1, message="x")
    assert classify_default(info.value) is ErrorClass.UNKNOWN


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, ErrorClass.UNKNOWN),
        (400, ErrorClass.REJECTED),
        (401, ErrorClass.REJECTED),
        (404, ErrorClass.REJECTED),
        (408, ErrorClass.TRANSIENT),
        (429, ErrorClass.TRANSIENT),
        (500, ErrorClass.TRANSIENT),
        (503, ErrorClass.TRANSIENT),
    ],
)
def test_http_status_class(status: int, expected: ErrorClass) -> None:
    assert http_status_class(status) is expected


def test_error_class_values_are_stable() -> None:
    assert [c.value for c in ErrorClass] == ["transient", "rejected", "unknown"]


def test_issue_of_message() -> None:
    bad_url = Message("http.bad_url", "{url!r} is not an absolute URL")
    issue = Issue.of(bad_url, location=("url",), url="example")
    assert issue.code == "http.bad_url"
    assert issue.message == "'example' is not an absolute URL"
    assert issue.params == {"url": "example"}
    assert issue.location == ("url",)
    assert issue.model_dump(mode="json")["location"] == ["url"]
    with pytest.raises(ValidationError):
        issue.code = "x"  # type: ignore[misc]
