"""``$events``: one stream per run; reconnecting with Last-Event-ID loses and repeats nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import yaml

from dirigent.api.auth import StreamBudget
from dirigent.api.client import StreamEvent
from dirigent.api.streams import StreamSettings
from dirigent.engine import Engine
from tests.support.api import TOKEN, Api, served
from tests.support.waiting import eventually

SLOW_FAN_OUT = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: slow-fan}
spec:
  params: {type: object, properties: {n: {type: array}}}
  steps:
    each: {block: testing.record, forEach: "${params.n}", config: {path: "%s", sleep: 0.05}}
    done: {block: core.noop, dependsOn: [each]}
"""


async def engine_story(engine: Engine, run_id: int) -> list[str]:
    """Every event the engine holds for the run, in order, by cursor."""
    cursors: list[str] = []
    end = await engine.runs.end_cursor("default", run_id)
    assert end is not None
    async for event in engine.events.subscribe(run_id=run_id, cursor=engine.events.beginning()):
        cursors.append(event.cursor)
        if event.cursor == end:
            return cursors
    raise AssertionError("unreachable: subscribe never ends on its own")


async def test_reconnecting_with_last_event_id_loses_nothing_and_repeats_nothing(
    api: Api, tmp_path: Path
) -> None:
    await api.client.apply("default", yaml.safe_load(SLOW_FAN_OUT % (tmp_path / "rec.log")))
    run = await api.client.run("default", "slow-fan", {"n": list(range(40))})
    received: list[StreamEvent] = []
    last: str | None = None
    connections = 0
    disconnected_while_running = 0
    async with api.h.workers(1, concurrency=2):
        while not received or received[-1].event != "end":
            connections += 1
            async for event in api.client.events("default", run.run_id, last_event_id=last):
                received.append(event)
                last = event.id
                if event.event != "end" and len(received) % 17 == 0:
                    status = await api.h.status(run.run_id)
                    disconnected_while_running += status == "running"
                    break  # drop the connection mid-run; the next loop resumes from `last`
    assert await api.h.status(run.run_id) == "succeeded"
    assert connections >= 5 and disconnected_while_running >= 3

    transitions = [e for e in received if e.event in ("run", "step", "attempt")]
    assert [e.data["cursor"] for e in transitions] == await engine_story(api.h.engine, run.run_id)
    logs = [e.data["id"] for e in received if e.event == "log"]
    assert logs == [line["id"] for line in await api.h.logs(run.run_id)]
    assert len(logs) >= 80  # 40 items x (recorded + finished)
    assert received[-1].data == {"run_id": run.run_id, "status": "succeeded"}
    assert [e.event for e in received].count("end") == 1


async def test_a_finished_run_replays_its_story_and_ends(api: Api, tmp_path: Path) -> None:
    await api.client.apply("default", yaml.safe_load(SLOW_FAN_OUT % (tmp_path / "rec.log")))
    run = await api.client.run("default", "slow-fan", {"n": [1, 2]})
    async with api.h.workers(1):
        assert await api.h.until_finished(run.run_id) == "succeeded"
    first = [e async for e in api.client.events("default", run.run_id)]
    assert first[0].event == "run" and first[-1].event == "end"
    statuses = [e.data["status"] for e in first if e.event == "run"]
    assert statuses[-1] == "succeeded"
    # Resuming from the last transition before `end` sends only `end`.
    resumed = [
        e async for e in api.client.events("default", run.run_id, last_event_id=first[-2].id)
    ]
    assert [e.event for e in resumed] == ["end"]


async def test_a_stream_past_its_lifetime_ends_with_expired(db_url: str, tmp_path: Path) -> None:
    async with served(
        db_url, tmp_path / "a", stream_settings=StreamSettings(poll=0.05, lifetime=0.5)
    ) as api:
        await api.client.apply("default", yaml.safe_load(SLOW_FAN_OUT % (tmp_path / "rec.log")))
        run = await api.client.run("default", "slow-fan", {"n": [1]})
        events = [e async for e in api.client.events("default", run.run_id)]
        assert events[-1].event == "expired" and "end" not in [e.event for e in events]
        # The client's watch reopens after `expired` and finishes the story once work happens.
        async with api.h.workers(1):
            watched = [e async for e in api.client.watch("default", run.run_id)]
        assert watched[-1].event == "end"


