"""Fusion of record-level linear operators: a map/filter/flat_map chain becomes one comprehension.

A fused chain costs one pass and no intermediate lists. The generated code only calls the
user's functions; it is built from a fixed grammar, never from user text. The grammar for
differential update triples (explode, join_function, negate, time changes) is
:mod:`timelypy.differential.fusion`, built on :func:`compile_comprehension`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

__all__ = ["compile_comprehension", "fuse_records"]


def compile_comprehension(expr: str, namespace: Dict[str, Any]) -> Callable[[List[Any]], List[Any]]:
    """``run(data)`` returning ``expr`` (a comprehension over ``data`` built from a fixed
    grammar; ``namespace`` binds the names it calls)."""
    source = f"def run(data):\n    return {expr}\n"
    exec(compile(source, "<timelypy-fused>", "exec"), namespace)  # noqa: S102 - fixed grammar
    return namespace["run"]


def fuse_records(stages: Sequence[Tuple[str, Callable]]) -> Callable[[List[Any]], List[Any]]:
    """One function applying a chain of record-level map/filter/flat_map to a batch."""
    ns: Dict[str, Any] = {}
    cur = "x"
    clauses = ["for x in data"]
    for i, (kind, f) in enumerate(stages):
        name = f"f{i}"
        ns[name] = f
        if kind == "map":
            cur = f"{name}({cur})"
        elif kind == "filter":
            if cur != "x" and not cur.startswith("x"):
                clauses.append(f"for x{i} in ({cur},)")
                cur = f"x{i}"
            clauses.append(f"if {name}({cur})")
        elif kind == "flat_map":
            clauses.append(f"for x{i} in {name}({cur})")
            cur = f"x{i}"
        else:
            raise ValueError(f"cannot fuse {kind!r} into a record chain")
    if len(stages) == 1 and stages[0][0] == "map":
        ns["_map"] = map
        return compile_comprehension("list(_map(f0, data))", ns)
    return compile_comprehension(f"[{cur} {' '.join(clauses)}]", ns)
