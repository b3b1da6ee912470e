"""Datalog test programs: the classic ones, and hypothesis strategies for random ones.

``CLASSIC`` maps a name to a :class:`Classic` (program text, its input relations' facts for a
small case, and a generator of facts for a graph of any size). ``random_programs()`` draws
random *stratified* programs (:class:`RandomProgram`): 1-2 input relations and 1-4 derived
ones of arity 1-3 over small numbers (0..4), rules of 1-3 body atoms with constants, repeated
variables and ``_``, comparisons, head arithmetic kept in the domain by ``% 5``, recursion
(self and mutual) inside a stratum, negation of earlier strata, and at most one aggregate in a
later stratum. ``fact_changes(program)`` draws steps of fact changes that keep every input a
set: ``(relation, fact, +1)`` inserts an absent fact, ``(relation, fact, -1)`` removes a
present one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

from hypothesis import strategies as st

__all__ = [
    "Classic",
    "CLASSIC",
    "RandomProgram",
    "random_programs",
    "fact_changes",
    "DOMAIN",
]

DOMAIN = 5
"""Values of random programs are 0..DOMAIN-1."""

Facts = Dict[str, List[Tuple[Any, ...]]]


@dataclass(frozen=True)
class Classic:
    """A classic program, facts for a small case, and facts for ``n`` nodes (random graph)."""

    text: str
    small: Facts
    generate: Callable[[int, int], Facts] = field(compare=False)


def _graph(n: int, seed: int, degree: int = 2) -> List[Tuple[int, int]]:
    rng = random.Random(seed)
    return sorted({(rng.randrange(n), rng.randrange(n)) for _ in range(n * degree)})


def _tree(n: int, seed: int) -> List[Tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randrange(i), i) for i in range(1, n)]


TRANSITIVE_CLOSURE = """
// transitive closure
.decl edge(x: number, y: number)
.input edge
.decl path(x: number, y: number)
.output path
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
"""

SAME_GENERATION = """
.decl parent(child: number, parent: number)
.input parent
.decl person(x: number)
person(x) :- parent(x, _).
person(y) :- parent(_, y).
.decl sg(x: number, y: number)
.output sg
sg(x, x) :- person(x).
sg(x, y) :- parent(x, p), sg(p, q), parent(y, q).
"""

UNREACHABLE = """
/* nodes not reachable from a source: negation of a recursive relation */
.decl edge(x: number, y: number)
.input edge
.decl source(x: number)
.input source
.decl node(x: number)
node(x) :- edge(x, _).
node(y) :- edge(_, y).
.decl reach(x: number)
reach(x) :- source(x).
reach(y) :- reach(x), edge(x, y).
.decl unreachable(x: number)
.output unreachable
unreachable(x) :- node(x), !reach(x).
"""

POINTS_TO = """
// Andersen-style points-to analysis
.decl new(v: symbol, o: symbol)
.decl assign(to: symbol, from: symbol)
.decl load(to: symbol, base: symbol)
.decl store(base: symbol, from: symbol)
.input new, assign, load, store
.decl pt(v: symbol, o: symbol)
.decl hpt(o: symbol, f: symbol)
.output pt
pt(v, o) :- new(v, o).
pt(v, o) :- assign(v, w), pt(w, o).
pt(v, o) :- load(v, b), pt(b, h), hpt(h, o).
hpt(h, o) :- store(b, w), pt(b, h), pt(w, o).
"""

EVEN_ODD = """
// several mutually recursive relations: paths of even and odd length, and nodes on cycles
.decl edge(x: number, y: number)
.input edge
.decl even(x: number, y: number)
.decl odd(x: number, y: number)
.decl cyclic(x: number)
.output even, odd, cyclic
odd(x, y) :- edge(x, y).
even(x, z) :- odd(x, y), edge(y, z).
odd(x, z) :- even(x, y), edge(y, z).
cyclic(x) :- even(x, x).
cyclic(x) :- odd(x, x).
"""

AGGREGATES = """
// aggregates over a recursive relation, in a later stratum
.decl edge(x: number, y: number)
.input edge
.decl path(x: number, y: number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl node(x: number)
node(x) :- edge(x, _).
node(y) :- edge(_, y).
.decl reach_count(x: number, c: number)
reach_count(x, c) :- node(x), c = count : { path(x, _) }.
.decl reach_sum(x: number, s: number)
reach_sum(x, s) :- node(x), s = sum y : { path(x, y) }.
.decl nearest(x: number, m: number)
nearest(x, m) :- node(x), m = min y : { path(x, y), y != x }.
.decl farthest(x: number, m: number)
farthest(x, m) :- node(x), m = max y : path(x, y).
.decl total(n: number)
total(n) :- n = count : { path(_, _) }.
.output reach_count, reach_sum, nearest, farthest, total
"""


def _points_to(n: int, seed: int) -> Facts:
    rng = random.Random(seed)
    var = [f"v{i}" for i in range(n)]
    obj = [f"o{i}" for i in range(max(1, n // 4))]
    pick = rng.choice
    return {
        "new": sorted({(pick(var), pick(obj)) for _ in range(n // 2)}),
        "assign": sorted({(pick(var), pick(var)) for _ in range(n)}),
        "load": sorted({(pick(var), pick(var)) for _ in range(n // 4)}),
        "store": sorted({(pick(var), pick(var)) for _ in range(n // 4)}),
    }


CLASSIC: Dict[str, Classic] = {
    "transitive_closure": Classic(
        TRANSITIVE_CLOSURE,
        {"edge": [(1, 2), (2, 3), (3, 4), (4, 2), (5, 6)]},
        lambda n, seed: {"edge": _graph(n, seed)},
    ),
    "same_generation": Classic(
        SAME_GENERATION,
        {"parent": [(2, 1), (3, 1), (4, 2), (5, 3), (6, 3), (7, 4)]},
        lambda n, seed: {"parent": [(c, p) for p, c in _tree(n, seed)]},
    ),
    "unreachable": Classic(
        UNREACHABLE,
        {"edge": [(1, 2), (2, 3), (4, 5), (5, 4), (3, 1)], "source": [(1,)]},
        lambda n, seed: {"edge": _graph(n, seed, 1), "source": [(0,)]},
    ),
    "points_to": Classic(
        POINTS_TO,
        {
            "new": [("a", "A"), ("b", "B"), ("c", "C")],
            "assign": [("d", "a"), ("e", "d")],
            "store": [("a", "b"), ("d", "c")],
            "load": [("f", "e")],
        },
        _points_to,
    ),
    "even_odd": Classic(
        EVEN_ODD,
        {"edge": [(1, 2), (2, 3), (3, 1), (3, 4), (4, 5)]},
        lambda n, seed: {"edge": _graph(n, seed, 1)},
    ),
    "aggregates": Classic(
        AGGREGATES,
        {"edge": [(1, 2), (2, 3), (3, 1), (3, 4), (5, 5), (6, 1)]},
        lambda n, seed: {"edge": _graph(n, seed, 1)},
    ),
}


@dataclass(frozen=True)
class RandomProgram:
    """A random program: its text, its input relations' arities, its derived relations."""

    text: str
    inputs: Dict[str, int]
    derived: Tuple[str, ...]


_VARS = ("x", "y", "z", "w")


@st.composite
def _atom_args(draw: Any, arity: int, pool: Tuple[str, ...]) -> List[str]:
    """Arguments of a positive atom: mostly variables, sometimes a constant or ``_``."""
    out = []
    for _ in range(arity):
        kind = draw(st.integers(0, 9))
        if kind < 7:
            out.append(draw(st.sampled_from(pool)))
        elif kind < 9:
            out.append(str(draw(st.integers(0, DOMAIN - 1))))
        else:
            out.append("_")
    return out


def _bound(args: List[str]) -> List[str]:
    return [a for a in args if a in _VARS]


@st.composite
def _rule(
    draw: Any,
    head: str,
    arity: Dict[str, int],
    positive: List[str],
    negative: List[str],
) -> str:
    """One safe rule for ``head``: 1-3 positive atoms over ``positive``, maybe a comparison,
    maybe a negated atom over ``negative``, head terms from the bound variables."""
    pool = _VARS[: draw(st.integers(1, 3))]
    body, bound = [], []
    for _ in range(draw(st.integers(1, 3))):
        rel = draw(st.sampled_from(positive))
        args = draw(_atom_args(arity[rel], pool))
        body.append(f"{rel}({', '.join(args)})")
        bound += [v for v in _bound(args) if v not in bound]
    if not bound:  # a head needs a variable or constants only; keep one variable bound
        rel = draw(st.sampled_from(positive))
        args = ["x"] + ["_"] * (arity[rel] - 1)
        body.append(f"{rel}({', '.join(args)})")
        bound = ["x"]
    if draw(st.booleans()):
        a, b = draw(st.sampled_from(bound)), draw(st.sampled_from(bound + ["1", "2", "3"]))
        body.append(f"{a} {draw(st.sampled_from(['=', '!=', '<', '<=', '>', '>=']))} {b}")
    if negative and draw(st.integers(0, 2)) == 0:
        rel = draw(st.sampled_from(negative))
        args = [draw(st.sampled_from(bound + ["_", "0", "1"])) for _ in range(arity[rel])]
        body.append(f"!{rel}({', '.join(args)})")
    terms = []
    for _ in range(arity[head]):
        kind = draw(st.integers(0, 9))
        v = draw(st.sampled_from(bound))
        if kind < 7:
            terms.append(v)
        elif kind < 9:
            terms.append(f"({v} + {draw(st.integers(1, 3))}) % {DOMAIN}")
        else:
            terms.append(str(draw(st.integers(0, DOMAIN - 1))))
    return f"{head}({', '.join(terms)}) :- {', '.join(body)}."


@st.composite
def random_programs(draw: Any, aggregate: bool = True) -> RandomProgram:
    """A random stratified program (see the module's docstring)."""
    n_in = draw(st.integers(1, 2))
    n_derived = draw(st.integers(1, 3))
    inputs = {f"e{i}": draw(st.integers(1, 3)) for i in range(n_in)}
    derived = [f"r{i}" for i in range(n_derived)]
    arity: Dict[str, int] = dict(inputs)
    stratum: Dict[str, int] = {}
    level = 0
    for name in derived:
        arity[name] = draw(st.integers(1, 3))
        level += draw(st.integers(0, 1))
        stratum[name] = level
    lines = [f".decl {n}({', '.join(f'a{i}: number' for i in range(k))})" for n, k in arity.items()]
    lines.append(f".input {', '.join(inputs)}")
    for name in derived:
        positive = list(inputs) + [d for d in derived if stratum[d] <= stratum[name]]
        negative = [d for d in derived if stratum[d] < stratum[name]] + list(inputs)
        base = list(inputs) + [d for d in derived if stratum[d] < stratum[name]]
        lines.append(draw(_rule(name, arity, base, negative)))  # a rule not using its stratum
        for _ in range(draw(st.integers(0, 2))):
            lines.append(draw(_rule(name, arity, positive, negative)))
    names = tuple(derived)
    if aggregate and draw(st.booleans()):
        lines += draw(_aggregate_rule(arity, list(inputs) + derived))
        names += ("agg",)
    lines.append(f".output {', '.join(names)}")
    return RandomProgram("\n".join(lines) + "\n", inputs, names)


@st.composite
def _aggregate_rule(draw: Any, arity: Dict[str, int], over: List[str]) -> List[str]:
    """``agg(g, v) :- R(g, ...), v = KIND e : { S(g, ...) }`` in a stratum of its own."""
    outer = draw(st.sampled_from(over))
    inner = draw(st.sampled_from(over))
    kind = draw(st.sampled_from(["count", "sum", "min", "max"]))
    outer_args = ["g"] + ["_"] * (arity[outer] - 1)
    inner_args = ["g"] + [f"v{i}" for i in range(1, arity[inner])]
    if kind != "count" and arity[inner] == 1:
        value = "g + 1"
    else:
        value = "v1" if arity[inner] > 1 else ""
    if kind == "count":
        value = ""
    agg = f"{kind} {value} : {{ {inner}({', '.join(inner_args)}) }}"
    return [
        ".decl agg(g: number, v: number)",
        f"agg(g, v) :- {outer}({', '.join(outer_args)}), v = {agg}.",
    ]


@st.composite
def fact_changes(
    draw: Any, program: RandomProgram, steps: int = 4, per_step: int = 6
) -> List[List[Tuple[str, Tuple[int, ...], int]]]:
    """Steps of changes to ``program``'s inputs, each an insert of an absent fact (+1) or a
    removal of a present one (-1), starting from empty inputs."""
    present: Dict[str, set] = {name: set() for name in program.inputs}
    out = []
    for _ in range(draw(st.integers(1, steps))):
        step = []
        for _ in range(draw(st.integers(0, per_step))):
            name = draw(st.sampled_from(sorted(program.inputs)))
            fact = tuple(draw(st.integers(0, DOMAIN - 1)) for _ in range(program.inputs[name]))
            diff = -1 if fact in present[name] else 1
            (present[name].discard if diff < 0 else present[name].add)(fact)
            step.append((name, fact, diff))
        out.append(step)
    return out
