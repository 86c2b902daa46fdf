"""``dirigent blocks list``: the blocks and storage schemes installed where it runs."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dirigent.cli.main import app


def test_it_lists_blocks_then_every_installed_scheme_with_its_plugin_and_kind() -> None:
    result = CliRunner().invoke(app, ["blocks", "list", "-o", "json"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    blocks = {r["id"]: r for r in records if r["kind"] == "block"}
    assert blocks["storage.copy"]["type"] == "operator"
    exists = blocks["storage.exists"]
    assert set(exists) == {"kind", "id", "type", "plugin", "summary"}
    assert (exists["type"], exists["plugin"]) == ("sensor", "builtin") and exists["summary"]
    schemes = [r for r in records if r["kind"] == "storage_scheme"]
    assert [(s["scheme"], s["plugin"], s["connection_kind"]) for s in schemes] == [
        ("file", "engine", None),
        ("s3", "s3", "s3"),
    ]
    assert records.index(schemes[0]) > max(records.index(b) for b in blocks.values())


def test_text_shows_a_table_of_schemes() -> None:
    result = CliRunner().invoke(app, ["blocks", "list", "-o", "text"])
    assert result.exit_code == 0, result.output
    assert "scheme" in result.stdout and "s3://" in result.stdout and "file://" in result.stdout
