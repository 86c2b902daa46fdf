"""Every broken fixture is refused with exactly the problems its comment names.

The table is the contract: a problem's code and location are public (tools key on them), so
a change to either shows up here as a deliberate edit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dirigent.engine import validate_documents
from dirigent.engine.shapes.manifests.loading import read_paths

BROKEN = Path(__file__).resolve().parents[2] / "fixtures" / "broken"

# file -> every (document, code, location) it must produce, in the validator's sorted order.
EXPECTED: dict[str, list[tuple[int | None, str, str]]] = {
    "unknown-field.yaml": [(0, "manifest.field.unknown", "spec.steps.load.dependOn")],
    "bad-name.yaml": [(0, "manifest.name.invalid", "metadata.name")],
    "bad-step-name.yaml": [(0, "manifest.step_name.invalid", "spec.steps.LoadData")],
    "cycle.yaml": [(0, "pipeline.dag.cycle", "spec.steps.a.dependsOn")],
    "unknown-dependency.yaml": [(0, "pipeline.dependency.unknown", "spec.steps.load.dependsOn[0]")],
    "unknown-step-reference.yaml": [
        (0, "pipeline.reference.unknown_step", "spec.steps.load.config.value")
    ],
    "not-upstream-reference.yaml": [
        (0, "pipeline.reference.not_upstream", "spec.steps.load.config.value")
    ],
    "for-each-reads-output.yaml": [
        (0, "pipeline.for_each.reads_output", "spec.steps.push.forEach")
    ],
    "bad-duration.yaml": [(0, "manifest.duration.invalid", "spec.steps.load.timeout")],
    "bad-cron.yaml": [(0, "schedule.cron.invalid", "spec.cron")],
    "unknown-timezone.yaml": [(0, "schedule.timezone.unknown", "spec.timezone")],
    "two-clocks.yaml": [(0, "schedule.clock.exactly_one", "spec")],
    "params-schema-invalid.yaml": [(0, "pipeline.params.schema_invalid", "spec.params.type")],
    "webhook-bad-path.yaml": [(0, "webhook.mapping.path_invalid", "spec.paramsFromPayload.day")],
    "webhook-undeclared-param.yaml": [
        (0, "webhook.mapping.param_unknown", "spec.paramsFromPayload.region")
    ],
    "webhook-required-unmapped.yaml": [
        (0, "webhook.mapping.required_unmapped", "spec.paramsFromPayload")
    ],
    "unknown-kind.yaml": [(0, "manifest.kind.unknown", "kind")],
    "bad-api-version.yaml": [(0, "manifest.api_version.unknown", "apiVersion")],
    "invalid-yaml.yaml": [(None, "manifest.yaml.invalid", "")],
    "several-problems.yaml": [
        (0, "pipeline.reference.unknown_param", "spec.steps.load.config.url"),
        (0, "pipeline.dependency.unknown", "spec.steps.load.dependsOn[0]"),
        (0, "pipeline.reference.item_without_for_each", "spec.steps.report.config.item"),
        (0, "pipeline.reference.syntax", "spec.steps.report.config.value"),
        (1, "manifest.field.unknown", "spec.steps.only.retries"),
        (1, "manifest.value.enum", "spec.steps.only.rule"),
    ],
}


def _problems(name: str) -> list[tuple[int | None, str, str]]:
    docs, read_problems = read_paths([BROKEN / name])
    _, problems = validate_documents(docs)
    return [(p.document, p.code, p.location) for p in [*read_problems, *problems]]


@pytest.mark.parametrize(("name", "expected"), sorted(EXPECTED.items()))
def test_broken_fixture_reports_exactly_its_problems(
    name: str, expected: list[tuple[int | None, str, str]]
) -> None:
    assert _problems(name) == expected


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_comment_names_every_expected_code(name: str) -> None:
    header = "".join(
        line for line in (BROKEN / name).read_text().splitlines(keepends=True) if line[0] == "#"
    )
    for _, code, _ in EXPECTED[name]:
        assert code in header


def test_every_fixture_is_in_the_table() -> None:
    assert sorted(p.name for p in BROKEN.glob("*.yaml")) == sorted(EXPECTED)


def test_cycle_message_names_the_cycle() -> None:
    docs, _ = read_paths([BROKEN / "cycle.yaml"])
    _, (found,) = validate_documents(docs)
    assert "a → c → b → a" in found.message
    assert found.params["cycle"] == "a → c → b → a"


def test_problems_carry_their_file_and_render_with_it() -> None:
    path = BROKEN / "unknown-field.yaml"
    docs, _ = read_paths([path])
    _, (found,) = validate_documents(docs)
    assert found.file == str(path)
    assert found.render().startswith(f"{path}#0: spec.steps.load.dependOn: ")
    assert found.render().endswith("[manifest.field.unknown]")
