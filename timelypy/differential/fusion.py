"""Fusion of linear operators on update triples: a chain compiled into ONE list comprehension.

A chain of map / filter / flat_map / explode / join_function / temporal filters / negate /
inspect and time changes on ``(data, time, diff)`` updates runs as one pass with no
intermediate lists (the linear operators of the Differential Dataflow book commute with the
collection's updates, so a chain of them is one function of each update). The generated code
only calls the user's functions; it is built from a fixed grammar, never from user text.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Dict, List, Sequence, Tuple

from ..dataflow.fusion import compile_comprehension

__all__ = ["ACCUMULABLE", "fuse_accumulate", "fuse_updates"]


def _is_var(expr: str, base: str) -> bool:
    return expr == base or (expr.startswith(base) and expr[len(base) :].isdigit())


def fuse_updates(
    stages: Sequence[Tuple[str, Any]], tjoin: Callable
) -> Callable[[List[Any]], List[Any]]:
    """One function applying a chain of linear operators to a batch of ``(data, time, diff)``.

    ``stages`` are ``(kind, function)`` pairs; ``tjoin`` is the lattice join of times (for
    ``join_function``). Every re-binding uses a fresh variable name, so nested loops in the
    comprehension never see a value rebound by an inner clause.
    """
    if len(stages) == 1 and stages[0][0] == "inspect":
        return _over_updates(_inspect_only(stages[0][1]))
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
        elif kind == "temporal":
            clauses.append(f"for t{i}, r{i} in {name}({d}, {t})")
            t, r = f"t{i}", f"({r}) * r{i}"
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
    return _over_updates(compile_comprehension(f"[({d}, {t}, {r}) {' '.join(clauses)}]", ns))


def _over_updates(fn: Callable[[List[Any]], List[Any]]) -> Callable[[List[Any]], List[Any]]:
    """Mark ``fn`` as a function of ``(data, time, diff)`` updates: an operator whose batch
    function fails then names the record, its time and its diff apart (``OperatorError``)."""
    fn.over_updates = True  # type: ignore[attr-defined]
    return fn


ACCUMULABLE = frozenset({"map", "filter", "flat_map", "explode", "negate"})
"""The stage kinds :func:`fuse_accumulate` fuses: they keep every update's time."""


def fuse_accumulate(
    stages: Sequence[Tuple[str, Any]],
) -> Callable[[List[Any], Dict[Any, Dict[Any, int]]], None]:
    """``run(data, pending)``: apply a chain of time-preserving linear operators (kinds in
    :data:`ACCUMULABLE`; none at all is the identity) to a batch of ``(data, time, diff)`` and
    add each resulting diff into ``pending[time][record]`` (dicts created as needed).

    This is the chain fused into a consuming reduction: no update triple is built for the
    chain's output and no intermediate list, one dict update per produced record. Sums may be
    zero (the consumer skips them). Records keep first-seen order per time, as the unfused
    chain followed by a dict accumulation would.
    """
    ns: Dict[str, Any] = {"_NO_TIME": object()}
    d, r = "d", "r"
    body: List[str] = []
    depth = 0

    def line(text: str) -> None:
        body.append("    " * depth + text)

    for i, (kind, f) in enumerate(stages):
        name = f"f{i}"
        ns[name] = f
        if kind == "map":
            d = f"{name}({d})"
        elif kind == "filter":
            if not _is_var(d, "d"):
                line(f"d{i} = {d}")
                d = f"d{i}"
            line(f"if {name}({d}):")
            depth += 1
        elif kind == "flat_map":
            line(f"for d{i} in {name}({d}):")
            d = f"d{i}"
            depth += 1
        elif kind == "explode":
            line(f"for d{i}, r{i} in {name}({d}):")
            d, r = f"d{i}", f"({r}) * r{i}"
            depth += 1
        elif kind == "negate":
            r = f"-({r})"
        else:
            raise ValueError(f"cannot fuse {kind!r} into an accumulation")
    if not _is_var(d, "d"):
        line(f"k = {d}")
        d = "k"
    line(f"acc[{d}] = get({d}, 0) + {r}")
    inner = "\n".join("        " + b for b in body)
    source = (
        "def run(data, pending):\n"
        "    last = _NO_TIME\n"
        "    acc = get = None\n"
        "    for d, t, r in data:\n"
        "        if t != last:\n"
        "            acc = pending.get(t)\n"
        "            if acc is None:\n"
        "                acc = pending[t] = {}\n"
        "            get = acc.get\n"
        "            last = t\n"
        f"{inner}\n"
    )
    exec(compile(source, "<timelypy-fused-accumulate>", "exec"), ns)  # noqa: S102 - fixed grammar
    return ns["run"]


def _inspect_only(f: Callable) -> Callable[[List[Any]], List[Any]]:
    """A lone inspect: call ``f`` on every update (the loop runs in C) and pass the batch on
    as it is (batches are shared read-only, so no copy is needed)."""

    def run(data: List[Any]) -> List[Any]:
        deque(map(f, data), maxlen=0)
        return data

    return run
