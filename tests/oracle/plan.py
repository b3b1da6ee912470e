"""The from-scratch evaluator of plans: the oracle every front-end producing plans is checked by.

``evaluate_plan(plan, inputs)`` computes a :mod:`timelypy.plan` plan on *Z-sets* (``dict record
-> nonzero int weight``) with plain dicts and loops, following the semantics table of
:mod:`timelypy.plan.nodes` line by line. It shares nothing with the engine or the lowering but
the node and expression classes (data): expressions are evaluated here by a tree walk of its
own, fixpoints by iterating the bodies on whole Z-sets until nothing changes (no hoisting, no
arrangements, no incremental anything).

The temporal nodes read the time: ``evaluate_plan(plan, inputs, time=T, history=h)`` evaluates
at the (outer, int) time ``T``, where ``h(t)`` gives the inputs accumulated at an earlier time
``t`` (what :class:`~timelypy.plan.FreezeAt` reads). Inside a fixpoint, round ``i`` at time
``T`` is the ``i``-th iterate of the loop on the inputs at ``T`` (the engine's ``Product(T,
i)``): a ``FreezeAt`` in a body reads its input at round ``i`` of the same loop at the earlier
time, evaluated from scratch there. Such a loop's body depends on the round, not only on
``x(i)``: it has reached its limit when ``x(i+1) == x(i)`` *and* the loops at the earlier
times have reached theirs by round ``i``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple

from timelypy.plan import nodes as n

__all__ = [
    "ZSet",
    "NonConvergenceError",
    "evaluate_plan",
    "evaluate_plans",
    "evaluate_expression",
    "consolidate",
]

Record = Any
ZSet = Dict[Record, int]
"""A multiset: ``record -> nonzero int weight``."""


class NonConvergenceError(RuntimeError):
    """A fixpoint did not reach a fixed point within the iteration cap."""


def consolidate(pairs: Iterable[Tuple[Record, int]]) -> ZSet:
    """Sum ``(record, weight)`` pairs into a :data:`ZSet`, dropping zero weights."""
    out: ZSet = {}
    for r, w in pairs:
        out[r] = out.get(r, 0) + w
    return {r: w for r, w in out.items() if w != 0}


# ---------------------------------------------------------------------------------------------
# Expressions


def _div(a: Any, b: Any) -> Any:
    if type(a) in (int, bool) and type(b) in (int, bool):
        return a // b
    return a / b


_ARITH: Dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _div,
    "%": lambda a, b: a % b,
    "min": lambda a, b: a if a <= b else b,
    "max": lambda a, b: a if a >= b else b,
}
_COMPARE: Dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def evaluate_expression(expr: Any, row: Tuple[Any, ...]) -> Any:
    """The value of ``expr`` on ``row``."""
    kind = type(expr).__name__
    if kind == "Column":
        return row[expr.index]
    if kind == "Const":
        return expr.value
    if kind == "Arith":
        return _ARITH[expr.op](
            evaluate_expression(expr.left, row), evaluate_expression(expr.right, row)
        )
    if kind == "Compare":
        return _COMPARE[expr.op](
            evaluate_expression(expr.left, row), evaluate_expression(expr.right, row)
        )
    if kind == "And":
        for t in expr.terms:
            if not evaluate_expression(t, row):
                return False
        return True
    if kind == "Row":
        return tuple(evaluate_expression(i, row) for i in expr.items)
    raise TypeError(f"not an expression: {expr!r}")


def _row(exprs: Iterable[Any], row: Tuple[Any, ...]) -> Tuple[Any, ...]:
    return tuple(evaluate_expression(x, row) for x in exprs)


def _key(row: Tuple[Any, ...], cols: Tuple[int, ...]) -> Tuple[Any, ...]:
    return tuple(row[c] for c in cols)


# ---------------------------------------------------------------------------------------------
# Plans


class _Shared:
    """What every scope of one evaluation shares: the inputs' history, the scopes by time and
    path (one memo each), the free-name cache and the iteration cap."""

    def __init__(
        self,
        history: Optional[Callable[[int], Mapping[str, Mapping[Record, int]]]],
        max_iterations: int,
    ) -> None:
        self.history = history
        self.max_iterations = max_iterations
        self.scopes: Dict[Tuple[Any, ...], "_Env"] = {}
        # free Recur names by plan object, for the whole evaluation (the plan stays alive)
        self.free: Dict[int, FrozenSet[str]] = {}

    def root(self, time: Optional[int], inputs: Optional[Mapping[str, ZSet]] = None) -> "_Env":
        key: Tuple[Any, ...] = (time, ())
        env = self.scopes.get(key)
        if env is None:
            if inputs is None:
                if self.history is None:
                    raise ValueError(
                        f"FreezeAt reads the inputs at time {time}: give evaluate_plan a history"
                    )
                inputs = _normalize(self.history(time))  # type: ignore[arg-type]
            env = _Env(inputs, {}, None, self, time, ())
            self.scopes[key] = env
        return env


class _Env:
    """The inputs, the values of the relations of the enclosing fixpoints (innermost in
    ``bound``, the rest through ``parent``), and a memo valid for these values; ``time`` the
    outer time, ``path`` the ``(fixpoint, round)`` of each enclosing loop, outermost first."""

    __slots__ = ("inputs", "bound", "parent", "memo", "shared", "time", "path")

    def __init__(
        self,
        inputs: Mapping[str, ZSet],
        bound: Dict[str, ZSet],
        parent: Optional["_Env"],
        shared: _Shared,
        time: Optional[int],
        path: Tuple[Tuple[n.Fixpoint, int], ...],
    ) -> None:
        self.inputs = inputs
        self.bound = bound
        self.parent = parent
        self.memo: Dict[Any, Any] = {}
        self.shared = shared
        self.time = time
        self.path = path

    @property
    def max_iterations(self) -> int:
        return self.shared.max_iterations

    @property
    def free(self) -> Dict[int, FrozenSet[str]]:
        return self.shared.free

    def recur(self, name: str) -> ZSet:
        env: Optional[_Env] = self
        while env is not None:
            if name in env.bound:
                return env.bound[name]
            env = env.parent
        raise ValueError(f"Recur({name!r}) outside every Fixpoint that defines {name!r}")

    def round(self, loop: n.Fixpoint, i: int, values: Dict[str, ZSet]) -> "_Env":
        """The scope of round ``i`` of ``loop`` (entered from this scope)."""
        path = self.path + ((loop, i),)
        key = (self.time, _path_key(path))
        env = self.shared.scopes.get(key)
        if env is None:
            env = _Env(self.inputs, values, self, self.shared, self.time, path)
            self.shared.scopes[key] = env
        return env

    def at(self, time: int) -> "_Env":
        """This scope (the same loops, the same rounds) at the outer time ``time``."""
        env = self.shared.scopes.get((time, _path_key(self.path)))
        if env is not None:
            return env
        env = self.shared.root(time)
        for loop, i in self.path:
            rounds = _loop_rounds(loop, env)
            env = env.round(loop, i, rounds[min(i, len(rounds) - 1)])
        return env


def _path_key(path: Tuple[Tuple[n.Fixpoint, int], ...]) -> Tuple[Tuple[int, int], ...]:
    return tuple((id(loop), i) for loop, i in path)


def evaluate_plan(
    plan: n.Plan,
    inputs: Mapping[str, Mapping[Record, int]],
    *,
    time: Optional[int] = None,
    history: Optional[Callable[[int], Mapping[str, Mapping[Record, int]]]] = None,
    max_iterations: int = 100,
) -> ZSet:
    """``plan`` evaluated from scratch on ``inputs`` (name -> Z-set; a name that is absent is
    an empty relation, zero weights are ignored) at ``time``, the inputs at earlier times given
    by ``history`` (both needed by the temporal nodes only). Returns a fresh consolidated
    Z-set; :class:`NonConvergenceError` if a fixpoint runs more than ``max_iterations``
    rounds."""
    env = _Shared(history, max_iterations).root(time, _normalize(inputs))
    return dict(_eval(plan, env))


def evaluate_plans(
    plans: Mapping[str, n.Plan],
    inputs: Mapping[str, Mapping[Record, int]],
    *,
    time: Optional[int] = None,
    history: Optional[Callable[[int], Mapping[str, Mapping[Record, int]]]] = None,
    max_iterations: int = 100,
) -> Dict[str, ZSet]:
    """Every plan of ``plans`` evaluated on ``inputs``, by name (one memo: shared sub-plans and
    fixpoints are evaluated once)."""
    env = _Shared(history, max_iterations).root(time, _normalize(inputs))
    return {name: dict(_eval(plan, env)) for name, plan in plans.items()}


def _normalize(inputs: Mapping[str, Mapping[Record, int]]) -> Dict[str, ZSet]:
    return {name: consolidate(z.items()) for name, z in inputs.items()}


def _free(plan: n.Plan, cache: Dict[int, FrozenSet[str]]) -> FrozenSet[str]:
    """The names of ``plan``'s ``Recur`` nodes that no fixpoint inside it binds."""
    hit = cache.get(id(plan))
    if hit is not None:
        return hit
    if isinstance(plan, n.Recur):
        out = frozenset((plan.name,))
    elif isinstance(plan, n.Fixpoint):
        bodies = frozenset().union(*(_free(b, cache) for b in plan.bodies)) - set(plan.names)
        out = bodies.union(*(_free(i, cache) for i in plan.initial))
    else:
        out = frozenset().union(*(_free(c, cache) for c in plan.children()))
    cache[id(plan)] = out
    return out


