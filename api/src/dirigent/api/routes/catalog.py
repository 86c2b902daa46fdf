"""The catalog: every installed block with its published config and output schemas, and the
storage schemes the installation serves.

Bounded by the installed code rather than by the database, so each is one list, not a page.
Both are read with the permission to list blocks: they are the same catalog.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from dirigent.api.deps import CanListBlocks, EngineDep
from dirigent.api.models import BlockView, StorageSchemeView
from dirigent.api.problems import not_found

router = APIRouter(tags=["catalog"])


@router.get("/blocks", operation_id="listBlocks", summary="The installed blocks and their schemas")
async def list_blocks(engine: EngineDep, _: CanListBlocks) -> list[BlockView]:
    return engine.system.blocks()


@router.get("/blocks/{block_id}", operation_id="getBlock", summary="One block's published schemas")
async def get_block(
    engine: EngineDep,
    _: CanListBlocks,
    block_id: Annotated[str, Path(min_length=1, max_length=200)],
) -> BlockView:
    for view in engine.system.blocks():
        if view.id == block_id:
            return view
    raise not_found("block", block_id)


@router.get(
    "/storage-schemes",
    operation_id="listStorageSchemes",
    summary="The URI schemes storage serves (file://, and each installed backend's)",
)
async def list_storage_schemes(engine: EngineDep, _: CanListBlocks) -> list[StorageSchemeView]:
    return engine.system.storage_schemes()
