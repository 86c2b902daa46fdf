"""Graph facts about a pipeline's steps, shared by validation, export and the runtime.

The DAG is ``dependsOn`` edges between step names. Unknown names are ignored here (the
validator reports them); a cycle is reported by ``find_cycle`` and makes ``layers`` raise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def _edges(deps: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    return {name: [d for d in ds if d in deps] for name, ds in deps.items()}


def find_cycle(deps: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle as a closed walk ``[a, b, a]``, or None. Deterministic: names visited in order."""
    edges = _edges(deps)
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state and (found := visit(dep)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for name in sorted(edges):
        if name not in state and (found := visit(name)) is not None:
            return list(reversed(found))  # read in edge direction: upstream first
    return None


def layers(deps: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Steps grouped by depth (roots first), alphabetical within a layer. Raises on a cycle."""
    edges = _edges(deps)
    depth: dict[str, int] = {}
    remaining = dict(edges)
    while remaining:
        ready = [n for n, ds in remaining.items() if all(d in depth for d in ds)]
        if not ready:
            raise ValueError(f"steps form a cycle: {find_cycle(deps)}")
        for name in ready:
            depth[name] = 1 + max((depth[d] for d in remaining[name]), default=-1)
            del remaining[name]
    out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for name, d in depth.items():
        out[d].append(name)
    return [sorted(layer) for layer in out]


def topological_order(deps: Mapping[str, Sequence[str]]) -> list[str]:
    return [name for layer in layers(deps) for name in layer]


def ancestors(deps: Mapping[str, Sequence[str]], name: str) -> set[str]:
    """Every step upstream of ``name`` (transitively); safe on cycles."""
    edges = _edges(deps)
    seen: set[str] = set()
    todo = list(edges.get(name, []))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, []))
    return seen


def dependents(deps: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The reverse edges: step -> the steps that depend on it directly, alphabetical."""
    out: dict[str, list[str]] = {name: [] for name in deps}
    for name, ds in deps.items():
        for d in ds:
            if d in out:
                out[d].append(name)
    return {k: sorted(v) for k, v in out.items()}