def _eval(plan: n.Plan, env: _Env) -> ZSet:
    # by object: structural hashing walks the whole tree, and plans share sub-plans (a DAG)
    hit = env.memo.get(id(plan))
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    if env.parent is not None and not (_free(plan, env.free) & env.bound.keys()):
        # the same in every round of this loop: evaluate it once, in the enclosing scope
        out = _eval(plan, env.parent)
        env.memo[id(plan)] = out
        return out
    try:
        handler = _EVAL[type(plan).__name__]
    except KeyError:
        raise TypeError(f"not a plan node: {plan!r}") from None
    out = handler(plan, env)
    env.memo[id(plan)] = out
    return out


def _by_key(z: ZSet, cols: Tuple[int, ...]) -> Dict[Tuple[Any, ...], List[Tuple[Record, int]]]:
    groups: Dict[Tuple[Any, ...], List[Tuple[Record, int]]] = {}
    for r, w in z.items():
        groups.setdefault(_key(r, cols), []).append((r, w))
    return groups


def _ev_join(p: n.Join, env: _Env) -> ZSet:
    right = _by_key(_eval(p.right, env), p.right_key)
    return consolidate(
        (_row(p.output, a + b), wa * wb)
        for a, wa in _eval(p.left, env).items()
        for b, wb in right.get(_key(a, p.left_key), ())
    )


