"""The child side: read one JSON request a line, evaluate it with jq, write one JSON answer.

Request: ``{"program": str, "inputs": [value, ...]}`` — every input is evaluated with the one
compiled program. Answer: ``{"results": [[value, ...], ...]}`` (all results of each input)
or ``{"error": "compile" | "runtime", "message": str}``. Nothing but jq and json is imported,
so a child starts in a fraction of a second.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import jq


def answer(request: dict[str, Any]) -> dict[str, Any]:
    try:
        program = jq.compile(request["program"])
    except ValueError as err:
        return {"error": "compile", "message": str(err)}
    try:
        return {"results": [list(program.input_value(v).all()) for v in request["inputs"]]}
    except ValueError as err:
        return {"error": "runtime", "message": str(err)}


def main() -> None:
    for line in sys.stdin:
        sys.stdout.write(json.dumps(answer(json.loads(line))) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
