"""Canonical export: the text depends on the meaning of a document, never on how it was written."""

from __future__ import annotations

from typing import Any

import yaml

from dirigent.engine.shapes.manifests import Pipeline, Schedule, canonical_dict, digest, export_yaml
from dirigent.engine.shapes.manifests.loading import Manifest, parse_manifest


def _load(text: str) -> Manifest:
    manifest, problems = parse_manifest(yaml.safe_load(text))
    assert manifest is not None, problems
    return manifest


SHUFFLED = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: shuffled}
spec:
  steps:
    zeta: {block: core.noop, dependsOn: [beta]}
    load: {block: core.noop, dependsOn: [alpha, beta]}
    beta: {block: core.noop}
    alpha:
      block: core.echo
      config: {value: {z: 1, a: [{y: 2, b: 3}]}, header: x}
  params:
    type: object
    required: [day]
    properties: {day: {type: string}}
"""

ORDERED = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: shuffled}
spec:
  params:
    properties: {day: {type: string}}
    type: object
    required: [day]
  steps:
    alpha:
      config: {header: x, value: {a: [{b: 3, y: 2}], z: 1}}
      block: core.echo
    beta: {block: core.noop}
    load: {block: core.noop, dependsOn: [alpha, beta]}
    zeta: {block: core.noop, dependsOn: [beta]}
"""


def test_steps_are_topological_then_alphabetical() -> None:
    data = canonical_dict(_load(SHUFFLED))
    assert list(data["spec"]["steps"]) == ["alpha", "beta", "load", "zeta"]


def test_opaque_map_keys_are_sorted_deeply() -> None:
    data = canonical_dict(_load(SHUFFLED))
    config: dict[str, Any] = data["spec"]["steps"]["alpha"]["config"]
    assert list(config) == ["header", "value"]
    assert list(config["value"]) == ["a", "z"]
    assert list(config["value"]["a"][0]) == ["b", "y"]
    assert list(data["spec"]["params"]) == ["properties", "required", "type"]


def test_model_fields_keep_declaration_order() -> None:
    data = canonical_dict(_load(SHUFFLED))
    assert list(data) == ["apiVersion", "kind", "metadata", "spec"]
    assert list(data["spec"]) == ["params", "steps"]
    assert list(data["spec"]["steps"]["load"]) == ["block", "dependsOn"]


def test_the_same_meaning_gives_the_same_text_and_digest() -> None:
    assert export_yaml(_load(SHUFFLED)) == export_yaml(_load(ORDERED))
    assert digest(_load(SHUFFLED)) == digest(_load(ORDERED))


def test_a_change_of_meaning_changes_the_digest() -> None:
    assert digest(_load(SHUFFLED)) != digest(_load(SHUFFLED.replace("x}", "y}")))


def test_defaults_are_omitted_even_when_written() -> None:
    written = _load(
        """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: defaults, labels: {}}
spec:
  concurrency: Allow
  priority: Normal
  deletionPolicy: Retain
  tags: []
  steps:
    only:
      block: core.noop
      config: {}
      dependsOn: []
      rule: AllSuccess
      onItemFailure: FailFast
      onTimeout: Fail
      continueOnFailure: false
      retry: {maxAttempts: 3, backoff: 10s, maxBackoff: 10m}
"""
    )
    assert isinstance(written, Pipeline)
    assert canonical_dict(written) == {
        "apiVersion": "dirigent.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "defaults"},
        # A retry policy written at its defaults is still a retry policy: its presence matters.
        "spec": {"steps": {"only": {"block": "core.noop", "retry": {}}}},
    }


def test_durations_export_in_canonical_form() -> None:
    schedule = _load(
        """
apiVersion: dirigent.dev/v1alpha1
kind: Schedule
metadata: {name: s}
spec: {pipeline: p, interval: 90}
"""
    )
    assert isinstance(schedule, Schedule)
    assert canonical_dict(schedule)["spec"]["interval"] == "1m30s"


def test_multi_line_strings_export_as_literal_blocks() -> None:
    text = export_yaml(
        _load(
            """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: prose}
spec:
  description: "line one\\nline two\\n"
  steps: {only: {block: core.noop}}
"""
        )
    )
    assert "description: |\n    line one\n    line two\n" in text
