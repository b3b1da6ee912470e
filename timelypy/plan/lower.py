"""Lowering: a plan built out of a dataflow's input collections.

:func:`lower` walks the plans once, with three memos:

* **sub-plans** -- equal (frozen, so hashable) sub-plans are built once per scope;
* **arrangements** -- each ``(sub-plan, key columns)`` is arranged once (``arrange_by_key``
  of ``(key, row)``) and shared by every :class:`~.nodes.Join`, :class:`~.nodes.Semijoin`,
  :class:`~.nodes.Antijoin` and :class:`~.nodes.Aggregate` that keys it that way, as
  differential dataflow shares arrangements ("Arrangements" in the Differential Dataflow book);
* **loops** -- a :class:`~.nodes.Fixpoint` is one ``scope.iterative()`` loop with one
  :class:`~timelypy.differential.collection.Variable` per name, shared by the fixpoints that
  differ only in ``output``.

Inside a fixpoint's bodies, a sub-plan that reads no relation of the loop (no free
:class:`~.nodes.Recur` of its names) is built in the enclosing scope and entered once: the
loop's operators then see only the changes of each round, and an arrangement made outside is
entered as it is (no copy per round). Fixpoints nest: a fixpoint in a body is a loop in the
loop's scope.

Expressions are compiled once to Python functions (:mod:`.compiler`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Tuple

from ..differential.collection import Arranged, Collection, Variable
from . import nodes as n
from .compiler import (
    compile_expression,
    compile_join_output,
    compile_predicate,
    compile_row,
    key_function,
)
from .errors import PlanError

if TYPE_CHECKING:
    from ..dataflow.scope import Scope

__all__ = ["PlanError", "lower", "lower_one", "free_recurs"]


def lower(plans: Mapping[str, n.Plan], inputs: Mapping[str, Collection]) -> Dict[str, Collection]:
    """Build every plan of ``plans`` out of the ``inputs`` collections (``Scan(name)`` is
    ``inputs[name]``); returns the collections by the plans' names.

    The plans share work: equal sub-plans are built once, each (sub-plan, key) is arranged
    once, fixpoints differing only in ``output`` are one loop.

    Example: ``lower({"path": Fixpoint(...)}, {"edge": edges})["path"].capture()``."""
    lowering = _Lowering(inputs)
    return {name: lowering.build(plan, lowering.root) for name, plan in plans.items()}


def lower_one(plan: n.Plan, inputs: Mapping[str, Collection]) -> Collection:
    """:func:`lower` of one plan.

    Example: ``lower_one(Distinct(Scan("edge")), {"edge": edges})``."""
    return lower({"": plan}, inputs)[""]


def free_recurs(plan: n.Plan) -> FrozenSet[str]:
    """The names of the :class:`~.nodes.Recur` nodes of ``plan`` not bound by a fixpoint
    inside it (the relations of enclosing loops it reads).

    Example: ``free_recurs(Join(Recur("p"), Scan("e"), (1,), (0,), ()))`` is ``{"p"}``."""
    return _FreeNames().of(plan)


class _Interner:
    """Structural identity of plans: equal plans get equal ints.

    Frozen dataclasses hash and compare by walking the whole tree, every time; a plan whose
    sub-plans are shared (a stratum's fixpoint read by every later one) is a DAG whose tree can
    be exponentially larger. The interner visits each distinct object once, so the lowering's
    memos cost time linear in the plan's objects."""

    def __init__(self) -> None:
        self.by_object: Dict[int, int] = {}
        self.alive: List[n.Plan] = []  # keeps the objects whose ids are keys of by_object
        self.canonical: Dict[Tuple[Any, ...], int] = {}

    def __call__(self, plan: n.Plan) -> int:
        hit = self.by_object.get(id(plan))
        if hit is not None:
            return hit
        key: List[Any] = [type(plan)]
        for f in dataclasses.fields(plan):  # type: ignore[arg-type]  # every node is a dataclass
            value = getattr(plan, f.name)
            if isinstance(value, n.Plan):
                key.append(("plan", self(value)))
            elif isinstance(value, tuple) and any(isinstance(v, n.Plan) for v in value):
                key.append(("plans", tuple(self(v) for v in value)))
            else:
                key.append(value)
        cid = self.canonical.setdefault(tuple(key), len(self.canonical))
        self.by_object[id(plan)] = cid
        self.alive.append(plan)
        return cid


class _FreeNames:
    """:func:`free_recurs` with a memo by structural identity (bodies repeat sub-plans)."""

    def __init__(self, intern: Optional[_Interner] = None) -> None:
        self.intern = intern or _Interner()
        self.memo: Dict[int, FrozenSet[str]] = {}

    def of(self, plan: n.Plan) -> FrozenSet[str]:
        cid = self.intern(plan)
        hit = self.memo.get(cid)
        if hit is not None:
            return hit
        if isinstance(plan, n.Recur):
            out: FrozenSet[str] = frozenset((plan.name,))
        elif isinstance(plan, n.Fixpoint):
            inner = frozenset().union(*(self.of(b) for b in plan.bodies))
            outer = frozenset().union(*(self.of(i) for i in plan.initial))
            out = outer | (inner - frozenset(plan.names))
        else:
            out = frozenset().union(*(self.of(c) for c in plan.children()))
        self.memo[cid] = out
        return out


class _Context:
    """One scope of the lowering: the root, or the body of a fixpoint (``names`` its loop
    variables); memos of built sub-plans, arrangements and loops in this scope."""

    def __init__(
        self,
        scope: "Scope",
        parent: Optional["_Context"],
        variables: Optional[Dict[str, Variable]] = None,
    ) -> None:
        self.scope = scope
        self.parent = parent
        self.variables: Dict[str, Variable] = variables or {}
        self.names = frozenset(self.variables)
        self.built: Dict[int, Collection] = {}
        self.arranged: Dict[Tuple[Any, ...], Arranged] = {}
        self.loops: Dict[Tuple[Any, ...], Dict[str, Collection]] = {}


class _Lowering:
    def __init__(self, inputs: Mapping[str, Collection]) -> None:
        if not inputs:
            raise PlanError("lower: no input collections given (a plan reads at least one Scan)")
        self.inputs = dict(inputs)
        for name, c in self.inputs.items():
            if not isinstance(c, Collection):
                raise PlanError(f"lower: input {name!r} is not a Collection: {c!r}")
        scope = next(iter(self.inputs.values())).scope
        for name, c in self.inputs.items():
            if c.scope.subgraph is not scope.subgraph:
                raise PlanError(f"lower: input {name!r} is in another scope than the others")
        self.root = _Context(scope, None)
        self.intern = _Interner()
        self.free = _FreeNames(self.intern)

    def _outside(self, plan: n.Plan, ctx: _Context) -> bool:
        """Whether ``plan`` reads nothing of ``ctx``'s loop (so it is built outside it)."""
        return ctx.parent is not None and not (self.free.of(plan) & ctx.names)

    # ------------------------------------------------------------------ memos
    def build(self, plan: n.Plan, ctx: _Context) -> Collection:
        cid = self.intern(plan)
        hit = ctx.built.get(cid)
        if hit is None:
            if self._outside(plan, ctx):
                assert ctx.parent is not None
                hit = self.build(plan, ctx.parent).enter(ctx.scope)
            else:
                hit = self._node(plan, ctx)
            ctx.built[cid] = hit
        return hit

    def arranged(self, plan: n.Plan, key: Tuple[int, ...], ctx: _Context) -> Arranged:
        """``plan``'s rows as ``(key, row)``, arranged by key (once per plan and key)."""
        memo = ("by key", self.intern(plan), key)
        hit = ctx.arranged.get(memo)
        if hit is None:
            if self._outside(plan, ctx):
                assert ctx.parent is not None
                hit = self.arranged(plan, key, ctx.parent).enter(ctx.scope)
            else:
                keyed = self.build(plan, ctx).map(_keyed(key_function(key)))
                hit = keyed.arrange_by_key(name=f"Arrange{list(key)}")
            ctx.arranged[memo] = hit
        return hit

    def keys(self, plan: n.Plan, key: Tuple[int, ...], distinct: bool, ctx: _Context) -> Arranged:
        """The keys of ``plan``'s rows (distinct, or with their total weights), arranged by
        self (once per plan, key and kind)."""
        memo = ("keys", self.intern(plan), key, distinct)
        hit = ctx.arranged.get(memo)
        if hit is None:
            if self._outside(plan, ctx):
                assert ctx.parent is not None
                hit = self.keys(plan, key, distinct, ctx.parent).enter(ctx.scope)
            else:
                keys = self.build(plan, ctx).map(key_function(key))
                if distinct:
                    keys = keys.distinct()
                hit = keys.arrange_by_self(name=f"ArrangeKeys{list(key)}")
            ctx.arranged[memo] = hit
        return hit

    # ------------------------------------------------------------------ nodes
    def _node(self, plan: n.Plan, ctx: _Context) -> Collection:
        handler = _NODES.get(type(plan))
        if handler is None:
            raise PlanError(f"lower: not a plan node: {plan!r}")
        return handler(self, plan, ctx)

    def scan(self, plan: n.Scan, ctx: _Context) -> Collection:
        try:
            return self.inputs[plan.name]
        except KeyError:
            raise PlanError(
                f"Scan({plan.name!r}): no input collection named {plan.name!r} "
                f"(inputs: {sorted(self.inputs)})"
            ) from None

    def recur(self, plan: n.Recur, ctx: _Context) -> Collection:
        try:
            return ctx.variables[plan.name]
        except KeyError:
            raise PlanError(
                f"Recur({plan.name!r}) outside every Fixpoint that defines {plan.name!r}"
            ) from None

    def union(self, plan: n.Union, ctx: _Context) -> Collection:
        if not plan.inputs:  # the empty relation: any input, nothing of it
            return next(iter(self.inputs.values())).filter(_nothing)
        first, *rest = [self.build(p, ctx) for p in plan.inputs]
        return first.concat(*rest)

    def join(self, plan: n.Join, ctx: _Context) -> Collection:
        _same_arity(plan, plan.left_key, plan.right_key)
        left = self.arranged(plan.left, plan.left_key, ctx)
        right = self.arranged(plan.right, plan.right_key, ctx)
        return left.join_core(right, compile_join_output(plan.output, "Join"), name="Join")

    def semijoin(self, plan: n.Semijoin, ctx: _Context) -> Collection:
        _same_arity(plan, plan.left_key, plan.right_key)
        left = self.arranged(plan.left, plan.left_key, ctx)
        keys = self.keys(plan.right, plan.right_key, False, ctx)
        return left.semijoin(keys, name="Semijoin").map(_value)

    def antijoin(self, plan: n.Antijoin, ctx: _Context) -> Collection:
        _same_arity(plan, plan.left_key, plan.right_key)
        left = self.arranged(plan.left, plan.left_key, ctx)
        keys = self.keys(plan.right, plan.right_key, True, ctx)
        matched = left.semijoin(keys, name="Antijoin").map(_value)
        return self.build(plan.left, ctx).concat(matched.negate())

    def aggregate(self, plan: n.Aggregate, ctx: _Context) -> Collection:
        what = f"Aggregate[{plan.kind}]"
        value = None if plan.value is None else compile_expression(plan.value, what)
        logic = _aggregate_logic(plan.kind, value)
        arranged = self.arranged(plan.input, plan.group, ctx)
        reduced = arranged.reduce(logic, name=f"Aggregate[{plan.kind}]")
        return reduced.map(_group_row(len(plan.group)))

    def fixpoint(self, plan: n.Fixpoint, ctx: _Context) -> Collection:
        loop = (
            plan.names,
            tuple(self.intern(p) for p in plan.initial),
            tuple(self.intern(p) for p in plan.bodies),
        )
        outs = ctx.loops.get(loop)
        if outs is None:
            if len(set(plan.names)) != len(plan.names):
                raise PlanError(f"Fixpoint: a name is defined twice in {plan.names}")
            initial = [self.build(p, ctx) for p in plan.initial]
            outs = ctx.scope.iterative(
                lambda child: self._loop(plan, initial, child, ctx), name="Fixpoint"
            )
            ctx.loops[loop] = outs
        return outs[plan.output]

    def _loop(
        self, plan: n.Fixpoint, initial: List[Collection], child: "Scope", ctx: _Context
    ) -> Dict[str, Collection]:
        variables = {
            name: Variable.new_from(start.enter(child)) for name, start in zip(plan.names, initial)
        }
        inner = _Context(child, ctx, variables)
        results = [self.build(body, inner) for body in plan.bodies]
        for name, result in zip(plan.names, results):
            variables[name].set(result)
        return {name: result.leave() for name, result in zip(plan.names, results)}


def _project(self: _Lowering, plan: n.Project, ctx: _Context) -> Collection:
    return self.build(plan.input, ctx).map(compile_row(plan.columns))


def _select(self: _Lowering, plan: n.Select, ctx: _Context) -> Collection:
    return self.build(plan.input, ctx).filter(compile_predicate(plan.predicate, "Select"))


def _bound(bound: Optional[n.Bound], what: str) -> Optional[Callable[[Any], Any]]:
    if bound is None:
        return None
    if isinstance(bound, n.Fn):
        return bound.fn
    return compile_expression(bound, what)


def _temporal_filter(self: _Lowering, plan: n.TemporalFilter, ctx: _Context) -> Collection:
    return self.build(plan.input, ctx).temporal_filter(
        _bound(plan.lower, "TemporalFilter.lower"), _bound(plan.upper, "TemporalFilter.upper")
    )


def _freeze_at(self: _Lowering, plan: n.FreezeAt, ctx: _Context) -> Collection:
    cutoff = _bound(plan.cutoff, "FreezeAt.cutoff")
    if cutoff is None:
        raise PlanError(f"FreezeAt: the cutoff is None in {plan!r} (give an expression or Fn)")
    return self.build(plan.input, ctx).freeze_at(cutoff)


def _unary(method: str, with_fn: bool) -> Callable[[_Lowering, Any, _Context], Collection]:
    def build(self: _Lowering, plan: Any, ctx: _Context) -> Collection:
        c = self.build(plan.input, ctx)
        return getattr(c, method)(plan.fn.fn) if with_fn else getattr(c, method)()

    return build


_NODES: Dict[type, Callable[[_Lowering, Any, _Context], Collection]] = {
    n.Scan: _Lowering.scan,
    n.Recur: _Lowering.recur,
    n.Project: _project,
    n.Select: _select,
    n.Map: _unary("map", True),
    n.Filter: _unary("filter", True),
    n.FlatMap: _unary("flat_map", True),
    n.Union: _Lowering.union,
    n.Negate: _unary("negate", False),
    n.Consolidate: _unary("consolidate", False),
    n.Distinct: _unary("distinct", False),
    n.Threshold: _unary("threshold", True),
    n.Count: _unary("count", False),
    n.Reduce: _unary("reduce", True),
    n.Join: _Lowering.join,
    n.Semijoin: _Lowering.semijoin,
    n.Antijoin: _Lowering.antijoin,
    n.Aggregate: _Lowering.aggregate,
    n.Fixpoint: _Lowering.fixpoint,
    n.TemporalFilter: _temporal_filter,
    n.FreezeAt: _freeze_at,
}


def _same_arity(plan: n.Plan, left: Tuple[int, ...], right: Tuple[int, ...]) -> None:
    if len(left) != len(right):
        raise PlanError(
            f"{type(plan).__name__}: left key {left} and right key {right} have different lengths"
        )


def _keyed(key: Callable[[Any], Any]) -> Callable[[Any], Tuple[Any, Any]]:
    def keyed(row: Any) -> Tuple[Any, Any]:
        return (key(row), row)

    return keyed


def _nothing(_record: Any) -> bool:
    return False


def _value(kv: Tuple[Any, Any]) -> Any:
    return kv[1]


def _group_row(width: int) -> Callable[[Tuple[Any, Any]], Tuple[Any, ...]]:
    """``(key, agg)`` back to the row ``group + (agg,)`` (the key of one column is the bare
    field, of several a tuple)."""
    if width == 1:
        return _pair_row

    def row(kv: Tuple[Any, Any]) -> Tuple[Any, ...]:
        key: Tuple[Any, ...] = kv[0]  # a tuple: the key of several (or no) columns
        return key + (kv[1],)

    return row


def _pair_row(kv: Tuple[Any, Any]) -> Tuple[Any, ...]:
    return (kv[0], kv[1])


def _aggregate_logic(
    kind: str, value: Optional[Callable[[Any], Any]]
) -> Callable[[Any, List[Tuple[Any, int]]], List[Tuple[Any, int]]]:
    """The reduce logic of an aggregate: rows of positive weight only, each counted weight
    times; no output for a group without such a row."""
    if kind == "count":

        def count(_key: Any, rows: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
            total = sum(w for _r, w in rows if w > 0)
            return [(total, 1)] if total else []

        return count
    assert value is not None  # Aggregate checks that sum/min/max have a value
    if kind == "sum":

        def add(_key: Any, rows: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
            pos = [(value(r), w) for r, w in rows if w > 0]
            return [(sum(v * w for v, w in pos), 1)] if pos else []

        return add
    pick = min if kind == "min" else max

    def extreme(_key: Any, rows: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
        vals = [value(r) for r, w in rows if w > 0]
        return [(pick(vals), 1)] if vals else []

    return extreme
