"""Reading what an attempt's references name: upstream outputs, fan-out grids and sizes.

The worker resolves a step's ``${steps.x...}`` references against these values; it asks
only for the steps the config names, read whole (``steps.x.output`` of a fan-out,
``steps.x.items``) or only at the attempt's own item index (``steps.x.item.output``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dirigent.engine.shapes.statuses import WorkStatus
from dirigent.engine.store.pool import Connection


@dataclass
class Upstream:
    """Values of the upstream steps one attempt reads, folded by step."""

    outputs: dict[str, Any] = field(default_factory=dict)  # step -> output (list for fan-outs)
    fan_outs: dict[str, list[Any]] = field(default_factory=dict)  # step -> item outputs by index
    grids: dict[str, list[Any]] = field(default_factory=dict)  # step -> item values


async def read_upstream(
    conn: Connection,
    run_id: int,
    *,
    whole: set[str],
    paired: set[str],
    item_index: int | None,
) -> Upstream:
    """The succeeded outputs of ``whole`` steps, and of ``paired`` ones at ``item_index``."""
    rows = await conn.fetch(
        f"""SELECT step, item_index, output FROM step_attempts
           WHERE run_id = $1 AND status = '{WorkStatus.SUCCEEDED}'
             AND (step = ANY($2) OR (step = ANY($3) AND item_index = $4))""",
        run_id,
        sorted(whole),
        sorted(paired),
        item_index,
    )
    grids = await conn.fetch(
        """SELECT step, index, value FROM run_items WHERE run_id = $1 AND step = ANY($2)
           ORDER BY index""",
        run_id,
        sorted(whole),
    )
    sizes = await conn.fetch(
        "SELECT step, items FROM run_steps WHERE run_id = $1 AND step = ANY($2)",
        run_id,
        sorted(whole | paired),
    )
    up = Upstream()
    for g in grids:
        up.grids.setdefault(g["step"], []).append(g["value"])
    for sz in sizes:
        if sz["items"] is not None:
            up.fan_outs[sz["step"]] = [None] * sz["items"]
    for r in rows:
        if r["item_index"] is None:
            up.outputs[r["step"]] = r["output"]
        elif r["step"] in up.fan_outs:
            up.fan_outs[r["step"]][r["item_index"]] = r["output"]
    for name, outs in up.fan_outs.items():
        if name in whole:
            up.outputs[name] = outs
    return up