async def test_open_streams_are_budgeted_per_principal(db_url: str, tmp_path: Path) -> None:
    async with served(db_url, tmp_path / "a", streams=StreamBudget(2)) as api:
        await api.client.apply("default", yaml.safe_load(SLOW_FAN_OUT % (tmp_path / "rec.log")))
        run = await api.client.run("default", "slow-fan", {"n": [1]})
        path = f"/api/v1/namespaces/default/runs/{run.run_id}/$events"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        timeout = httpx.Timeout(5, read=None)
        async with httpx.AsyncClient(base_url=api.url, headers=headers, timeout=timeout) as http:
            async with http.stream("GET", path) as one, http.stream("GET", path) as two:
                assert one.status_code == two.status_code == 200
                third = await http.get(path)
                assert third.status_code == 429
                assert third.json()["code"] == "stream.budget.exceeded"

            # Closing the two gives their budget back once the server sees them go.
            async def reopens() -> bool:
                async with http.stream("GET", path) as again:
                    return again.status_code == 200

            await eventually(reopens, timeout=10, what="the stream budget given back")


async def test_many_followers_share_one_feed_and_each_reads_the_whole_story(
    db_url: str, tmp_path: Path
) -> None:
    async with served(db_url, tmp_path / "a", streams=StreamBudget(100)) as api:
        await many_followers(api, tmp_path)


async def many_followers(api: Api, tmp_path: Path) -> None:
    """Followers on a real server each get every event in order from one shared reading of
    the run; some drop and resume with Last-Event-ID while it runs and lose nothing."""
    await api.client.apply("default", yaml.safe_load(SLOW_FAN_OUT % (tmp_path / "rec.log")))
    run = await api.client.run("default", "slow-fan", {"n": list(range(30))})
    feeds = api.server.app.state.feeds
    followers, droppers = 24, 6
    connected: list[int] = []

    async def follow(drop_every: int | None) -> tuple[list[StreamEvent], int]:
        received: list[StreamEvent] = []
        last: str | None = None
        connections = 0
        while not received or received[-1].event != "end":
            connections += 1
            async for event in api.client.events("default", run.run_id, last_event_id=last):
                if connections == 1 and not received:
                    connected.append(1)
                received.append(event)
                last = event.id
                if drop_every and event.event != "end" and len(received) % drop_every == 0:
                    break
        return received, connections

    tasks = [asyncio.create_task(follow(None)) for _ in range(followers - droppers)]
    tasks += [asyncio.create_task(follow(11 + i)) for i in range(droppers)]

    def connections() -> int:
        assert not [t for t in tasks if t.done()], "a follower stopped before the run began"
        return len(connected)

    await eventually(
        connections,
        lambda n: n >= followers,
        timeout=30,
        every=0.02,
        what=f"all {followers} followers connected",
    )
    assert len(feeds) == 1  # one reading of the run, however many follow it
    async with api.h.workers(1, concurrency=2):
        results = await asyncio.gather(*tasks)
    assert len(feeds) == 0  # the last follower to leave stopped it

    story = await engine_story(api.h.engine, run.run_id)
    lines = [line["id"] for line in await api.h.logs(run.run_id)]
    assert len(lines) >= 60
    for received, _ in results:
        assert [
            e.data["cursor"] for e in received if e.event in ("run", "step", "attempt")
        ] == story
        assert [e.data["id"] for e in received if e.event == "log"] == lines
        assert [e.event for e in received].count("end") == 1 and received[-1].event == "end"
    assert all(connections > 3 for _, connections in results[-droppers:])


async def test_a_follower_resuming_before_the_shared_feed_reads_from_its_own_position(
    api: Api, tmp_path: Path
) -> None:
    await api.client.apply("default", yaml.safe_load(SLOW_FAN_OUT % (tmp_path / "rec.log")))
    run = await api.client.run("default", "slow-fan", {"n": [1, 2, 3]})
    async with api.h.workers(1):
        assert await api.h.until_finished(run.run_id) == "succeeded"
    whole = [e async for e in api.client.events("default", run.run_id)]
    middle = whole[len(whole) // 2]
    # A follower from the middle holds the run's shared feed, which starts there; one from
    # the beginning, joining meanwhile, must still read the whole story.
    late = api.client.events("default", run.run_id, last_event_id=middle.id)
    first = await anext(late)
    assert first.id == whole[len(whole) // 2 + 1].id
    again = [e async for e in api.client.events("default", run.run_id)]
    rest = [first] + [e async for e in late]
    assert [(e.event, e.data) for e in again] == [(e.event, e.data) for e in whole]
    assert [e.id for e in rest] == [e.id for e in whole[len(whole) // 2 + 1 :]]
