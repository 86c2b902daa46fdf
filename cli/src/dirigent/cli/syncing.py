"""Keeping an engine in step with a folder of manifests: what ``dirigent dev`` does all day.

Every manifest under the folder is applied through ``Engine.apply`` — the same door and the
same validation as the operator and the REST apply. A file that changes is read again and
re-applied (an unchanged document costs a digest comparison, not a version). A manifest that
is gone from the folder is deactivated (``Engine.delete(..., policy="Retain")``), so its
history stays, as a GitOps prune would leave it. Which file put which manifest in force is kept
in ``.dirigent/folders/`` after every sync, so a file removed (or a manifest taken out of a
file) while dev was stopped is deactivated at the next start, as if it had happened live.

A file with problems is reported with their locations and *not* applied: what it last
applied stays in force (the last good version), and nothing it owned is deactivated while
the file still exists. Secrets are ``v1`` Secret documents anywhere in the folder; a Secret
that changes re-seals the Connections that read it, because a Connection's digest covers its
secret values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dirigent.cli.devstate import DevState
from dirigent.cli.secrets import SecretStore, split_secrets
from dirigent.engine import DEFAULT_NAMESPACE, Engine, ProblemsError, validate_documents
from dirigent.engine.shapes.manifests.loading import (
    LoadedManifest,
    SourceDocument,
    manifest_files,
    read_text,
)
from dirigent.engine.shapes.manifests.ordering import Facts, apply_order
from dirigent.engine.shapes.manifests.pipeline import Pipeline
from dirigent.engine.shapes.manifests.webhook import Webhook
from dirigent.engine.shapes.problems import Problem, sort_problems

__all__ = ["FolderSync", "Key"]

Record = dict[str, Any]


def _facts(item: LoadedManifest) -> Facts:
    m = item.manifest
    return Facts(m.kind, m.metadata.name, m.required_pipelines if isinstance(m, Pipeline) else ())


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
        self._reported: dict[Path, list[str]] = {}
        self._record = state.applied_record(folder)
        # What the folder put in force, by file, as the last run left it; a key that leaves
        # the folder is deactivated, also when it left while dev was stopped.
        self._owned: dict[Path, set[Key]] = self._load()
        self._applied_ever: set[Key] = set().union(*self._owned.values()) if self._owned else set()

    def _load(self) -> dict[Path, set[Key]]:
        try:
            data = json.loads(self._record.read_text(encoding="utf-8"))
            return {
                self.folder / rel: {Key(*key) for key in keys}
                for rel, keys in data["owned"].items()
            }
        except FileNotFoundError:
            return {}
        except (ValueError, KeyError, TypeError, AttributeError):
            self.emit({"kind": "note", "message": f"{self._record} is unreadable; starting afresh"})
            return {}

    def _save(self) -> None:
        owned = {
            str(path.relative_to(self.folder)): sorted([k.kind, k.namespace, k.name] for k in keys)
            for path, keys in sorted(self._owned.items())
        }
        self._record.parent.mkdir(parents=True, exist_ok=True)
        partial = self._record.with_suffix(".tmp")
        partial.write_text(json.dumps({"folder": str(self.folder.resolve()), "owned": owned}))
        partial.replace(self._record)  # a crash mid-write leaves the previous record

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
        good = [m for m in loaded if m.source.file not in by_file]
        await self._apply_all(good, secrets, by_file)
        for path in self._stamps:
            self._report(path, by_file.get(str(path), []))
        for gone in set(self._owned) - set(self._stamps):
            del self._owned[gone]
            self._reported.pop(gone, None)
            self.emit({"kind": "file", "file": str(gone), "status": "removed"})
        await self._deactivate_orphans()
        self._save()
        return len(set().union(*self._owned.values())) if self._owned else 0

    async def _apply_all(
        self,
        loaded: list[LoadedManifest],
        secrets: SecretStore,
        by_file: dict[str | None, list[Problem]],
    ) -> None:
        """Apply the folder's good files across files in kind order: a Schedule in one file
        names a Pipeline in another, so every Pipeline goes in before any trigger (and after
        the Pipelines it requires)."""
        ordered = apply_order(loaded, _facts, lambda m: (m.source.file or "", m.source.index or 0))
        owned = {Path(f): set(keys) for f, keys in self._owned.items()}
        for item in ordered:
            path = Path(item.source.file or "")
            found = await self._apply_one(item, secrets)
            if found:
                if _key(item) in self._applied_ever:
                    self.emit(
                        {
                            "kind": "kept",
                            "manifest": item.manifest.kind,
                            "name": item.manifest.metadata.name,
                            "file": item.source.file,
                        }
                    )
                by_file.setdefault(item.source.file, []).extend(
                    p.at(file=item.source.file, document=item.source.index) for p in found
                )
            else:
                owned.setdefault(path, set()).add(_key(item))
        for path in self._stamps:
            if str(path) in by_file and not any(m.source.file == str(path) for m in loaded):
                continue  # a file refused before apply keeps what it owned
            defined = {_key(m) for m in loaded if m.source.file == str(path)}
            # A manifest that moved away from this file (or was renamed) is no longer its own.
            self._owned[path] = {k for k in owned.get(path, set()) if k in defined}

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
            applied = await self.engine.manifests.apply(
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
                await self.engine.manifests.delete(
                    key.kind, key.namespace, key.name, policy="Retain"
                )
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
        self.emit({"kind": "file", "file": str(path), "status": "problems"})
        for p in sort_problems(problems):
            self.emit({"kind": "problem", **p.model_dump(mode="json")})


def _by_file(problems: list[Problem]) -> dict[str | None, list[Problem]]:
    out: dict[str | None, list[Problem]] = {}
    for p in problems:
        out.setdefault(p.file or "", []).append(p)
    return out
