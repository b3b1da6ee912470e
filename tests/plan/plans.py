"""Hypothesis strategies: random relational plans and random fact changes.

Plans read the input relations ``a``, ``b``, ``c`` (rows are pairs of ints 0..3) and use every
relational node: ``Project`` and ``Select`` with random expressions, ``Join`` with random key
columns and output expressions, ``Semijoin``, ``Antijoin``, ``Aggregate`` of every kind,
``Union``, ``Distinct``, ``Negate``, ``Consolidate`` and ``Fixpoint`` over one to three
mutually recursive relations.

A fixpoint is made to converge the way a Datalog stratum does: each body is
``Distinct(Union(Recur(own), rule))`` with ``rule`` monotone in the loop's relations (no
``Negate``; ``Antijoin`` and ``Aggregate`` only over sub-plans that read nothing of the loop),
and the values a body computes stay in a finite domain (every arithmetic result is taken
``% 4``), so every round adds rows to finitely many and the loop stops.

Changes keep every input a set (insert a missing row, remove a present one), as Datalog facts.

With ``temporal=True`` plans also hold ``TemporalFilter`` and ``FreezeAt`` nodes whose bounds
are expressions over the row (values around the times of :func:`fact_changes`), at the root
and inside fixpoint bodies (where they keep the body monotone: a filter per time).
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from hypothesis import strategies as st

from timelypy import plan as P

INPUTS = ("a", "b", "c")
DOMAIN = 4
LOOP_ARITY = 2

Row = Tuple[int, ...]
Changes = List[Dict[str, Dict[Row, int]]]


def _column_or_const(draw: Any, arity: int) -> P.Expression:
    if arity and draw(st.integers(0, 3)):
        return P.Column(draw(st.integers(0, arity - 1)))
    return P.Const(draw(st.integers(0, DOMAIN - 1)))


def expression(draw: Any, arity: int, bounded: bool, depth: int = 2) -> P.Expression:
    """A value expression over rows of ``arity`` columns (``bounded``: in 0..3)."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return _column_or_const(draw, arity)
    op = draw(st.sampled_from(P.expressions.ARITH_OPS))
    left = expression(draw, arity, False, depth - 1)
    if op in ("/", "%"):
        right: P.Expression = P.Const(draw(st.integers(1, 3)))
    else:
        right = expression(draw, arity, False, depth - 1)
    e: P.Expression = P.Arith(op, left, right)
    if bounded:
        e = P.Arith("%", e, P.Const(DOMAIN))
    return e


def predicate(draw: Any, arity: int) -> P.Expression:
    """A comparison, or a conjunction of up to three."""
    terms = [
        P.Compare(
            draw(st.sampled_from(P.expressions.COMPARE_OPS)),
            expression(draw, arity, False, 1),
            expression(draw, arity, False, 1),
        )
        for _ in range(draw(st.integers(1, 2)))
    ]
    if len(terms) == 1 and draw(st.booleans()):
        return terms[0]
    return P.And(tuple(terms))


def _columns(draw: Any, arity: int, k: int) -> Tuple[int, ...]:
    return tuple(draw(st.integers(0, arity - 1)) for _ in range(k)) if arity else ()


def _project(draw: Any, child: P.Plan, child_arity: int, arity: int, bounded: bool) -> P.Plan:
    return P.Project(child, tuple(expression(draw, child_arity, bounded) for _ in range(arity)))


