"""``replying``: the one place a client command's records and one-line errors come from."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import typer
import yaml

from dirigent.api.models import RunCreatedView
from dirigent.cli import listing, replying
from dirigent.cli.output import Output
from dirigent.engine.shapes.problems import Problem

CREATED = RunCreatedView(run_id=7, status="queued", created=True)


def test_json_is_one_record_per_line_with_a_kind(capsys: pytest.CaptureFixture[str]) -> None:
    replying.emit_record("run", CREATED, Output.JSON)
    replying.emit_record("end", {"run": 7, "status": "failed"}, Output.JSON)
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x) for x in lines] == [
        {"kind": "run", "run_id": 7, "status": "queued", "created": True, "replaced": []},
        {"kind": "end", "run": 7, "status": "failed"},
    ]


def test_yaml_is_one_document_per_record_and_a_models_own_kind_moves_aside(
    capsys: pytest.CaptureFixture[str],
) -> None:
    replying.emit_record("applied", {"kind": "Pipeline", "name": "linear"}, Output.YAML)
    replying.emit_record("run", CREATED, Output.YAML)
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert docs == [
        {"kind": "applied", "name": "linear", "manifest": "Pipeline"},
        {"kind": "run", "run_id": 7, "status": "queued", "created": True, "replaced": []},
    ]


def test_auto_is_records_in_a_pipe_and_text_is_the_rendering(
    capsys: pytest.CaptureFixture[str],
) -> None:
    replying.reply("run", CREATED, Output.AUTO, lambda: "never rendered in a pipe")
    assert json.loads(capsys.readouterr().out)["kind"] == "run"
    replying.reply("run", CREATED, Output.TEXT, lambda: "run 7: queued [not markup]")
    assert capsys.readouterr().out == "run 7: queued [not markup]\n"


def test_a_listing_is_a_table_for_a_person_and_records_for_a_script(
    capsys: pytest.CaptureFixture[str],
) -> None:
    columns: list[listing.Column] = [
        ("id", lambda r: str(r.run_id)),
        ("status", lambda r: r.status),
    ]
    replying.emit("run", [CREATED, CREATED], Output.TEXT, columns)
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["id", "status"] and table[1].split() == ["7", "queued"]
    replying.emit("run", [], Output.TEXT, columns)
    assert capsys.readouterr().out == "no runs\n"
    replying.emit("run", [CREATED], Output.YAML, columns)
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


def test_every_command_spells_its_output_option_with_the_one_enum() -> None:
    """One ``-o`` enum: no command module defines an output enum or option of its own."""
    import ast
    from pathlib import Path

    import dirigent.cli

    owner = Path(dirigent.cli.__file__).parent
    found = []
    for path in sorted(owner.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Attribute) and b.attr == "StrEnum" for b in node.bases
            ):
                members = {
                    t.id
                    for stmt in node.body
                    if isinstance(stmt, ast.Assign)
                    for t in stmt.targets
                    if isinstance(t, ast.Name)
                }
                if {"TEXT", "JSON"} <= members:
                    found.append(f"{path.name}:{node.name}")
    assert found == ["output.py:Output"], found


def test_yaml_is_refused_where_records_stream() -> None:
    import typer

    from dirigent.cli.output import streamed_as_json

    assert streamed_as_json(Output.JSON) is True
    assert streamed_as_json(Output.TEXT) is False
    with pytest.raises(typer.BadParameter, match="yaml has no streaming form"):
        streamed_as_json(Output.YAML)
