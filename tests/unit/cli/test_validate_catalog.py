"""``dirigent validate --catalog``: the apply-time catalog layer, run offline against the
blocks installed here, with the Connection manifests of the same invocation as the
connections that exist.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from dirigent.cli.main import app

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"


def _pipeline(steps: str, *, name: str = "p", namespace: str | None = None, extra: str = "") -> str:
    ns = f"\n  namespace: {namespace}" if namespace else ""
    return (
        "apiVersion: dirigent.dev/v1alpha1\nkind: Pipeline\n"
        f"metadata:\n  name: {name}{ns}\nspec:\n{extra}  steps:\n"
        + textwrap.indent(textwrap.dedent(steps).strip("\n"), "    ")
        + "\n"
    )


def _connection(name: str, namespace: str | None = None) -> str:
    ns = f"\n  namespace: {namespace}" if namespace else ""
    return (
        "apiVersion: dirigent.dev/v1alpha1\nkind: Connection\n"
        f"metadata:\n  name: {name}{ns}\nspec:\n  type: http\n"
    )


def _check(tmp_path: Path, *documents: str, catalog: bool = True) -> tuple[int, list[Any]]:
    path = tmp_path / "manifests.yaml"
    path.write_text("---\n".join(documents))
    args = ["validate", "-o", "json", str(path)]
    if catalog:
        args.insert(1, "--catalog")
    result = CliRunner().invoke(app, args)
    return result.exit_code, json.loads(result.stdout)


def _codes(problems: list[Any]) -> list[tuple[str, str]]:
    return [(p["code"], p["location"]) for p in problems]


def test_the_examples_validate_clean_against_the_catalog() -> None:
    result = CliRunner().invoke(app, ["validate", "--catalog", str(EXAMPLES)])
    assert result.exit_code == 0, result.stdout
    assert result.stdout.strip().endswith("documents, no problems")


def test_an_unknown_block_is_refused_with_the_installed_ones_named(tmp_path: Path) -> None:
    doc = _pipeline("a:\n  block: nope.missing\n")
    assert _check(tmp_path, doc, catalog=False) == (0, [])
    code, problems = _check(tmp_path, doc)
    assert code == 1
    assert _codes(problems) == [("pipeline.block.unknown", "spec.steps.a.block")]
    assert "core.noop" in problems[0]["message"]
    assert problems[0]["file"] == str(tmp_path / "manifests.yaml")
    assert problems[0]["document"] == 0


def test_a_config_key_the_block_refuses(tmp_path: Path) -> None:
    code, problems = _check(
        tmp_path, _pipeline("a:\n  block: core.noop\n  config: {colour: red}\n")
    )
    assert code == 1
    assert _codes(problems) == [("pipeline.config.invalid", "spec.steps.a.config")]
    assert "colour" in problems[0]["message"]


def test_a_value_the_block_s_check_config_forbids(tmp_path: Path) -> None:
    doc = _pipeline("a:\n  block: testing.checked\n  config: {value: forbidden}\n")
    code, problems = _check(tmp_path, doc)
    assert code == 1
    assert _codes(problems) == [("testing.value.forbidden", "spec.steps.a.config.value")]
    allowed = _pipeline("a:\n  block: testing.checked\n  config: {value: fine}\n")
    assert _check(tmp_path, allowed) == (0, [])


def test_a_reference_is_deferred_to_the_run(tmp_path: Path) -> None:
    # seconds must be a number; "${params.n}" is not known until a run, so it is not judged,
    # and check_config is not run on a config still holding a reference.
    params = "  params:\n    type: object\n    properties:\n      n: {type: number}\n"
    doc = _pipeline(
        """
        a:
          block: core.sleep
          config: {seconds: "${params.n}"}
        b:
          block: testing.checked
          config: {value: "${params.n}"}
        """,
        extra=params,
    )
    assert _check(tmp_path, doc) == (0, [])


def test_connections_exist_when_given_in_the_same_invocation_and_namespace(
    tmp_path: Path,
) -> None:
    doc = _pipeline("a:\n  block: core.noop\n  config: {connection: api}\n")
    unknown = ("pipeline.connection.unknown", "spec.steps.a.config.connection")
    code, problems = _check(tmp_path, doc)
    assert code == 1
    assert unknown in _codes(problems)
    _, problems = _check(tmp_path, _connection("api"), doc)
    assert unknown not in _codes(problems)
    _, problems = _check(tmp_path, _connection("api", namespace="other"), doc)
    assert unknown in _codes(problems)
    assert problems[0]["document"] == 1


def test_a_pipeline_with_offline_problems_is_not_also_checked_against_the_catalog(
    tmp_path: Path,
) -> None:
    broken = _pipeline("a:\n  block: nope.missing\n  dependsOn: [ghost]\n")
    code, problems = _check(tmp_path, broken)
    assert code == 1
    codes = {c for c, _ in _codes(problems)}
    assert codes
    assert "pipeline.block.unknown" not in codes


def test_text_output_locates_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(_pipeline("a:\n  block: nope.missing\n"))
    result = CliRunner().invoke(app, ["validate", "--catalog", str(path)])
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{path}#0: spec.steps.a.block: block 'nope.missing'")
    assert result.stdout.rstrip().endswith("[pipeline.block.unknown]")


def test_required_pipelines_are_among_the_manifests_given_and_storage_is_served(
    tmp_path: Path,
) -> None:
    # s3:// is served by the installed dirigent-storage-s3 plugin; nothing serves gs://.
    requires = "  requires:\n    pipelines: [child, absent]\n    storage: [file, s3, gs]\n"
    parent = _pipeline("a:\n  block: core.noop\n", name="parent", extra=requires)
    child = _pipeline("a:\n  block: core.noop\n", name="child")
    code, problems = _check(tmp_path, parent, child)
    assert code == 1
    assert _codes(problems) == [
        ("pipeline.pipeline.unknown", "spec.requires.pipelines[1]"),
        ("pipeline.storage.unknown", "spec.requires.storage[2]"),
    ]
