"""Keeping an engine in step with a folder of manifests: what ``dirigent dev`` does all day.

Every manifest under the folder is applied through ``Engine.apply`` — the same door and the
same validation as the operator and the REST apply. A file that changes is read again and
re-applied (an unchanged document costs a digest comparison, not a version). A manifest that
is gone from the folder is deactivated (``Engine.delete(..., policy="Retain")``), so its
history stays, as a GitOps prune would leave it.

A file with problems is reported with their locations and *not* applied: what it last
applied stays in force (the last good version), and nothing it owned is deactivated while
the file still exists. Secrets are ``v1`` Secret documents anywhere in the folder; a Secret
that changes re-seals the Connections that read it, because a Connection's digest covers its
secret values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dirigent.cli.devstate import DevState
from dirigent.cli.secrets import SecretStore, split_secrets
from dirigent.engine import Engine, ProblemsError
from dirigent.engine.manifests.loading import (
    LoadedManifest,
    SourceDocument,
    manifest_files,
    read_text,
)
from dirigent.engine.manifests.webhook import Webhook
from dirigent.engine.problems import Problem, sort_problems
from dirigent.engine.validation.documents import DEFAULT_NAMESPACE, validate_documents

__all__ = ["FolderSync", "Key"]

Record = dict[str, Any]
# Connections first (pipelines name them), triggers last (they name pipelines).
_ORDER = {"Connection": 0, "Pipeline": 1, "Schedule": 2, "Webhook": 3}


@dataclass(frozen=True, order=True)
class Key:
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _key(item: LoadedManifest) -> Key:
    m = item.manifest
    return Key(m.kind, m.metadata.namespace or DEFAULT_NAMESPACE, m.metadata.name)


class FolderSync:
    """Applies a folder, then whatever changes in it; ``emit`` hears every outcome."""

    def __init__(
        self, engine: Engine, folder: Path, state: DevState, emit: Callable[[Record], None]
    ) -> None:
        self.engine, self.folder, self.state, self.emit = engine, folder, state, emit
        self._stamps: dict[Path, tuple[int, int]] = {}
        self._owned: dict[Path, set[Key]] = {}
        self._reported: dict[Path, list[str]] = {}
        # What this session put in force; a key that leaves the folder is deactivated. (A
        # file removed while dev was stopped is not noticed: the engine does not record
        # which folder applied what.)
        self._applied_ever: set[Key] = set()

    def _files(self) -> list[Path]:
        files, _ = manifest_files([self.folder])
        state = self.state.root.resolve()
        return [f for f in files if not f.resolve().is_relative_to(state)]

    def changed(self) -> bool:
        """Whether any manifest file appeared, vanished or was written since the last sync."""
        return self._scan() != self._stamps

    def _scan(self) -> dict[Path, tuple[int, int]]:
        stamps: dict[Path, tuple[int, int]] = {}
        for path in self._files():
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            stamps[path] = (st.st_mtime_ns, st.st_size)
        return stamps

    async def sync(self) -> int:
        """Bring the engine in line with the folder; the number of manifests in force."""
        self._stamps = self._scan()
        docs: list[SourceDocument] = []
        problems: list[Problem] = []
        for path in self._stamps:
            try:
                found, trouble = read_text(path.read_text(encoding="utf-8"), str(path))
            except (OSError, UnicodeDecodeError) as err:
                found, trouble = (
                    [],
                    [Problem(code="manifest.file.unreadable", message=str(err), file=str(path))],
                )
            docs += found
            problems += trouble
        rest, secrets, bad_secrets = split_secrets(docs)
        loaded, invalid = validate_documents(rest)
        problems += bad_secrets + invalid
        by_file = _by_file(problems)
        for path in self._stamps:
            if str(path) not in by_file:
                problems_here = await self._apply_file(path, loaded, secrets)
                by_file[str(path)] = problems_here
            self._report(path, by_file.get(str(path), []))
        for gone in set(self._owned) - set(self._stamps):
            del self._owned[gone]
            self._reported.pop(gone, None)
            self.emit({"kind": "file", "file": str(gone), "status": "removed"})
        await self._deactivate_orphans()
        return len(set().union(*self._owned.values())) if self._owned else 0

    async def _apply_file(
        self, path: Path, loaded: list[LoadedManifest], secrets: SecretStore
    ) -> list[Problem]:
        mine = sorted(
            (m for m in loaded if m.source.file == str(path)),
            key=lambda m: (_ORDER.get(m.manifest.kind, 9), m.source.index or 0),
        )
        problems: list[Problem] = []
        owned = set(self._owned.get(path, set()))
        for item in mine:
            found = await self._apply_one(item, secrets)
            problems += [p.at(file=item.source.file, document=item.source.index) for p in found]
            if not found:
                owned.add(_key(item))
        defined = {_key(m) for m in mine}
        # A manifest that moved away from this file (or was renamed) is no longer owned by it.
        self._owned[path] = {k for k in owned if k in defined}
        return problems

    async def _apply_one(self, item: LoadedManifest, secrets: SecretStore) -> list[Problem]:
        key = _key(item)
        values, missing = secrets.resolve(item.manifest, key.namespace)
        if missing:
            return missing
        if isinstance(item.manifest, Webhook):
            token, minted = self.state.webhook_token(key.namespace, key.name)
            values["token"] = token
            if minted:
                where = self.state.secrets / f"{key.namespace}.{key.name}-token"
                self.emit(
                    {
                        "kind": "token",
                        "webhook": key.name,
                        "namespace": key.namespace,
                        "file": str(where),
                        "path": f"/hooks/{token}",
                    }
                )
        try:
            applied = await self.engine.apply(
                item.manifest,
                key.namespace,
                secret_values=values or None,
                provenance={"source": "dirigent dev", "file": item.source.file},
            )
        except ProblemsError as err:
            return list(err.problems)
        if str(applied.action) != "unchanged":
            self.emit(
                {
                    "kind": "applied",
                    "file": item.source.file,
                    "manifest": key.kind,
                    "namespace": key.namespace,
                    "name": key.name,
                    "action": str(applied.action),
                    "version": applied.version,
                }
            )
        return []

    async def _deactivate_orphans(self) -> None:
        wanted = set().union(*self._owned.values()) if self._owned else set()
        for key in sorted(self._applied_ever - wanted):
            try:
                await self.engine.delete(key.kind, key.namespace, key.name, policy="Retain")
            except ProblemsError as err:
                for p in err.problems:
                    self.emit({"kind": "problem", **p.model_dump(mode="json")})
                continue
            self.emit(
                {
                    "kind": "deactivated",
                    "manifest": key.kind,
                    "namespace": key.namespace,
                    "name": key.name,
                }
            )
        self._applied_ever = set(wanted)

    def _report(self, path: Path, problems: list[Problem]) -> None:
        rendered = [p.render() for p in sort_problems(problems)]
        if rendered == self._reported.get(path, []):
            return
        self._reported[path] = rendered
        if not problems:
            self.emit({"kind": "file", "file": str(path), "status": "ok"})
            return
        kept = "; the last good version stays in force" if self._owned.get(path) else ""
        self.emit({"kind": "file", "file": str(path), "status": "problems", "note": kept})
        for p in sort_problems(problems):
            self.emit({"kind": "problem", **p.model_dump(mode="json")})


def _by_file(problems: list[Problem]) -> dict[str, list[Problem]]:
    out: dict[str, list[Problem]] = {}
    for p in problems:
        out.setdefault(p.file or "", []).append(p)
    return out
