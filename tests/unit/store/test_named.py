"""Named parameters number in order of first use, keep casts, and refuse typos.

A unit test of ``store.named`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

import pytest

from dirigent.engine.store.named import named


def test_names_number_in_order_of_first_use_and_repeat() -> None:
    sql, args = named(
        "INSERT INTO t (a, b) VALUES (:b_val, :a_val::text) WHERE :b_val = 'x::y'",
        a_val=1,
        b_val=2,
    )
    assert sql == "INSERT INTO t (a, b) VALUES ($1, $2::text) WHERE $1 = 'x::y'"
    assert args == [2, 1]


def test_a_missing_value_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="run_id"):
        named("SELECT :run_id, :step", step="a")


def test_an_unused_value_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="stpe"):
        named("SELECT :step", step="a", stpe="b")
