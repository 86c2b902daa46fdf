"""The examples are documentation that runs: each validates clean and round-trips exactly.

Export → load → export must be byte-identical, or the digest would change on a re-apply of an
unchanged document and every GitOps sync would write a new version.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dirigent.engine import validate_documents
from dirigent.engine.shapes.manifests import (
    digest,
    export_yaml,
    parse_manifest,
    read_paths,
    read_text,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FILES = sorted(EXAMPLES.glob("*.yaml"))


def test_there_are_examples_of_every_concept() -> None:
    names = {p.stem for p in FILES}
    assert {
        "linear",
        "fan-out",
        "sensor-skip",
        "error-handler",
        "retry",
        "schedule",
        "webhook",
        "connection",
    } <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_example_opens_with_a_comment(path: Path) -> None:
    assert path.read_text().startswith("# ")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_example_validates_clean(path: Path) -> None:
    docs, read_problems = read_paths([path])
    loaded, problems = validate_documents(docs)
    assert read_problems == []
    assert [p.render() for p in problems] == []
    assert len(loaded) == len(docs) >= 1


def test_the_examples_folder_validates_clean_together() -> None:
    # Together, a Schedule in one file sees the Pipeline it names in another.
    docs, read_problems = read_paths([EXAMPLES])
    _, problems = validate_documents(docs)
    assert read_problems == problems == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_export_load_export_is_byte_identical(path: Path) -> None:
    docs, _ = read_paths([path])
    for doc in docs:
        manifest, problems = parse_manifest(doc.data)
        assert manifest is not None, problems
        first = export_yaml(manifest)
        (again,), _ = read_text(first)
        reloaded, problems = parse_manifest(again.data)
        assert reloaded is not None, problems
        assert export_yaml(reloaded) == first
        assert digest(reloaded) == digest(manifest)
        assert reloaded == manifest
