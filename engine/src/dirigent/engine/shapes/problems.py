"""Problems: the one shape every refusal takes, at every door.

A problem names *where* (a location such as ``spec.steps.push.dependsOn[0]``), *what* (a
stable dotted code, public API like a block id), and *how to fix it* (a sentence a person can
act on). Validation never stops at the first problem: callers collect lists of them, so a
manifest with five mistakes is answered with five problems in one pass.

The exception tree::

    DirigentError                 base of everything the engine raises on purpose
    └── ProblemsError             carries one or more Problems (validation, apply, runs)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue


class Problem(BaseModel):
    """One thing wrong with an input, located precisely."""

    model_config = ConfigDict(frozen=True)

    code: str = Field(description="Stable dotted code, e.g. pipeline.dag.cycle.")
    message: str = Field(description="What is wrong and how to fix it.")
    location: str = Field(default="", description="Where, e.g. spec.steps.push.dependsOn[0].")
    params: dict[str, JsonValue] = Field(default_factory=dict)
    file: str | None = None
    document: int | None = Field(
        default=None, description="0-based index in a multi-document file."
    )

    def at(self, *, file: str | None, document: int | None) -> Problem:
        """The same problem, attributed to a source document."""
        return self.model_copy(update={"file": file, "document": document})

    def render(self) -> str:
        where = []
        if self.file is not None:
            where.append(self.file if self.document is None else f"{self.file}#{self.document}")
        if self.location:
            where.append(self.location)
        prefix = ": ".join(where)
        return (
            f"{prefix}: {self.message} [{self.code}]" if prefix else f"{self.message} [{self.code}]"
        )


class DirigentError(Exception):
    """Base of every error the engine raises on purpose."""


class ProblemsError(DirigentError):
    """An operation refused, with every problem that made it refuse."""

    def __init__(self, problems: Sequence[Problem], summary: str | None = None) -> None:
        self.problems = list(problems)
        self.summary = summary or (
            self.problems[0].render()
            if len(self.problems) == 1
            else f"{len(self.problems)} problems"
        )
        super().__init__(self.summary)


class EngineUnavailable(DirigentError):
    """The database cannot be used at all: unreachable, or at another schema revision.

    Its message is one line saying what to do; a process prints it and exits non-zero.
    """


def location(*parts: str | int) -> str:
    """Join path parts into the dotted/indexed form: ("spec","dependsOn",0) -> spec.dependsOn[0]."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out:
            out += f".{part}"
        else:
            out = part
    return out


def problem(code: str, message: str, *where: str | int, **params: Any) -> Problem:
    """Build a problem at a location given as path parts."""
    return Problem(code=code, message=message, location=location(*where), params=params)


def sort_problems(problems: Iterable[Problem]) -> list[Problem]:
    """Deterministic order: by file, document, location, code."""
    return sorted(
        problems,
        key=lambda p: (
            p.file or "",
            p.document if p.document is not None else -1,
            p.location,
            p.code,
        ),
    )
