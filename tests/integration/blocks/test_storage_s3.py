"""storage.* blocks and ctx.storage against a real S3 server (SeaweedFS, the ``s3_server``
fixture): copies file↔s3 and s3→s3, sensors on a key and a prefix, listings, connections,
and an artifact root on S3 kept apart per namespace (issue 32 points 1 and 5, issue 28
point 3)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dirigent.storage.s3.client import open_store
from e2e.harness.s3 import S3Endpoint
from tests.integration.blocks.test_http import pipeline, run_one
from tests.support.harness import Harness, harness
from tests.support.s3kit import (
    SECRET_KEY,
    CountingProxy,
    apply_connection,
    prefix,
    settings,
    use_ambient,
    use_no_ambient,
)
from tests.support.waiting import eventually

MiB = 1024 * 1024


@pytest.fixture
async def proxy(s3_server: S3Endpoint) -> AsyncIterator[CountingProxy]:
    async with CountingProxy(s3_server.url) as counting:
        yield counting


@pytest.fixture
async def sh(db_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    """An engine with a folder root that can seal Connection secrets."""
    async with harness(db_url, tmp_path / "artifacts", secret_key=SECRET_KEY) as found:
        yield found


async def _outputs(h: Harness, name: str) -> tuple[str, dict[str, Any]]:
    status, attempts = await run_one(h, name)
    return status, {str(a["step"]): a for a in attempts}


async def test_copy_file_to_s3_and_back_streams_and_s3_to_s3_stays_on_the_server(
    sh: Harness, s3_server: S3Endpoint, proxy: CountingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_ambient(monkeypatch, s3_server, proxy.url)  # no connection named: ambient identity
    base, own = prefix(s3_server), sh.storage.namespace_root(sh.namespace)
    data = os.urandom(6 * MiB)
    await sh.storage.write_bytes(f"{own}/in/big.bin", data)
    legs = {
        "up": (f"{own}/in/big.bin", f"{base}big.bin"),
        "across": (f"{base}big.bin", f"{base}copy/big.bin"),
        "down": (f"{base}copy/big.bin", f"{own}/out/big.bin"),
    }
    moved: dict[str, tuple[int, int]] = {}
    for name, (source, target) in legs.items():
        await sh.apply(
            pipeline(
                name,
                f"    c: {{block: storage.copy, config: {{source: '{source}', target: '{target}'}}}}",
            )
        )
        before = (proxy.sent, proxy.received)
        status, out = await _outputs(sh, name)
        assert status == "succeeded", out
        assert out["c"]["output"]["sha256"] in (None, hashlib.sha256(data).hexdigest())
        assert out["c"]["output"]["size"] == len(data)
        moved[name] = (proxy.sent - before[0], proxy.received - before[1])
    assert moved["up"][0] >= len(data)  # the file went up through the worker
    assert moved["down"][1] >= len(data)  # and came down through it
    assert sum(moved["across"]) < MiB  # S3 to S3: requests only, the bytes stayed on the server
    assert (
        sh.storage.files.root / "namespaces" / "default" / "out" / "big.bin"
    ).read_bytes() == data  # type: ignore[union-attr]


async def test_exists_waits_for_a_key_then_for_a_prefix_after_its_cursor(
    sh: Harness, s3_server: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_ambient(monkeypatch, s3_server)
    base = prefix(s3_server)
    await sh.apply(
        pipeline(
            "wait",
            f"""    key:
      block: storage.exists
      poll: 100ms
      config: {{uri: '{base}in/ready.flag'}}
    watch:
      block: storage.exists
      poll: 100ms
      config: {{uri: '{base}watch/*.done', resume: true}}""",
        )
    )
    async with open_store(settings(s3_server)) as s3:
        await s3.write_bytes(f"{base}watch/001.csv", b"a")
        await s3.write_bytes(f"{base}watch/002.csv", b"b")
        run = await sh.run("wait")
        async with sh.workers(1):
            # Both poke and wait: the key is missing, the prefix has nothing matching yet.
            cursor = await eventually(
                lambda: sh.fetchval(
                    "SELECT cursor FROM step_attempts WHERE run_id = $1 AND step = 'watch'",
                    run.run_id,
                ),
                lambda c: c is not None,
                what="the watch's cursor",
            )
            assert cursor == {"after": f"{base}watch/002.csv"}
            await s3.write_bytes(f"{base}in/ready.flag", b"")
            await eventually(
                lambda: sh.steps(run.run_id),
                lambda s: s["key"] == "succeeded",
                what="the key's sensor succeeded",
            )
            # A key sorting before the cursor is not looked at again: the watch keeps waiting.
            await s3.write_bytes(f"{base}watch/000.done", b"early")
            polled = await _next_poll(sh, run.run_id)
            await eventually(
                lambda: _next_poll(sh, run.run_id),
                lambda p: p > polled,
                what="the watch poked again",
            )
            watching = "SELECT status FROM step_attempts WHERE run_id = $1 AND step = 'watch'"
            assert await sh.fetchval(watching, run.run_id) == "waiting"
            await s3.write_bytes(f"{base}watch/003.done", b"late")
            assert await sh.until_finished(run.run_id) == "succeeded"
    watch = (await sh.attempts(run.run_id, "watch"))[-1]["output"]
    assert [i["uri"] for i in watch["items"]] == [f"{base}watch/003.done"]


async def _next_poll(h: Harness, run_id: int) -> Any:
    return await h.fetchval(
        "SELECT next_poll_at FROM step_attempts WHERE run_id = $1 AND step = 'watch'", run_id
    )


async def test_list_globs_an_s3_prefix_in_key_order(
    sh: Harness, s3_server: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_ambient(monkeypatch, s3_server)
    base = prefix(s3_server)
    async with open_store(settings(s3_server)) as s3:
        for key in ("in/b.csv", "in/a.csv", "in/2026/c.csv", "in/d.json", "inbox/e.csv"):
            await s3.write_bytes(f"{base}{key}", b"x")
    await sh.apply(
        pipeline(
            "ls",
            f"""    one: {{block: storage.list, config: {{pattern: '{base}in/*.csv'}}}}
    deep: {{block: storage.list, config: {{pattern: '{base}in/**.csv'}}}}
    all: {{block: storage.list, config: {{pattern: '{base}in'}}}}""",
        )
    )
    status, out = await _outputs(sh, "ls")
    assert status == "succeeded", out
    keys = {s: [i["uri"].removeprefix(base) for i in out[s]["output"]["items"]] for s in out}
    assert keys["one"] == ["in/a.csv", "in/b.csv"]
    assert keys["deep"] == ["in/2026/c.csv", "in/a.csv", "in/b.csv"]
    assert keys["all"] == ["in/2026/c.csv", "in/a.csv", "in/b.csv", "in/d.json", "inbox/e.csv"]


async def test_a_step_reaches_s3_through_the_connection_it_names(
    sh: Harness, s3_server: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_no_ambient(monkeypatch, s3_server)  # the worker's own identity is refused by the server
    base = prefix(s3_server)
    await apply_connection(sh.engine, sh.namespace, "lake", s3_server)
    await sh.apply(
        pipeline(
            "conn",
            f"""    named:
      block: storage.write
      config: {{uri: '{base}out.json', value: {{ok: true}}, connection: lake}}
    ambient:
      block: storage.read
      dependsOn: [named]
      config: {{uri: '{base}out.json'}}""",
        )
    )
    status, out = await _outputs(sh, "conn")
    assert status == "failed"
    assert out["named"]["status"] == "succeeded", out["named"]
    assert (out["ambient"]["error_class"], out["ambient"]["error_code"]) == (
        "rejected",
        "storage.refused",
    )
    async with open_store(settings(s3_server)) as s3:
        assert json.loads(await s3.read_bytes(f"{base}out.json")) == {"ok": True}


@pytest.fixture
async def s3_root(
    db_url: str, s3_server: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Harness]:
    """An engine whose artifact root is on S3, opened by a Connection in its own namespace."""
    use_no_ambient(monkeypatch, s3_server)  # only the root's Connection can reach the server
    root = prefix(s3_server) + "artifacts"
    async with harness(
        db_url,
        root,
        secret_key=SECRET_KEY,
        artifact_connection="dirigent/artifacts",
        inline_artifact_max=16,
    ) as h:
        await apply_connection(h.engine, "dirigent", "artifacts", s3_server)
        yield h


async def test_an_s3_root_holds_each_namespaces_runs_apart(
    s3_root: Harness, s3_server: S3Endpoint
) -> None:
    h = s3_root
    h.namespace = "team-b"
    await h.apply(pipeline("theirs", "    say: {block: core.echo, config: {value: 'team-b data'}}"))
    status, out = await _outputs(h, "theirs")
    assert status == "succeeded", out
    theirs = await h.fetchval("SELECT uri FROM artifact_refs WHERE name = 'output'")
    assert theirs.startswith(h.storage.run_prefix("team-b", out["say"]["run_id"]) + "/")
    original = await h.storage.read_bytes(theirs)

    h.namespace = "team-a"
    root = h.storage.root_uri
    await h.apply(
        pipeline(
            "reach",
            f"""    read: {{block: storage.read, config: {{uri: '{theirs}', format: text}}}}
    overwrite: {{block: storage.write, config: {{uri: '{theirs}', value: stolen}}}}
    copy: {{block: storage.copy, config: {{source: '{theirs}', target: '${{run.scratch}}/x'}}}}
    list: {{block: storage.list, config: {{pattern: '{root}/namespaces/**'}}}}
    watch: {{block: storage.exists, config: {{uri: '{root}/namespaces/team-b/'}}}}
    dots: {{block: storage.read, config: {{uri: '{root}/namespaces/team-a/../team-b/x'}}}}
    mine: {{block: storage.write, config: {{uri: '${{artifacts}}/ok.json', value: 1}}}}""",
        )
    )
    status, out = await _outputs(h, "reach")
    assert status == "failed"
    for step in ("read", "overwrite", "copy", "list", "watch", "dots"):
        assert (out[step]["error_class"], out[step]["error_code"]) == (
            "rejected",
            "storage.refused",
        ), (step, out[step])
        assert (
            "namespace team-a" in out[step]["error_message"] or "'..'" in out[step]["error_message"]
        ), out[step]["error_message"]
    assert out["mine"]["status"] == "succeeded"
    assert out["mine"]["output"]["uri"] == f"{root}/namespaces/team-a/ok.json"
    assert await h.storage.read_bytes(theirs) == original  # untouched
    # ctx.storage itself refuses, whatever block holds it.
    step = h.storage.for_step("team-a")
    for attempt in (
        step.read_bytes(theirs),
        step.write_bytes(theirs, b"x"),
        step.list(f"{root}/namespaces/team-b/"),
        step.delete(theirs),
    ):
        with pytest.raises(PermissionError, match=r"(outside|beyond) namespace team-a"):
            await attempt
    async with open_store(settings(s3_server)) as s3:  # where it all went, seen from outside
        stored = [i.uri async for page in s3.list(root + "/") for i in page]
    assert {u.removeprefix(root + "/").split("/")[1] for u in stored} == {"team-a", "team-b"}
