"""dirigent's engine: manifests, validation, the store, the runtime, and the door to them all.

Processes use ``Engine`` (``dirigent.engine.engine``) and nothing below it.
"""

from dirigent.engine.engine import Deleted, Engine, RunFilter, RunRequest
from dirigent.engine.problems import EngineUnavailable, ProblemsError
from dirigent.engine.settings import EngineSettings

__all__ = [
    "Deleted",
    "Engine",
    "EngineSettings",
    "EngineUnavailable",
    "ProblemsError",
    "RunFilter",
    "RunRequest",
]