def _key_weights(z: ZSet, cols: Tuple[int, ...]) -> Dict[Tuple[Any, ...], int]:
    total: Dict[Tuple[Any, ...], int] = {}
    for r, w in z.items():
        k = _key(r, cols)
        total[k] = total.get(k, 0) + w
    return total


def _ev_semijoin(p: n.Semijoin, env: _Env) -> ZSet:
    weights = _key_weights(_eval(p.right, env), p.right_key)
    return consolidate(
        (a, w * weights.get(_key(a, p.left_key), 0)) for a, w in _eval(p.left, env).items()
    )


def _ev_antijoin(p: n.Antijoin, env: _Env) -> ZSet:
    weights = _key_weights(_eval(p.right, env), p.right_key)
    present = {k for k, w in weights.items() if w > 0}
    return {a: w for a, w in _eval(p.left, env).items() if _key(a, p.left_key) not in present}


def _ev_aggregate(p: n.Aggregate, env: _Env) -> ZSet:
    groups: Dict[Tuple[Any, ...], List[Tuple[Record, int]]] = {}
    for r, w in _eval(p.input, env).items():
        if w > 0:
            groups.setdefault(_key(r, p.group), []).append((r, w))
    out: ZSet = {}
    for g, rows in groups.items():
        if p.kind == "count":
            agg: Any = sum(w for _r, w in rows)
        else:
            values = [(evaluate_expression(p.value, r), w) for r, w in rows]
            if p.kind == "sum":
                agg = sum(v * w for v, w in values)
            elif p.kind == "min":
                agg = min(v for v, _w in values)
            else:
                agg = max(v for v, _w in values)
        out[g + (agg,)] = 1
    return out


def _ev_reduce(p: n.Reduce, env: _Env) -> ZSet:
    groups: Dict[Any, List[Tuple[Any, int]]] = {}
    for (k, v), w in _eval(p.input, env).items():
        groups.setdefault(k, []).append((v, w))
    out: List[Tuple[Record, int]] = []
    for k, vs in groups.items():
        vs.sort(key=lambda vw: vw[0])
        out.extend(((k, o), w) for o, w in p.fn.fn(k, vs))
    return consolidate(out)


def _loop_rounds(p: n.Fixpoint, env: _Env) -> List[Dict[str, ZSet]]:
    """The iterates ``x0, x1, ..., xk`` of ``p``'s loop in ``env`` (``xk`` the fixed point)."""
    loop = ("loop", p.names, tuple(map(id, p.initial)), tuple(map(id, p.bodies)))
    rounds = env.memo.get(loop)
    if rounds is None:
        x = {name: _eval(i, env) for name, i in zip(p.names, p.initial)}
        rounds = [x]
        reads_past = env.time is not None and _reads_other_times(p)
        for i in range(env.max_iterations):
            inner = env.round(p, i, x)
            nxt = {name: _eval(b, inner) for name, b in zip(p.names, p.bodies)}
            if nxt == x and (not reads_past or _earlier_rounds_settled(p, env, i)):
                break
            x = nxt
            rounds.append(x)
        else:
            raise NonConvergenceError(
                f"fixpoint of {p.names} did not converge within {env.max_iterations} iterations"
            )
        env.memo[loop] = rounds
    return rounds  # type: ignore[no-any-return]


