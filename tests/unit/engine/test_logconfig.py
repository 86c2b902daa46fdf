"""Process logs keep tracebacks and never print a frame's local variables."""

from __future__ import annotations

import json
import logging

import pytest
import structlog

from dirigent.engine import configure_logging

SECRET = "s3cr3t-token-value-0042"


def _fail_holding_a_secret() -> None:
    token = SECRET  # a local a verbose traceback renderer would print
    raise RuntimeError(f"upstream refused ({len(token)} chars)")


@pytest.fixture(autouse=True)
def _reset_logging() -> None:
    yield
    structlog.reset_defaults()
    logging.getLogger().handlers[:] = []


def _log_failure() -> None:
    try:
        _fail_holding_a_secret()
    except RuntimeError:
        structlog.get_logger("dirigent.test").exception("step.failed", step="load")
        logging.getLogger("a_third_party_library").exception("foreign library failed")


def test_json_lines_carry_the_traceback_as_a_string(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json")
    _log_failure()
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [line["event"] for line in lines] == ["step.failed", "foreign library failed"]
    for line in lines:
        assert isinstance(line["exception"], str)
        assert "Traceback (most recent call last)" in line["exception"]
        assert "_fail_holding_a_secret" in line["exception"]
        assert "RuntimeError: upstream refused (23 chars)" in line["exception"]
        assert "exc_info" not in line
    assert lines[0]["step"] == "load"


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_no_format_prints_a_frames_local_variables(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(fmt)  # type: ignore[arg-type]
    _log_failure()
    err = capsys.readouterr().err
    assert "_fail_holding_a_secret" in err  # the traceback is there...
    assert SECRET not in err  # ...the local holding the secret is not
