"""The artifact store: routing by scheme and place, stores opened once and closed together,
and ``ctx.storage`` scoped to the run's namespace (issue 28, point 3).

A ``mem://`` backend (the SDK's contract written out over a dict, from the SDK's own tests)
stands in for a remote scheme, so routing and scoping are checked without a server; the
same paths run against a real S3 server in ``tests/integration/blocks/test_storage_s3.py``.

A unit test of ``infrastructure.artifacts`` itself: it imports the module below the door on
purpose.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, SecretStr

from dirigent.engine.infrastructure.artifacts import (
    ArtifactRoot,
    ArtifactStore,
    NamedSettings,
    StepStorage,
)
from dirigent.engine.infrastructure.plugins import build_catalog
from dirigent.sdk import Contribution, ObjectStore, StorageBackend, StorageRefused
from tests.unit.sdk.test_storage import MemoryStore


class VaultSettings(BaseModel):
    name: str = "ambient"
    token: SecretStr | None = None


class CountingBackend(StorageBackend[VaultSettings]):
    """``mem://``: one MemoryStore per opening, named by its settings; opens and closes counted."""

    scheme: ClassVar[str] = "mem"
    summary: ClassVar[str] = "Objects in a dict."
    config_model: ClassVar[type[BaseModel]] = VaultSettings
    connection_kind: ClassVar[str | None] = "vault"

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.closed: list[str] = []
        self.stores: dict[str, MemoryStore] = {}

    def open(self, config: VaultSettings | None) -> AbstractAsyncContextManager[ObjectStore]:
        return self._open(config.name if config else "ambient")

    @asynccontextmanager
    async def _open(self, name: str) -> AsyncIterator[ObjectStore]:
        self.opened.append(name)
        store = self.stores.setdefault(name, MemoryStore())
        try:
            yield store
        finally:
            self.closed.append(name)


class Plugin:
    def __init__(self, backend: CountingBackend) -> None:
        self.backend = backend

    def contribute(self) -> Contribution:
        return Contribution(storage_backends=[self.backend])


def _store(
    root: str, backend: CountingBackend, connections: dict[tuple[str, str], dict[str, Any]] | None
) -> ArtifactStore:
    catalog = build_catalog([("memory", Plugin(backend).contribute())])

    async def read(namespace: str, name: str, kinds: tuple[str, ...]) -> dict[str, Any] | None:
        assert kinds == ("vault",)  # the root's connection must be of the backend's kind
        return (connections or {}).get((namespace, name))

    return ArtifactStore(
        ArtifactRoot.parse(root),
        catalog.storage_backends,
        connection="dirigent/artifacts" if connections is not None else None,
        read_connection=read,
    )


@pytest.fixture
def files(tmp_path: Path) -> ArtifactStore:
    return _store(str(tmp_path / "root"), CountingBackend(), None)


# --- file:// root: a folder per namespace ------------------------------------------------


async def test_a_step_reaches_its_namespaces_part_and_nothing_else(files: ArtifactStore) -> None:
    mine = files.for_step("team-a")
    own = files.namespace_root("team-a")
    theirs = f"{files.run_prefix('team-b', 7)}/steps/s/1/output.json"
    await files.write_bytes(theirs, b"secret")  # the engine writes team-b's output
    info = await mine.write_bytes(f"{own}/in/a.json", b"{}")
    assert info.uri == f"{own}/in/a.json"
    for refused in (
        mine.read_bytes(theirs),
        mine.write_bytes(theirs, b"overwritten"),
        mine.stat(theirs),
        mine.delete(theirs),
        mine.copy(theirs, f"{own}/stolen"),
        mine.copy(f"{own}/in/a.json", theirs),
        mine.read_bytes(f"{own}/../team-b/runs/7/steps/s/1/output.json"),
        mine.read_bytes(f"{files.root_uri}/runs/7/old-layout.json"),
    ):
        with pytest.raises(StorageRefused, match="outside namespace team-a's artifacts"):
            await refused
    assert await files.files.read_bytes(theirs) == b"secret"  # type: ignore[union-attr]


async def test_listing_beyond_the_namespace_is_refused(files: ArtifactStore) -> None:
    mine = files.for_step("team-a")
    await files.write_bytes(f"{files.namespace_root('team-ab')}/x.json", b"{}")
    await mine.write_bytes(f"{files.namespace_root('team-a')}/x.json", b"{}")
    for pattern in (
        f"{files.root_uri}/",
        f"{files.root_uri}/namespaces/",
        f"{files.root_uri}/namespaces/*/x.json",
        f"{files.root_uri}/namespaces/team-",
    ):
        with pytest.raises(StorageRefused, match="lists beyond namespace team-a's artifacts"):
            await mine.list(pattern)
    # The namespace's folder without its slash is the folder, not a prefix of team-ab too.
    found = await mine.list(files.namespace_root("team-a"))
    assert [i.uri for i in found] == [f"{files.namespace_root('team-a')}/x.json"]
    assert [i.uri for i in await mine.list(f"{files.namespace_root('team-a')}/*.json")] == [
        f"{files.namespace_root('team-a')}/x.json"
    ]


async def test_file_is_not_served_when_the_root_is_elsewhere(tmp_path: Path) -> None:
    store = _store("mem://bucket/prefix", CountingBackend(), None)
    with pytest.raises(StorageRefused, match="file:// is served only when the artifact root"):
        await store.for_step("a").read_bytes((tmp_path / "x").as_uri())


async def test_an_unknown_scheme_names_the_served_ones(files: ArtifactStore) -> None:
    with pytest.raises(
        StorageRefused, match=r"no storage backend serves 'gs://' \(served: file://, mem://\)"
    ):
        await files.for_step("a").stat("gs://bucket/key")
    with pytest.raises(StorageRefused, match="lower case"):
        await files.for_step("a").stat("MEM://bucket/key")


