"""No index is a plain prefix of another on the same table.

Every attempt changes status twice on the hot path, and a status change is never a HOT
update, so each one inserts into every index of ``step_attempts``: an index whose columns
begin another index (or unique key) costs those insertions and serves no lookup the longer
one does not. Partial indexes are left out (their predicate is what they are for).

A unit test of ``store.schema.tables`` itself: it imports the module below the door on purpose.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, Table, UniqueConstraint

from dirigent.engine.store.schema import tables as t


def _keys(table: Table) -> list[tuple[str, tuple[str, ...], bool]]:
    """(name, columns, plain) of every index and unique key whose parts are all columns."""
    keys: list[tuple[str, tuple[str, ...], bool]] = []
    for index in table.indexes:
        if not all(isinstance(e, Column) for e in index.expressions):
            continue
        partial = index.dialect_options["postgresql"].get("where") is not None
        keys.append((str(index.name), tuple(c.name for c in index.columns), not partial))
    for constraint in table.constraints:
        if isinstance(constraint, UniqueConstraint):
            keys.append((str(constraint.name), tuple(c.name for c in constraint.columns), False))
    if table.primary_key.columns:
        keys.append(("pkey", tuple(c.name for c in table.primary_key.columns), False))
    return keys


def redundant(table: Table) -> list[tuple[str, str]]:
    """(plain index, the key it begins) pairs."""
    keys = _keys(table)
    return [
        (name, other)
        for name, cols, plain in keys
        if plain
        for other, longer, _ in keys
        if other != name and longer[: len(cols)] == cols
    ]


def test_no_plain_index_begins_another_key() -> None:
    found = {table.name: redundant(table) for table in t.metadata.sorted_tables}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_check_finds_a_prefix() -> None:
    from sqlalchemy import BigInteger, MetaData, Text

    table = Table(
        "x",
        MetaData(),
        Column("id", BigInteger, primary_key=True),
        Column("run_id", BigInteger),
        Column("step", Text),
        Column("number", BigInteger),
        UniqueConstraint("run_id", "step", "number", name="uq_x"),
        Index("ix_x_run_id_step", "run_id", "step"),
    )
    assert redundant(table) == [("ix_x_run_id_step", "uq_x")]
