"""Reading manifests the way ``run`` and ``dev`` both need them: dirigent kinds and Secrets.

The dirigent documents go through the same offline validation every door runs; the ``v1``
Secret documents beside them (or in ``--secrets`` files) are set aside to resolve
``secretKeyRef``s at apply time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dirigent.cli.secrets import SecretStore, split_secrets
from dirigent.engine import validate_documents
from dirigent.engine.shapes.manifests.loading import LoadedManifest, read_paths
from dirigent.engine.shapes.problems import Problem, sort_problems

__all__ = ["Documents", "read_documents"]


@dataclass
class Documents:
    manifests: list[LoadedManifest]
    secrets: SecretStore
    problems: list[Problem]
    count: int


def read_documents(paths: Sequence[Path], secret_files: Iterable[Path] = ()) -> Documents:
    """Every document under ``paths`` validated offline; Secrets from both kinds of file."""
    docs, problems = read_paths(paths)
    extra, more = read_paths(list(secret_files))
    rest, store, trouble = split_secrets(docs, extra)
    loaded, found = validate_documents(rest)
    return Documents(loaded, store, sort_problems([*problems, *more, *trouble, *found]), len(docs))