# --- a remote root: routing, connections, the same scoping ---------------------------------


async def test_uris_under_the_root_use_the_roots_connection_others_the_steps() -> None:
    backend = CountingBackend()
    store = _store("mem://bucket/dirigent/", backend, {("dirigent", "artifacts"): {"name": "root"}})
    assert store.root_uri == "mem://bucket/dirigent"
    step = store.for_step("team-a", NamedSettings("mine", {"name": "team-a-conn"}))
    ambient = store.for_step("team-a")
    await step.write_bytes(f"{store.namespace_root('team-a')}/a", b"1")
    await step.write_bytes("mem://elsewhere/b", b"2")
    await ambient.write_bytes("mem://elsewhere/c", b"3")
    assert sorted(backend.stores["root"].objects) == ["mem://bucket/dirigent/namespaces/team-a/a"]
    assert sorted(backend.stores["team-a-conn"].objects) == ["mem://elsewhere/b"]
    assert sorted(backend.stores["ambient"].objects) == ["mem://elsewhere/c"]
    assert sorted(backend.opened) == ["ambient", "root", "team-a-conn"]  # once each
    await store.aclose()
    assert sorted(backend.closed) == ["ambient", "root", "team-a-conn"]


async def test_a_copy_inside_one_store_stays_there_and_across_stores_streams() -> None:
    backend = CountingBackend()
    store = _store("mem://bucket/root", backend, None)
    step = store.for_step("a")
    own = store.namespace_root("a")
    await step.write_bytes(f"{own}/in", b"x" * 10)
    copied = await step.copy(f"{own}/in", f"{own}/out")  # one store: its own copy
    assert copied.size == 10
    assert await step.read_bytes(f"{own}/out") == b"x" * 10


async def test_a_remote_root_is_scoped_like_a_folder() -> None:
    store = _store("mem://bucket/root", CountingBackend(), None)
    mine = store.for_step("team-a")
    other = f"{store.namespace_root('team-b')}/secret"
    await store.write_bytes(other, b"secret")
    for uri in (other, f"{store.root_uri}/runs/1/x", store.root_uri):
        with pytest.raises(StorageRefused, match="outside namespace team-a's artifacts"):
            await mine.read_bytes(uri)
    for uri in (
        f"{store.namespace_root('team-a')}/../team-b/secret",
        f"{store.namespace_root('team-a')}/./x",
        "mem://bucket/root//namespaces/team-b/secret",
        "mem://bucket/elsewhere/../root/namespaces/team-b/secret",
    ):
        with pytest.raises(StorageRefused, match=r"'\.\.' path segment"):
            await mine.read_bytes(uri)
    for prefix in ("mem://bucket/", "mem://bucket/ro", f"{store.root_uri}/namespaces/team"):
        with pytest.raises(StorageRefused, match="lists beyond"):
            await mine.list(prefix + "*")
    await mine.write_bytes("mem://bucket/elsewhere/ok", b"1")  # beside the root: not artifacts
    assert [i.uri for i in await mine.list("mem://bucket/elsewhere/")] == [
        "mem://bucket/elsewhere/ok"
    ]


async def test_a_connection_that_does_not_fit_is_refused_without_its_values() -> None:
    store = _store("mem://bucket/root", CountingBackend(), None)
    step = store.for_step("a", NamedSettings("broken", {"name": 1, "token": "hunter2-secret"}))
    with pytest.raises(StorageRefused) as refused:
        await step.stat("mem://elsewhere/x")
    assert "connection broken does not fit the mem:// settings: name" in str(refused.value)
    assert "hunter2" not in str(refused.value)


async def test_the_roots_connection_must_exist() -> None:
    store = _store("mem://bucket/root", CountingBackend(), {})
    with pytest.raises(StorageRefused, match="connection dirigent/artifacts does not exist"):
        await store.write_bytes(f"{store.namespace_root('a')}/x", b"1")


def test_a_root_needs_an_installed_backend() -> None:
    with pytest.raises(
        StorageRefused, match=r"needs a storage backend for gs:// .*served: file://"
    ):
        ArtifactStore(ArtifactRoot.parse("gs://bucket/x"), {})


def test_roots_parse_as_folders_or_uris(tmp_path: Path) -> None:
    assert ArtifactRoot.parse(str(tmp_path)).folder == tmp_path.resolve()
    assert ArtifactRoot.parse(tmp_path.as_uri()).uri == tmp_path.resolve().as_uri()
    assert ArtifactRoot.parse("s3://b/p/").uri == "s3://b/p"
    with pytest.raises(StorageRefused):
        ArtifactRoot.parse("s3://b/p/../q")


def test_step_storage_is_the_sdk_storage() -> None:
    from dirigent.sdk import Storage

    storage: Storage = StepStorage(
        _store("mem://b/r", CountingBackend(), None), "a", None
    )  # mypy checks the fit
    assert storage is not None


def test_the_catalog_serves_file_and_each_contributed_scheme_once() -> None:
    backend = CountingBackend()
    catalog = build_catalog([("memory", Plugin(backend).contribute())])
    assert catalog.storage_schemes == {"file", "mem"}
    entry = catalog.storage_backends["mem"]
    assert (entry.plugin, entry.summary, entry.connection_kind) == (
        "memory",
        "Objects in a dict.",
        "vault",
    )
    twice = [("memory", Plugin(backend).contribute()), ("other", Plugin(backend).contribute())]
    with pytest.raises(ValueError, match="'mem' is contributed by both 'memory' and 'other'"):
        build_catalog(twice)
