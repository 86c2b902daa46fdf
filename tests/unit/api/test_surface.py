"""The API's surface: models without the server, operations named, Problems, auth pieces."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dirigent.api.app import assemble
from dirigent.api.auth import Permission, Principal, StaticToken, StreamBudget, _TtlCache
from dirigent.api.openapi import document
from dirigent.api.problems import ApiProblem, status_for
from dirigent.api.streams import Position
from dirigent.engine.shapes.problems import problem
from dirigent.engine.shapes.views import encode_cursor


def test_models_and_client_import_without_the_server() -> None:
    code = (
        "import sys, dirigent.api.models, dirigent.api.client\n"
        "loaded = {'fastapi', 'starlette', 'uvicorn'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_operation_has_an_id_and_a_summary_and_errors_are_problems() -> None:
    spec = document(assemble())
    operations = [op for path in spec["paths"].values() for op in path.values()]
    ids = [op["operationId"] for op in operations]
    assert len(ids) == len(set(ids)) and all(op.get("summary") for op in operations)
    for op in operations:
        for status, response in op["responses"].items():
            if status[0] in "45":
                assert list(response["content"]) == ["application/problem+json"], op
    assert "HTTPValidationError" not in spec["components"]["schemas"]


@pytest.mark.parametrize(
    ("codes", "status"),
    [
        (["run.not_found"], 404),
        (["run.pipeline.not_found"], 404),
        (["retry.step.not_failed"], 409),
        (["run.params.invalid"], 422),
        (["run.not_found", "run.params.invalid"], 422),
    ],
)
def test_engine_problems_map_to_statuses(codes: list[str], status: int) -> None:
    assert status_for([problem(c, "x") for c in codes]) == status


async def test_static_token_knows_only_its_own_token() -> None:
    auth = StaticToken("a" * 16)
    assert await auth.authenticate("a" * 16) == Principal("dev")
    assert await auth.authenticate("a" * 15) is None
    with pytest.raises(ValueError, match="16"):
        StaticToken("short")


def test_the_decision_cache_forgets_after_its_ttl_and_past_its_size() -> None:
    cache = _TtlCache(ttl=0, size=2)
    cache.put("k", True)
    assert cache.get("k") == (False, None)  # ttl 0: expired at once
    cache = _TtlCache(ttl=60, size=2)
    for key in ("a", "b", "c"):
        cache.put(key, key)
    assert cache.get("a") == (False, None) and cache.get("c") == (True, "c")


def test_the_stream_budget_refuses_past_its_size_and_takes_returns() -> None:
    budget, who = StreamBudget(2), Principal("p")
    budget.take(who)
    budget.take(who)
    with pytest.raises(ApiProblem) as refused:
        budget.take(who)
    assert (refused.value.status, refused.value.code) == (429, "stream.budget.exceeded")
    budget.give_back(who)
    budget.take(who)
    assert budget.held(who) == 2 and budget.held(Principal("other")) == 0


def test_a_stream_position_round_trips_and_refuses_foreign_ids() -> None:
    position = Position(xid=12, event=7, log=99)
    assert Position.parse(position.id()) == position
    assert Position.parse(None) == Position()
    for bad in ("nonsense", encode_cursor(1, 2)):
        with pytest.raises(ApiProblem) as refused:
            Position.parse(bad)
        assert refused.value.code == "stream.cursor.invalid"


def test_a_permission_reads_as_rbac_does() -> None:
    assert str(Permission("create", "pipelines", "run")) == "create pipelines/run"
    assert str(Permission("list", "runs")) == "list runs"