def _reads_other_times(p: n.Fixpoint) -> bool:
    """Whether a ``FreezeAt`` is in ``p``'s bodies (round ``i`` then reads round ``i`` of the
    same loop at earlier times)."""
    seen: set = set()
    todo: List[n.Plan] = list(p.bodies)
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, n.FreezeAt):
            return True
        todo.extend(node.children())
    return False


def _earlier_rounds_settled(p: n.Fixpoint, env: _Env, i: int) -> bool:
    """Whether round ``i`` of ``p`` at ``env``'s time is at or past the last round of ``p`` at
    every earlier time: ``x(i+1) == x(i)`` is a fixed point only then. Before, a ``FreezeAt``
    in the body reads round ``i`` at an earlier time, which may still change (the engine's
    ``Product(t, i)``): a loop whose round ``i + 1`` repeats round ``i`` at time ``T`` can
    still move at round ``i + 2`` when the loop at ``t < T`` does."""
    assert env.time is not None
    return all(i >= len(_loop_rounds(p, env.at(t))) - 1 for t in range(FIRST_TIME, env.time))


def _ev_fixpoint(p: n.Fixpoint, env: _Env) -> ZSet:
    return _loop_rounds(p, env)[-1][p.output]


def _bound(bound: Any, row: Record) -> Any:
    if bound is None:
        return None
    if isinstance(bound, n.Fn):
        return bound.fn(row)
    return evaluate_expression(bound, row)


def _now(p: n.Plan, env: _Env) -> int:
    if env.time is None:
        raise ValueError(f"{type(p).__name__} reads the time: give evaluate_plan a time")
    return env.time


def _ev_temporal_filter(p: n.TemporalFilter, env: _Env) -> ZSet:
    now = _now(p, env)
    out: ZSet = {}
    for r, w in _eval(p.input, env).items():
        lo, hi = _bound(p.lower, r), _bound(p.upper, r)
        if (lo is None or lo <= now) and (hi is None or now < hi):
            out[r] = w
    return out


FIRST_TIME = 0
"""The first time of every input (what a cutoff at or before it leaves nothing of)."""


def _ev_freeze_at(p: n.FreezeAt, env: _Env) -> ZSet:
    now = _now(p, env)
    past = [_eval(p.input, env.at(t)) for t in range(FIRST_TIME, now + 1)]
    out: ZSet = {}
    for r in {r for z in past for r in z}:
        c = _bound(p.cutoff, r)
        t = now if c is None else min(now, c - 1)
        if t >= FIRST_TIME:
            w = past[t - FIRST_TIME].get(r, 0)
            if w:
                out[r] = w
    return out


def _ev_scan(p: n.Scan, env: _Env) -> ZSet:
    return env.inputs.get(p.name, {})


_EVAL: Dict[str, Callable[[Any, _Env], ZSet]] = {
    "Scan": _ev_scan,
    "Recur": lambda p, env: env.recur(p.name),
    "Project": lambda p, env: consolidate(
        (_row(p.columns, r), w) for r, w in _eval(p.input, env).items()
    ),
    "Select": lambda p, env: {
        r: w for r, w in _eval(p.input, env).items() if evaluate_expression(p.predicate, r)
    },
    "Map": lambda p, env: consolidate((p.fn.fn(r), w) for r, w in _eval(p.input, env).items()),
    "Filter": lambda p, env: {r: w for r, w in _eval(p.input, env).items() if p.fn.fn(r)},
    "FlatMap": lambda p, env: consolidate(
        (o, w) for r, w in _eval(p.input, env).items() for o in p.fn.fn(r)
    ),
    "Union": lambda p, env: consolidate(item for i in p.inputs for item in _eval(i, env).items()),
    "Negate": lambda p, env: {r: -w for r, w in _eval(p.input, env).items()},
    "Consolidate": lambda p, env: _eval(p.input, env),
    "Distinct": lambda p, env: {r: 1 for r, w in _eval(p.input, env).items() if w > 0},
    "Threshold": lambda p, env: consolidate(
        (r, p.fn.fn(r, w)) for r, w in _eval(p.input, env).items()
    ),
    "Count": lambda p, env: {(r, w): 1 for r, w in _eval(p.input, env).items()},
    "Reduce": _ev_reduce,
    "Join": _ev_join,
    "Semijoin": _ev_semijoin,
    "Antijoin": _ev_antijoin,
    "Aggregate": _ev_aggregate,
    "Fixpoint": _ev_fixpoint,
    "TemporalFilter": _ev_temporal_filter,
    "FreezeAt": _ev_freeze_at,
}
