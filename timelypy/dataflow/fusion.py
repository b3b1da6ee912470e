"""Fusion of linear operators (seed 001): a chain of map / filter / flat_map (/ explode /
join_function / negate / time changes, for update triples) compiled into ONE list
comprehension, so the chain costs one pass and no intermediate lists.

The generated code only calls the user's functions; it is built from a fixed grammar, never
from user text.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

__all__ = ["fuse_records", "fuse_updates", "describe_chain"]

_RECORD_KINDS = ("map", "filter", "flat_map")
_UPDATE_KINDS = ("map", "filter", "flat_map", "explode", "join_function", "negate", "time",
                 "results_in", "inspect")


def describe_chain(stages: Sequence[Tuple[str, Any]]) -> str:
    return ">".join(kind for kind, _ in stages)


def _compile(expr: str, namespace: Dict[str, Any]) -> Callable[[List[Any]], List[Any]]:
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
        return _compile("list(_map(f0, data))", ns)
    return _compile(f"[{cur} {' '.join(clauses)}]", ns)


def _is_var(expr: str, base: str) -> bool:
    return expr == base or (expr.startswith(base) and expr[len(base):].isdigit())


def fuse_updates(stages: Sequence[Tuple[str, Any]], tjoin: Callable) -> Callable[[List[Any]], List[Any]]:
    """One function applying a chain of linear operators to a batch of ``(data, time, diff)``.

    Every re-binding uses a fresh variable name, so nested loops in the comprehension never see
    a value rebound by an inner clause.
    """
    ns: Dict[str, Any] = {"tjoin": tjoin}
    d, t, r = "d", "t", "r"
    clauses = ["for d, t, r in data"]
    for i, (kind, f) in enumerate(stages):
        name = f"f{i}"
        ns[name] = f
        if kind == "map":
            d = f"{name}({d})"
        elif kind == "filter":
            if not _is_var(d, "d"):
                clauses.append(f"for d{i} in ({d},)")
                d = f"d{i}"
            clauses.append(f"if {name}({d})")
        elif kind == "flat_map":
            clauses.append(f"for d{i} in {name}({d})")
            d = f"d{i}"
        elif kind == "explode":
            clauses.append(f"for d{i}, r{i} in {name}({d})")
            d, r = f"d{i}", f"({r}) * r{i}"
        elif kind == "join_function":
            clauses.append(f"for d{i}, t{i}, r{i} in {name}({d})")
            d, t, r = f"d{i}", f"tjoin({t}, t{i})", f"({r}) * r{i}"
        elif kind == "negate":
            r = f"-({r})"
        elif kind == "time":
            t = f"{name}({t})"
        elif kind == "results_in":
            clauses.append(f"for t{i} in ({name}({t}),)")
            clauses.append(f"if t{i} is not None")
            t = f"t{i}"
        elif kind == "inspect":
            clauses.append(f"for d{i}, t{i}, r{i} in (({d}, {t}, {r}),)")
            clauses.append(f"if {name}((d{i}, t{i}, r{i})) or True")
            d, t, r = f"d{i}", f"t{i}", f"r{i}"
        else:
            raise ValueError(f"cannot fuse {kind!r}")
    return _compile(f"[({d}, {t}, {r}) {' '.join(clauses)}]", ns)
