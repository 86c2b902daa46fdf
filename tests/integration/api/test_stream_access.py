"""An open stream checks its access again: a revoked permission or a token no longer accepted
closes it with an ``end`` frame that says why (issue 28, point 6)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml

from dirigent.api.auth import Permission, Principal, StaticToken
from dirigent.api.streams import StreamSettings
from tests.support.api import TOKEN, served

SLOW = """
apiVersion: dirigent.dev/v1alpha1
kind: Pipeline
metadata: {name: slow}
spec:
  steps:
    nap: {block: core.sleep, config: {seconds: 60}}
"""


class Revocable(StaticToken):
    """The dev token's policy, with a switch: what a RoleBinding deleted (or a token that
    expired) looks like to the API."""

    def __init__(self) -> None:
        super().__init__(TOKEN)
        self.may_read = True
        self.token_valid = True

    async def authenticate(self, token: str) -> Principal | None:
        return await super().authenticate(token) if self.token_valid else None

    async def authorize(
        self, principal: Principal, permission: Permission, namespace: str | None
    ) -> bool:
        return self.may_read or permission.verb != "get"


async def _end_of_stream(url: str, run_id: int, revoke: object) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    path = f"{url}/api/v1/namespaces/default/runs/{run_id}/$events"
    async with (
        httpx.AsyncClient(timeout=20) as http,
        http.stream("GET", path, headers=headers) as response,
    ):
        assert response.status_code == 200
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: ") and event is None:
                event = line.removeprefix("event: ")
                if callable(revoke):
                    revoke()  # the stream is open and has sent its first frame
                    revoke = None
            elif line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event == "end":
                found: dict[str, object] = json.loads(line.removeprefix("data: "))
                return found
    raise AssertionError("the stream closed without an end frame")


@pytest.mark.parametrize(
    ("what", "reason"),
    [
        ("may_read", "dev may no longer get runs in namespace default"),
        ("token_valid", "the token that opened this stream is no longer accepted"),
    ],
)
async def test_a_stream_ends_when_its_access_is_gone(
    db_url: str, tmp_path: Path, what: str, reason: str
) -> None:
    auth = Revocable()
    settings = StreamSettings(poll=0.1, lifetime=60, recheck=0.3)
    async with served(db_url, tmp_path / "a", stream_settings=settings, auth=auth) as api:
        await api.client.apply("default", yaml.safe_load(SLOW))
        run = await api.client.run("default", "slow")  # queued: no worker, it never ends
        end = await _end_of_stream(api.url, run.run_id, lambda: setattr(auth, what, False))
    assert end == {"run_id": run.run_id, "reason": reason}
