"""``replying``: the one place a client command's records and one-line errors come from."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import typer
import yaml

from dirigent.api.models import RunCreatedView
from dirigent.cli import listing, replying
from dirigent.cli.replying import Format
from dirigent.engine.problems import Problem

CREATED = RunCreatedView(run_id=7, status="queued", created=True)


def test_json_is_one_record_per_line_with_a_kind(capsys: pytest.CaptureFixture[str]) -> None:
    replying.emit_record("run", CREATED, Format.JSON)
    replying.emit_record("end", {"run": 7, "status": "failed"}, Format.JSON)
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x) for x in lines] == [
        {"kind": "run", "run_id": 7, "status": "queued", "created": True, "replaced": []},
        {"kind": "end", "run": 7, "status": "failed"},
    ]


def test_yaml_is_one_document_per_record_and_a_models_own_kind_moves_aside(
    capsys: pytest.CaptureFixture[str],
) -> None:
    replying.emit_record("applied", {"kind": "Pipeline", "name": "linear"}, Format.YAML)
    replying.emit_record("run", CREATED, Format.YAML)
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert docs == [
        {"kind": "applied", "name": "linear", "manifest": "Pipeline"},
        {"kind": "run", "run_id": 7, "status": "queued", "created": True, "replaced": []},
    ]


def test_auto_is_records_in_a_pipe_and_text_is_the_rendering(
    capsys: pytest.CaptureFixture[str],
) -> None:
    replying.reply("run", CREATED, Format.AUTO, lambda: "never rendered in a pipe")
    assert json.loads(capsys.readouterr().out)["kind"] == "run"
    replying.reply("run", CREATED, Format.TEXT, lambda: "run 7: queued [not markup]")
    assert capsys.readouterr().out == "run 7: queued [not markup]\n"


def test_a_listing_is_a_table_for_a_person_and_records_for_a_script(
    capsys: pytest.CaptureFixture[str],
) -> None:
    columns: list[listing.Column] = [
        ("id", lambda r: str(r.run_id)),
        ("status", lambda r: r.status),
    ]
    replying.emit("run", [CREATED, CREATED], Format.TEXT, columns)
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["id", "status"] and table[1].split() == ["7", "queued"]
    replying.emit("run", [], Format.TEXT, columns)
    assert capsys.readouterr().out == "no runs\n"
    replying.emit("run", [CREATED], Format.YAML, columns)
    assert yaml.safe_load(capsys.readouterr().out)["run_id"] == 7


def test_fail_is_one_error_line_then_each_located_problem_and_the_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    problems = [
        Problem(code="a.b", message="first", location="spec.x", file="f.yaml", document=1),
        Problem(code="c.d", message="second"),
    ]
    with pytest.raises(typer.Exit) as exited:
        replying.fail("the manifests cannot be read", replying.EXIT_USAGE, problems)
    assert exited.value.exit_code == 2
    out = capsys.readouterr()
    assert out.out == ""  # diagnostics never reach stdout
    assert out.err.splitlines() == [
        "error: the manifests cannot be read",
        "  f.yaml#1: spec.x: first [a.b]",
        "  second [c.d]",
    ]


def test_times_read_as_people_read_them() -> None:
    start = datetime(2026, 1, 1, 5, 0, tzinfo=UTC)
    assert listing.seconds(start, start.replace(second=3)) == "3.0s"
    assert listing.seconds(start, None) == "" and listing.ago(None) == ""
