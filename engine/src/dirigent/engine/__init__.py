"""dirigent's engine: manifests, validation, the store, the runtime, and the door to them all.

Processes use ``Engine`` (``dirigent.engine.engine``) and nothing below it.

The names below are loaded on first use (PEP 562): importing a light module of the engine
(``dirigent.engine.problems``, ``dirigent.engine.views``) must not pull in the store and
SQLAlchemy, so a client command such as ``dirigent runs list`` starts in a fraction of the time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dirigent.engine.engine import Deleted, Engine, RunFilter, RunRequest
    from dirigent.engine.problems import EngineUnavailable, ProblemsError
    from dirigent.engine.settings import EngineSettings

_HOMES = {
    "Deleted": "dirigent.engine.engine",
    "Engine": "dirigent.engine.engine",
    "RunFilter": "dirigent.engine.engine",
    "RunRequest": "dirigent.engine.engine",
    "EngineUnavailable": "dirigent.engine.problems",
    "ProblemsError": "dirigent.engine.problems",
    "EngineSettings": "dirigent.engine.settings",
}

__all__ = [
    "Deleted",
    "Engine",
    "EngineSettings",
    "EngineUnavailable",
    "ProblemsError",
    "RunFilter",
    "RunRequest",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