class _Gen:
    """Draws plans; ``loop`` is the names of the enclosing fixpoints' relations (all of
    arity 2), ``depth`` bounds the tree."""

    def __init__(self, draw: Any, fixpoints: int, temporal: bool = False) -> None:
        self.draw = draw
        self.fixpoints = fixpoints
        self.count = 0
        self.temporal = temporal

    def plan(self, arity: int, depth: int, loop: Tuple[str, ...]) -> P.Plan:
        """A plan of rows of ``arity`` columns; inside a loop (``loop`` not empty) monotone in
        the loop's relations, with values in a finite domain."""
        draw = self.draw
        bounded = bool(loop)
        kinds = ["leaf"]
        if depth > 0:
            kinds += ["project", "select", "join", "semijoin", "antijoin", "union", "distinct"]
            kinds += ["aggregate"] if arity >= 1 else []
            if not loop:
                kinds += ["negate", "consolidate"]
            if self.fixpoints > 0 and arity == LOOP_ARITY:
                kinds += ["fixpoint", "fixpoint"]
            if self.temporal and arity >= 1:
                kinds += ["temporal_filter", "temporal_filter", "freeze_at"]
        kind = draw(st.sampled_from(kinds))
        d = depth - 1
        if kind == "leaf":
            if loop and draw(st.integers(0, 2)):
                leaf: P.Plan = P.Recur(draw(st.sampled_from(loop)))
            else:
                leaf = P.Scan(draw(st.sampled_from(INPUTS)))
            if arity == 2 and draw(st.integers(0, 2)):
                return leaf
            return _project(draw, leaf, 2, arity, bounded)
        if kind == "project":
            m = draw(st.integers(1, 3))
            return _project(draw, self.plan(m, d, loop), m, arity, bounded)
        if kind == "select":
            return P.Select(self.plan(arity, d, loop), predicate(draw, arity))
        if kind == "join":
            m1, m2 = draw(st.integers(1, 3)), draw(st.integers(1, 3))
            k = draw(st.integers(0, min(2, m1, m2)))
            output = tuple(expression(draw, m1 + m2, bounded, 1) for _ in range(arity))
            return P.Join(
                self.plan(m1, d, loop),
                self.plan(m2, d, loop),
                _columns(draw, m1, k),
                _columns(draw, m2, k),
                output,
            )
        if kind in ("semijoin", "antijoin"):
            m = draw(st.integers(1, 3))
            k = draw(st.integers(0, min(2, arity, m)))
            left = self.plan(arity, d, loop)
            # the right side of an antijoin reads nothing of the loop (negation is stratified)
            right = self.plan(m, d, loop if kind == "semijoin" else ())
            node = P.Semijoin if kind == "semijoin" else P.Antijoin
            return node(left, right, _columns(draw, arity, k), _columns(draw, m, k))
        if kind == "aggregate":
            m = draw(st.integers(1, 3))
            group = _columns(draw, m, arity - 1)
            agg = draw(st.sampled_from(P.nodes.AGGREGATES))
            value = None if agg == "count" else expression(draw, m, False, 1)
            node: P.Plan = P.Aggregate(self.plan(m, d, ()), group, agg, value)
            if loop:  # the aggregate's values are constant in the loop, keep them in range
                node = _project(draw, node, arity, arity, True)
            return node
        if kind == "union":
            n = draw(st.integers(2, 3))
            return P.Union(tuple(self.plan(arity, d, loop) for _ in range(n)))
        if kind == "distinct":
            return P.Distinct(self.plan(arity, d, loop))
        if kind == "negate":
            return P.Negate(self.plan(arity, d, loop))
        if kind == "consolidate":
            return P.Consolidate(self.plan(arity, d, loop))
        if kind == "temporal_filter":
            lower, upper = self.bound(arity), self.bound(arity)
            return P.TemporalFilter(self.plan(arity, d, loop), lower, upper)
        if kind == "freeze_at":
            return P.FreezeAt(self.plan(arity, d, loop), self.bound(arity, none=False))
        return self.fixpoint(d, loop)

    def bound(self, arity: int, none: bool = True) -> Any:
        """A time bound: ``None``, or a column or a small expression of the row (values
        around ``0..max_times``)."""
        draw = self.draw
        if none and not draw(st.integers(0, 3)):
            return None
        return expression(draw, arity, False, 1)

    def fixpoint(self, depth: int, loop: Tuple[str, ...]) -> P.Plan:
        draw = self.draw
        self.fixpoints -= 1
        size = draw(st.integers(1, 3))
        names = tuple(f"r{self.count + i}" for i in range(size))
        self.count += size
        initial = tuple(self.plan(LOOP_ARITY, depth, loop) for _ in names)
        inner = loop + names
        bodies = tuple(
            P.Distinct(P.Union((P.Recur(name), self.plan(LOOP_ARITY, depth, inner))))
            for name in names
        )
        return P.Fixpoint(names, initial, bodies, draw(st.sampled_from(names)))


@st.composite
def relational_plans(
    draw: Any, max_depth: int = 4, fixpoints: int = 2, temporal: bool = False
) -> P.Plan:
    """A random relational plan over the inputs ``a``, ``b``, ``c`` (``temporal``: with
    temporal filters and freeze_at)."""
    arity = draw(st.integers(1, 3))
    return _Gen(draw, fixpoints, temporal).plan(arity, draw(st.integers(2, max_depth)), ())


@st.composite
def recursive_plans(draw: Any, max_depth: int = 3) -> P.Plan:
    """A random plan whose root is a fixpoint of 1-3 mutually recursive relations."""
    return _Gen(draw, 2).fixpoint(draw(st.integers(1, max_depth)), ())


@st.composite
def fact_changes(draw: Any, max_times: int = 4, max_changes: int = 6) -> Changes:
    """Changes per time: ``[{input: {row: +1 or -1}}]``, every input a set at every time."""
    present: Dict[str, set] = {name: set() for name in INPUTS}
    rows = st.tuples(st.integers(0, DOMAIN - 1), st.integers(0, DOMAIN - 1))
    times: Changes = []
    for _ in range(draw(st.integers(1, max_times))):
        step: Dict[str, Dict[Row, int]] = {name: {} for name in INPUTS}
        for _ in range(draw(st.integers(0, max_changes))):
            name = draw(st.sampled_from(INPUTS))
            row = draw(rows)
            if row in step[name]:
                continue
            if row in present[name]:
                present[name].discard(row)
                step[name][row] = -1
            else:
                present[name].add(row)
                step[name][row] = 1
        times.append(step)
    return times


def accumulated(changes: Changes, upto: int) -> Dict[str, Dict[Row, int]]:
    """Every input's content after the changes of times ``0..upto``."""
    out: Dict[str, Dict[Row, int]] = {name: {} for name in INPUTS}
    for step in changes[: upto + 1]:
        for name, rows in step.items():
            for row, diff in rows.items():
                w = out[name].get(row, 0) + diff
                if w:
                    out[name][row] = w
                else:
                    out[name].pop(row, None)
    return out
