"""A tiny dataflow-program language and its from-scratch reference semantics.

This module is the oracle of the differential correctness property:

    for every closed time t, the sum of the engine's output updates at times <= t equals
    ``evaluate(program, inputs accumulated at t)``.

It has four parts:

* **The AST.** Programs are trees of frozen dataclasses (:class:`Input`, :class:`Map`,
  :class:`Join`, :class:`Iterate`, ...). Functions are referred to *by name* and looked up in
  the registries (:data:`MAPS`, :data:`FILTERS`, :data:`FLAT_MAPS`, :data:`THRESHOLDS`,
  :data:`REDUCERS`), so programs print readably -- ``Join(Map(Input(0), 'swap'), Input(0))`` --
  and hypothesis can shrink them.
* **The plan.** :func:`to_plan` translates a program to a :mod:`timelypy.plan` plan. The
  evaluator :func:`evaluate` is the from-scratch plan evaluator of ``tests/oracle/plan.py`` on
  *multisets* (``dict record -> nonzero int weight``; weights may be negative after
  retractions), and the builder :func:`build` is the engine's plan lowering
  (:func:`timelypy.plan.lower_one`): every property test on these programs checks the plan
  layer, and every front-end that produces plans is checked by the same evaluator.
* **The direct versions.** :func:`evaluate_direct` walks the program tree itself (the check of
  :func:`to_plan`) and :func:`build_direct` builds it with the ``Collection`` methods of the
  same names (the check of those methods).
* **Time helpers.** :func:`accumulate`, :func:`script_updates`, :func:`evaluate_at` turn update
  lists and driver scripts (see ``strategies.update_streams``) into accumulated inputs.

Record types
------------
Every registered function declares the record type it takes and returns, and
:func:`infer_type` checks a program against them. The types are:

``'pair'``    ``(key, val)`` -- what every input holds (keys and vals are small ints, 0..5)
``'int'``     a plain int (e.g. the keys fed to ``semijoin``)
``'joined'``  ``(key, (val1, val2))`` -- the output of ``join``
``'pcount'``  ``((key, val), n)`` -- the output of ``count`` over pairs
``'text'``    ``(key, name)`` -- a pair whose value is a string (``'n0'`` .. ``'n5'``)

``count`` over ints gives ``(x, n)``, which is a ``'pair'``.

The types are chosen for the two paths of the engine's arrangements: ints and tuples of ints
are fixed-width (kept as numpy columns), ``'text'`` records are not (kept as Python objects),
and the map ``widen`` puts ints beyond int64 into pairs, so that one arrangement sees batches
that fit columns and batches that do not. ``reduce`` and ``count`` can produce
values outside 0..5; functions flagged ``closed=True`` map *any* ints back into 0..5 (``% 6``),
which is what keeps iterate bodies on a finite domain.

Semantics (exactly the engine's ``Collection`` methods of the same names)
------------------------------------------------------------------------
``map/filter/flat_map``  per record; weights of records that become equal add up.
``negate``               every weight multiplied by -1.
``concat``               weights add.
``consolidate``          identity (every evaluator result is already consolidated).
``join``                 ``(k, v1) w1`` and ``(k, v2) w2`` give ``(k, (v1, v2)) w1 * w2``.
``semijoin(a, keys)``    ``(k, v)`` with weight ``w_a(k, v) * w_keys(k)``.
``antijoin(a, keys)``    ``a - semijoin(a, keys)``.
``reduce(logic)``        per key: ``vals`` = the consolidated ``(val, weight)`` pairs with nonzero
                         weight, sorted by val. ``logic`` runs only when ``vals`` is non-empty and
                         its ``(out_val, weight)`` results become ``(key, out_val)`` records.
``count``                ``(record, total weight)`` with weight 1, for every record whose weight
                         is nonzero (a negative total is reported as such).
``distinct``             weight > 0 becomes 1; weight <= 0 disappears.
``threshold(f)``         ``record`` gets weight ``f(record, weight)``; ``f`` is only called for
                         nonzero weights.
``temporal_filter``      at time ``T`` (the outer coordinate): the records ``x`` with
                         ``lower(x) <= T < upper(x)`` (named :data:`BOUNDS`; ``None`` or a
                         bound giving ``None``: no bound), weights kept.
``freeze_at(cutoff)``    at time ``T``: each record with its weight at time
                         ``min(T, cutoff(x) - 1)`` (nothing when ``cutoff(x) <= 0``).
``iterate(body)``        ``x0 = source``, ``x_{i+1} = body(x_i)``, until ``x_{i+1} == x_i``
                         (at most ``max_iterations``, else :class:`NonConvergenceError`). Inside
                         the body, :class:`Variable` is the loop variable and ``Enter(node)``
                         evaluates ``node`` in the enclosing scope (it is constant across
                         iterations). ``Input`` may not appear directly inside a body: outer
                         collections must be entered, as in the engine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import cloudpickle

import timelypy.plan as P

from . import plan as plan_oracle

# Worker processes and Ray actors do not have tests/ on their path: the programs' functions
# ship by value, and so does the plan evaluator they call (``evaluate_at`` runs in workers).
cloudpickle.register_pickle_by_value(plan_oracle)

__all__ = [
    # types
    "PAIR",
    "INT",
    "JOINED",
    "PCOUNT",
    "TEXT",
    "RECORD_TYPES",
    # AST
    "Node",
    "Input",
    "Variable",
    "Enter",
    "Map",
    "Filter",
    "FlatMap",
    "Negate",
    "Concat",
    "Consolidate",
    "Join",
    "Semijoin",
    "Antijoin",
    "Reduce",
    "Count",
    "Distinct",
    "Threshold",
    "Iterate",
    "TemporalFilter",
    "FreezeAt",
    "Program",
    # registries
    "Fn",
    "MAPS",
    "FILTERS",
    "FLAT_MAPS",
    "THRESHOLDS",
    "REDUCERS",
    "BOUNDS",
    "BOUND_MAX",
    # semantics
    "ZSet",
    "Update",
    "NonConvergenceError",
    "ProgramError",
    "evaluate",
    "evaluate_direct",
    "infer_type",
    "typecheck",
    "to_plan",
    "build",
    "build_direct",
    "accumulate",
    "script_updates",
    "final_times",
    "evaluate_at",
    "consolidate",
    "is_temporal",
]

Record = Any
ZSet = Dict[Record, int]
"""A multiset: ``record -> nonzero int weight``."""
Update = Tuple[Record, Any, int]
"""One ``(data, time, diff)`` update."""

PAIR = "pair"
INT = "int"
JOINED = "joined"
PCOUNT = "pcount"
TEXT = "text"
RECORD_TYPES = (PAIR, INT, JOINED, PCOUNT, TEXT)


class ProgramError(ValueError):
    """A malformed program: unknown function name, ill-typed node, misplaced Input/Variable."""


NonConvergenceError = plan_oracle.NonConvergenceError
"""An :class:`Iterate` did not reach a fixed point within the iteration cap (the plan
evaluator's error: an iterate is a fixpoint there)."""


# ---------------------------------------------------------------------------------------------
# Function registries


@dataclass(frozen=True)
class Fn:
    """A named, typed function used by a program node.

    ``arg``/``out`` are record types (``out`` is ``''`` for predicates and threshold functions,
    which apply to any record type). ``closed`` maps: the output is in the small domain 0..5 for
    *any* int input. ``nonneg`` thresholds/reducers never produce negative weights, so they keep
    collections of nonnegative weights nonnegative (needed for iterate convergence).
    """

    name: str
    fn: Callable[..., Any]
    arg: str = ""
    out: str = ""
    closed: bool = False
    nonneg: bool = True

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def __repr__(self) -> str:
        return f"Fn({self.name!r}: {self.arg or '*'} -> {self.out or '*'})"


def _registry(*fns: Fn) -> Dict[str, Fn]:
    reg: Dict[str, Fn] = {}
    for f in fns:
        assert f.name not in reg, f.name
        reg[f.name] = f
    return reg


# -- maps. Written as module-level functions so they pickle by reference. --------------------


def identity(r: Any) -> Any:
    """``r -> r``."""
    return r


def swap(kv: Tuple[int, int]) -> Tuple[int, int]:
    """``(k, v) -> (v, k)``."""
    return (kv[1], kv[0])


def mod6(kv: Tuple[int, int]) -> Tuple[int, int]:
    """``(k, v) -> (k % 6, v % 6)``: clamps a pair into the small domain."""
    return (kv[0] % 6, kv[1] % 6)


def inc_val(kv: Tuple[int, int]) -> Tuple[int, int]:
    """``(k, v) -> (k % 6, (v + 1) % 6)``."""
    return (kv[0] % 6, (kv[1] + 1) % 6)


def halve_key(kv: Tuple[int, int]) -> Tuple[int, int]:
    """``(k, v) -> ((k // 2) % 6, v % 6)``."""
    return ((kv[0] // 2) % 6, kv[1] % 6)


def diag(kv: Tuple[int, int]) -> Tuple[int, int]:
    """``(k, v) -> (v % 6, v % 6)``."""
    return (kv[1] % 6, kv[1] % 6)


def key(kv: Tuple[int, int]) -> int:
    """``(k, v) -> k``."""
    return kv[0]


def val(kv: Tuple[int, int]) -> int:
    """``(k, v) -> v``."""
    return kv[1]


def sum_mod6(kv: Tuple[int, int]) -> int:
    """``(k, v) -> (k + v) % 6``."""
    return (kv[0] + kv[1]) % 6


def dup(x: int) -> Tuple[int, int]:
    """``x -> (x, x)``."""
    return (x, x)


def tag0(x: int) -> Tuple[int, int]:
    """``x -> (x % 6, 0)``."""
    return (x % 6, 0)


def halve(x: int) -> Tuple[int, int]:
    """``x -> ((x // 2) % 6, x % 6)`` (the book's ``manages`` relation)."""
    return ((x // 2) % 6, x % 6)


def inc(x: int) -> int:
    """``x -> (x + 1) % 6``."""
    return (x + 1) % 6


def double(x: int) -> int:
    """``x -> (2 * x) % 6``."""
    return (2 * x) % 6


def join_sum(r: Tuple[int, Tuple[int, int]]) -> Tuple[int, int]:
    """``(k, (v1, v2)) -> (k % 6, (v1 + v2) % 6)``."""
    return (r[0] % 6, (r[1][0] + r[1][1]) % 6)


def join_left(r: Tuple[int, Tuple[int, int]]) -> Tuple[int, int]:
    """``(k, (v1, v2)) -> (k, v1)``."""
    return (r[0], r[1][0])


def join_right(r: Tuple[int, Tuple[int, int]]) -> Tuple[int, int]:
    """``(k, (v1, v2)) -> (k, v2)``."""
    return (r[0], r[1][1])


def vals(r: Tuple[int, Tuple[int, int]]) -> Tuple[int, int]:
    """``(k, (v1, v2)) -> (v1, v2)``: drops the join key (transitive closure)."""
    return r[1]


def hop(r: Tuple[int, Tuple[int, int]]) -> Tuple[int, int]:
    """``(node, (label, dst)) -> (dst, label)``: one reachability step along an edge."""
    return (r[1][1], r[1][0])


def count_key(r: Tuple[Tuple[int, int], int]) -> Tuple[int, int]:
    """``((k, v), n) -> (k % 6, n % 6)``."""
    return (r[0][0] % 6, r[1] % 6)


def count_val(r: Tuple[Tuple[int, int], int]) -> Tuple[int, int]:
    """``((k, v), n) -> (v % 6, n % 6)``."""
    return (r[0][1] % 6, r[1] % 6)


def count_mod6(r: Tuple[Tuple[int, int], int]) -> int:
    """``((k, v), n) -> n % 6``."""
    return r[1] % 6


WIDE = 2**64
"""What :func:`widen` adds: ints this large do not fit an ``int64`` column."""


def widen(kv: Tuple[int, int]) -> Tuple[int, int]:
    """``(k, v) -> (k, v + 2**64)``: a value beyond int64 (the object path's records)."""
    return (kv[0], kv[1] + WIDE)


def spell(kv: Tuple[int, int]) -> Tuple[int, str]:
    """``(k, v) -> (k % 6, 'n<v % 6>')``: a pair as text."""
    return (kv[0] % 6, f"n{kv[1] % 6}")


def unspell(kt: Tuple[int, str]) -> Tuple[int, int]:
    """``(k, 'n<i>') -> (k % 6, i)``: text back to a pair."""
    return (kt[0] % 6, int(kt[1][1:]))


MAPS: Dict[str, Fn] = _registry(
    Fn("identity", identity, PAIR, PAIR),
    Fn("swap", swap, PAIR, PAIR),
    Fn("mod6", mod6, PAIR, PAIR, closed=True),
    Fn("inc_val", inc_val, PAIR, PAIR, closed=True),
    Fn("halve_key", halve_key, PAIR, PAIR, closed=True),
    Fn("diag", diag, PAIR, PAIR, closed=True),
    Fn("key", key, PAIR, INT),
    Fn("val", val, PAIR, INT),
    Fn("sum_mod6", sum_mod6, PAIR, INT, closed=True),
    Fn("dup", dup, INT, PAIR),
    Fn("tag0", tag0, INT, PAIR, closed=True),
    Fn("halve", halve, INT, PAIR, closed=True),
    Fn("inc", inc, INT, INT, closed=True),
    Fn("double", double, INT, INT, closed=True),
    Fn("join_sum", join_sum, JOINED, PAIR, closed=True),
    Fn("join_left", join_left, JOINED, PAIR),
    Fn("join_right", join_right, JOINED, PAIR),
    Fn("vals", vals, JOINED, PAIR),
    Fn("hop", hop, JOINED, PAIR),
    Fn("count_key", count_key, PCOUNT, PAIR, closed=True),
    Fn("count_val", count_val, PCOUNT, PAIR, closed=True),
    Fn("count_mod6", count_mod6, PCOUNT, INT, closed=True),
    Fn("widen", widen, PAIR, PAIR),
    Fn("spell", spell, PAIR, TEXT),
    Fn("unspell", unspell, TEXT, PAIR),
)
"""``Map`` functions, by name."""


# -- filters -----------------------------------------------------------------------------------


def key_even(kv: Tuple[int, int]) -> bool:
    """Pairs whose key is even."""
    return kv[0] % 2 == 0


def val_lt3(kv: Tuple[int, int]) -> bool:
    """Pairs whose value is < 3."""
    return kv[1] < 3


def key_le_val(kv: Tuple[int, int]) -> bool:
    """Pairs with key <= value."""
    return kv[0] <= kv[1]


def even(x: int) -> bool:
    """Even ints."""
    return x % 2 == 0


def lt3(x: int) -> bool:
    """Ints < 3."""
    return x < 3


def same_vals(r: Tuple[int, Tuple[int, int]]) -> bool:
    """Join results whose two values agree."""
    return r[1][0] == r[1][1]


def count_pos(r: Tuple[Tuple[int, int], int]) -> bool:
    """Count results with a positive count."""
    return r[1] > 0


def text_key_even(kt: Tuple[int, str]) -> bool:
    """Text pairs whose key is even."""
    return kt[0] % 2 == 0


def name_lt_n3(kt: Tuple[int, str]) -> bool:
    """Text pairs whose name sorts before ``'n3'``."""
    return kt[1] < "n3"


FILTERS: Dict[str, Fn] = _registry(
    Fn("key_even", key_even, PAIR),
    Fn("val_lt3", val_lt3, PAIR),
    Fn("key_le_val", key_le_val, PAIR),
    Fn("even", even, INT),
    Fn("lt3", lt3, INT),
    Fn("same_vals", same_vals, JOINED),
    Fn("count_pos", count_pos, PCOUNT),
    Fn("text_key_even", text_key_even, TEXT),
    Fn("name_lt_n3", name_lt_n3, TEXT),
)
"""``Filter`` predicates, by name."""


# -- flat maps (return lists; duplicates count) -------------------------------------------------


def fan(kv: Tuple[int, int]) -> List[Tuple[int, int]]:
    """``(k, v) -> [(k, v), ((k + 1) % 6, v)]``."""
    return [kv, ((kv[0] + 1) % 6, kv[1])]


def upto_val(kv: Tuple[int, int]) -> List[Tuple[int, int]]:
    """``(k, v) -> [(k, 0), ..., (k, v % 3 - 1)]`` (possibly empty)."""
    return [(kv[0], i) for i in range(kv[1] % 3)]


def twice(kv: Tuple[int, int]) -> List[Tuple[int, int]]:
    """``(k, v) -> [(k, v), (k, v)]``: doubles every weight."""
    return [kv, kv]


def both(kv: Tuple[int, int]) -> List[int]:
    """``(k, v) -> [k, v]``."""
    return [kv[0], kv[1]]


def upto(x: int) -> List[int]:
    """``x -> [0, ..., x % 4 - 1]`` (possibly empty)."""
    return list(range(x % 4))


def spread(x: int) -> List[Tuple[int, int]]:
    """``x -> [(x, 0), (x, 1)]``."""
    return [(x, 0), (x, 1)]


FLAT_MAPS: Dict[str, Fn] = _registry(
    Fn("fan", fan, PAIR, PAIR),
    Fn("upto_val", upto_val, PAIR, PAIR),
    Fn("twice", twice, PAIR, PAIR),
    Fn("both", both, PAIR, INT),
    Fn("upto", upto, INT, INT),
    Fn("spread", spread, INT, PAIR),
)
"""``FlatMap`` functions, by name (each returns a list)."""


# -- thresholds: (record, count) -> new count; only called for nonzero counts -------------------


def positive(_r: Any, c: int) -> int:
    """``1 if c > 0 else 0`` -- the same as distinct."""
    return 1 if c > 0 else 0


def at_least_2(_r: Any, c: int) -> int:
    """``1 if c >= 2 else 0``."""
    return 1 if c >= 2 else 0


def parity(_r: Any, c: int) -> int:
    """``c % 2`` (0 or 1, also for negative c)."""
    return c % 2


def absolute(_r: Any, c: int) -> int:
    """``abs(c)``."""
    return abs(c)


def clip2(_r: Any, c: int) -> int:
    """``c`` clipped to ``[-2, 2]``."""
    return max(-2, min(2, c))


def negated(_r: Any, c: int) -> int:
    """``-c``."""
    return -c


THRESHOLDS: Dict[str, Fn] = _registry(
    Fn("positive", positive),
    Fn("at_least_2", at_least_2),
    Fn("parity", parity),
    Fn("abs", absolute),
    Fn("clip2", clip2, nonneg=False),
    Fn("negated", negated, nonneg=False),
)
"""``Threshold`` functions ``(record, count) -> int``, by name."""


# -- reducers: (key, [(val, weight)] sorted by val, nonzero weights, non-empty) -> [(out, w)] ---


def reduce_min(_k: Any, vs: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
    """``[(smallest value, 1)]``."""
    return [(vs[0][0], 1)]


def reduce_max(_k: Any, vs: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
    """``[(largest value, 1)]``."""
    return [(vs[-1][0], 1)]


def reduce_sum(_k: Any, vs: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
    """``[(sum of value * weight, 1)]``."""
    return [(sum(v * w for v, w in vs), 1)]


def reduce_count(_k: Any, vs: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
    """``[(sum of weights, 1)]`` (may be 0 or negative)."""
    return [(sum(w for _v, w in vs), 1)]


def reduce_top2(_k: Any, vs: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
    """The two largest values, each with weight 1 (one if there is only one)."""
    return [(v, 1) for v, _w in vs[-2:]]


def reduce_keep(_k: Any, vs: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
    """The input itself, weights included (an identity reduce; weights may be negative)."""
    return list(vs)


REDUCERS: Dict[str, Fn] = _registry(
    Fn("min", reduce_min, PAIR, PAIR),
    Fn("max", reduce_max, PAIR, PAIR),
    Fn("sum", reduce_sum, PAIR, PAIR),
    Fn("count", reduce_count, PAIR, PAIR),
    Fn("top2", reduce_top2, PAIR, PAIR),
    Fn("keep", reduce_keep, PAIR, PAIR, nonneg=False),
)
"""``Reduce`` logics ``(key, vals) -> [(out_val, weight)]``, by name."""


# -- time bounds of pairs (temporal_filter, freeze_at): (key, val) -> int or None ------------


@dataclass(frozen=True)
class BoundFn:
    """A named time bound of a ``(key, val)`` pair: ``fn`` for the Collection methods and
    ``expr``, the same bound as a plan expression (so the plan's compiled expressions and the
    oracle's tree walk check each other against the Python function)."""

    name: str
    fn: Callable[[Tuple[int, int]], Optional[int]]
    expr: Any

    def __repr__(self) -> str:
        return f"BoundFn({self.name!r})"


def bound_key(kv: Tuple[int, int]) -> int:
    """``k``."""
    return kv[0]


def bound_val(kv: Tuple[int, int]) -> int:
    """``v``."""
    return kv[1]


def bound_sum(kv: Tuple[int, int]) -> int:
    """``k + v``."""
    return kv[0] + kv[1]


def bound_val3(kv: Tuple[int, int]) -> int:
    """``v + 3``."""
    return kv[1] + 3


def bound_twice_key(kv: Tuple[int, int]) -> int:
    """``2k``."""
    return 2 * kv[0]


def bound_none(_kv: Tuple[int, int]) -> None:
    """No bound (a bound function that gives ``None``)."""
    return None


BOUNDS: Dict[str, BoundFn] = {
    b.name: b
    for b in (
        BoundFn("key", bound_key, P.Column(0)),
        BoundFn("val", bound_val, P.Column(1)),
        BoundFn("sum", bound_sum, P.Arith("+", P.Column(0), P.Column(1))),
        BoundFn("val3", bound_val3, P.Arith("+", P.Column(1), P.Const(3))),
        BoundFn("twice_key", bound_twice_key, P.Arith("*", P.Const(2), P.Column(0))),
        BoundFn("none", bound_none, P.Const(None)),
    )
}
"""Time bounds of ``(key, val)`` pairs, by name (values ``0..BOUND_MAX`` or ``None``)."""

BOUND_MAX = 10
"""The largest time a bound of :data:`BOUNDS` gives on pairs of ``0..5``: a program's output
can change up to this time after its inputs' last time."""


# ---------------------------------------------------------------------------------------------
# The AST


class Node:
    """Base class of program nodes: positional reprs and a child iterator."""

    __slots__ = ()

    def __repr__(self) -> str:
        args = ", ".join(repr(getattr(self, f.name)) for f in dataclasses.fields(self))  # type: ignore[arg-type]
        return f"{type(self).__name__}({args})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Hypothesis/IPython pretty-printing: the same compact positional repr."""
        printer.text(repr(self))

    def children(self) -> Tuple["Node", ...]:
        """The direct sub-nodes (for an :class:`Iterate`: source, then body)."""
        return tuple(
            getattr(self, f.name)
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if isinstance(getattr(self, f.name), Node)
        )

    def walk(self) -> Iterator["Node"]:
        """This node and all nodes below it, pre-order (entering bodies and Enters)."""
        yield self
        for c in self.children():
            yield from c.walk()

    def size(self) -> int:
        """Number of nodes in the tree."""
        return sum(1 for _ in self.walk())


@dataclass(frozen=True, repr=False)
class Input(Node):
    """Input collection number ``index`` (records are ``(key, val)`` pairs)."""

    index: int


@dataclass(frozen=True, repr=False)
class Variable(Node):
    """The loop variable of the innermost enclosing :class:`Iterate`."""


@dataclass(frozen=True, repr=False)
class Enter(Node):
    """``source``, evaluated in the scope enclosing the current iterate body, brought inside."""

    source: Node


@dataclass(frozen=True, repr=False)
class Map(Node):
    """``source.map(MAPS[fn])``."""

    source: Node
    fn: str


@dataclass(frozen=True, repr=False)
class Filter(Node):
    """``source.filter(FILTERS[pred])``."""

    source: Node
    pred: str


@dataclass(frozen=True, repr=False)
class FlatMap(Node):
    """``source.flat_map(FLAT_MAPS[fn])``."""

    source: Node
    fn: str


@dataclass(frozen=True, repr=False)
class Negate(Node):
    """``source.negate()``."""

    source: Node


@dataclass(frozen=True, repr=False)
class Concat(Node):
    """``left.concat(right)``."""

    left: Node
    right: Node


@dataclass(frozen=True, repr=False)
class Consolidate(Node):
    """``source.consolidate()``."""

    source: Node


@dataclass(frozen=True, repr=False)
class Join(Node):
    """``left.join(right)``: ``(k, v1), (k, v2) -> (k, (v1, v2))``, weights multiply."""

    left: Node
    right: Node


@dataclass(frozen=True, repr=False)
class Semijoin(Node):
    """``source.semijoin(keys)``: ``(k, v)`` weighted ``w(k, v) * w_keys(k)``."""

    source: Node
    keys: Node


@dataclass(frozen=True, repr=False)
class Antijoin(Node):
    """``source.antijoin(keys)`` = ``source - source.semijoin(keys)``."""

    source: Node
    keys: Node


@dataclass(frozen=True, repr=False)
class Reduce(Node):
    """``source.reduce(REDUCERS[logic])``."""

    source: Node
    logic: str


@dataclass(frozen=True, repr=False)
class Count(Node):
    """``source.count()``: ``(record, weight)`` with weight 1 per record of nonzero weight."""

    source: Node


@dataclass(frozen=True, repr=False)
class Distinct(Node):
    """``source.distinct()``: positive weights become 1, the rest vanish."""

    source: Node


@dataclass(frozen=True, repr=False)
class Threshold(Node):
    """``source.threshold(THRESHOLDS[fn])``."""

    source: Node
    fn: str


@dataclass(frozen=True, repr=False)
class Iterate(Node):
    """``source.iterate(body)``; inside ``body``, :class:`Variable` is the loop variable."""

    source: Node
    body: Node


@dataclass(frozen=True, repr=False)
class TemporalFilter(Node):
    """``source.temporal_filter(BOUNDS[lower], BOUNDS[upper])`` (``None``: no bound)."""

    source: Node
    lower: Optional[str]
    upper: Optional[str]


@dataclass(frozen=True, repr=False)
class FreezeAt(Node):
    """``source.freeze_at(BOUNDS[cutoff])``."""

    source: Node
    cutoff: str


@dataclass(frozen=True)
class Program:
    """A program: its output node and how many input collections it reads (``Input(0..n-1)``)."""

    output: Node
    n_inputs: int = 1

    def __repr__(self) -> str:
        return f"Program({self.output!r}, n_inputs={self.n_inputs})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


ProgramLike = Union[Program, Node]


def _root(program: ProgramLike) -> Node:
    return program.output if isinstance(program, Program) else program


# ---------------------------------------------------------------------------------------------
# Type checking


def _lookup(registry: Mapping[str, Fn], name: str, what: str) -> Fn:
    try:
        return registry[name]
    except KeyError:
        raise ProgramError(f"unknown {what} {name!r}; known: {sorted(registry)}") from None


def infer_type(program: ProgramLike) -> str:
    """The record type of the program's output; raises :class:`ProgramError` if ill-typed.

    Also checks placement: ``Input`` only outside iterate bodies, ``Variable`` and ``Enter`` only
    inside them.
    """
    return _infer(_root(program), ())


def typecheck(program: ProgramLike) -> None:
    """Raise :class:`ProgramError` unless the program is well typed and well placed."""
    infer_type(program)
    if isinstance(program, Program):
        for n in program.output.walk():
            if isinstance(n, Input) and not 0 <= n.index < program.n_inputs:
                raise ProgramError(f"{n!r} out of range for n_inputs={program.n_inputs}")


def _expect(node: Node, got: str, want: str) -> None:
    if got != want:
        raise ProgramError(f"{node!r}: expected a {want!r} collection, got {got!r}")


def _infer(node: Node, loops: Tuple[str, ...]) -> str:
    """``loops``: record types of the enclosing loop variables, innermost last."""
    kind = type(node).__name__
    if kind == "Input":
        if loops:
            raise ProgramError(f"{node!r} used inside an iterate body; wrap it in Enter(...)")
        return PAIR
    if kind == "Variable":
        if not loops:
            raise ProgramError("Variable() used outside of any iterate body")
        return loops[-1]
    if kind == "Enter":
        if not loops:
            raise ProgramError(f"{node!r} used outside of any iterate body")
        return _infer(node.source, loops[:-1])
    if kind in ("Map", "FlatMap"):
        fn = _lookup(MAPS if kind == "Map" else FLAT_MAPS, node.fn, kind)
        _expect(node, _infer(node.source, loops), fn.arg)
        return fn.out
    if kind == "Filter":
        fn = _lookup(FILTERS, node.pred, "predicate")
        _expect(node, _infer(node.source, loops), fn.arg)
        return fn.arg
    if kind in ("Negate", "Consolidate", "Distinct"):
        return _infer(node.source, loops)
    if kind == "Threshold":
        _lookup(THRESHOLDS, node.fn, "threshold")
        return _infer(node.source, loops)
    if kind == "Concat":
        t = _infer(node.left, loops)
        _expect(node, _infer(node.right, loops), t)
        return t
    if kind == "Join":
        _expect(node, _infer(node.left, loops), PAIR)
        _expect(node, _infer(node.right, loops), PAIR)
        return JOINED
    if kind in ("Semijoin", "Antijoin"):
        _expect(node, _infer(node.source, loops), PAIR)
        _expect(node, _infer(node.keys, loops), INT)
        return PAIR
    if kind == "Reduce":
        fn = _lookup(REDUCERS, node.logic, "reducer")
        _expect(node, _infer(node.source, loops), fn.arg)
        return fn.out
    if kind == "Count":
        t = _infer(node.source, loops)
        if t == INT:
            return PAIR
        if t == PAIR:
            return PCOUNT
        raise ProgramError(f"{node!r}: count of {t!r} records is not a record type")
    if kind == "Iterate":
        t = _infer(node.source, loops)
        _expect(node, _infer(node.body, loops + (t,)), t)
        return t
    if kind in ("TemporalFilter", "FreezeAt"):
        for name in _bound_names(node):
            if name not in BOUNDS:
                raise ProgramError(f"unknown bound {name!r}; known: {sorted(BOUNDS)}")
        _expect(node, _infer(node.source, loops), PAIR)
        return PAIR
    raise ProgramError(f"not a program node: {node!r}")


def _bound_names(node: Any) -> List[str]:
    names = [node.lower, node.upper] if type(node).__name__ == "TemporalFilter" else [node.cutoff]
    return [n for n in names if n is not None]


def is_temporal(program: ProgramLike) -> bool:
    """Whether ``program`` reads the time (has a temporal filter or a freeze_at)."""
    return any(type(n).__name__ in ("TemporalFilter", "FreezeAt") for n in _root(program).walk())


# ---------------------------------------------------------------------------------------------
# Multiset helpers


def consolidate(pairs: Iterable[Tuple[Record, int]]) -> ZSet:
    """Sum ``(record, weight)`` pairs into a :data:`ZSet`, dropping zero weights."""
    out: ZSet = {}
    for r, w in pairs:
        out[r] = out.get(r, 0) + w
    return {r: w for r, w in out.items() if w != 0}


def _by_key(z: ZSet) -> Dict[Any, List[Tuple[Any, int]]]:
    groups: Dict[Any, List[Tuple[Any, int]]] = {}
    for (k, v), w in z.items():
        groups.setdefault(k, []).append((v, w))
    return groups


# ---------------------------------------------------------------------------------------------
# The from-scratch evaluator


class _Env:
    """Evaluation scope: the inputs, the loop variable's value (None at the root), the enclosing
    scope, and a memo of node -> result valid for this scope."""

    __slots__ = ("inputs", "variable", "parent", "memo", "max_iterations")

    def __init__(
        self,
        inputs: Mapping[int, ZSet],
        variable: Optional[ZSet],
        parent: Optional["_Env"],
        max_iterations: int,
    ) -> None:
        self.inputs = inputs
        self.variable = variable
        self.parent = parent
        self.memo: Dict[Node, ZSet] = {}
        self.max_iterations = max_iterations


def _normalize_inputs(
    inputs: Union[Mapping[int, Mapping[Record, int]], Sequence[Mapping[Record, int]]],
) -> Dict[int, ZSet]:
    items = inputs.items() if isinstance(inputs, Mapping) else enumerate(inputs)
    return {i: consolidate(z.items()) for i, z in items}


def evaluate_direct(
    program: ProgramLike,
    inputs: Union[Mapping[int, Mapping[Record, int]], Sequence[Mapping[Record, int]]],
    *,
    max_iterations: int = 100,
) -> ZSet:
    """Evaluate ``program`` from scratch by walking its own tree (not through the plan): the
    cross-check of :func:`to_plan`.

    ``inputs`` maps an input index (``Input(i)``) to its accumulated multiset (a list indexed by
    ``i`` works too); an index that is absent is an empty collection. Zero weights in the inputs
    are ignored. Returns the consolidated output (``record -> nonzero weight``), a fresh dict.
    """
    env = _Env(_normalize_inputs(inputs), None, None, max_iterations)
    return dict(_eval(_root(program), env))


def _eval(node: Node, env: _Env) -> ZSet:
    try:
        return env.memo[node]
    except KeyError:
        pass
    try:
        handler = _EVAL[type(node).__name__]
    except KeyError:
        raise ProgramError(f"not a program node: {node!r}") from None
    result = handler(node, env)
    env.memo[node] = result
    return result


def _ev_input(node: Input, env: _Env) -> ZSet:
    if env.parent is not None:
        raise ProgramError(f"{node!r} used inside an iterate body; wrap it in Enter(...)")
    return env.inputs.get(node.index, {})


def _ev_variable(node: Variable, env: _Env) -> ZSet:
    if env.variable is None:
        raise ProgramError("Variable() used outside of any iterate body")
    return env.variable


def _ev_enter(node: Enter, env: _Env) -> ZSet:
    if env.parent is None:
        raise ProgramError(f"{node!r} used outside of any iterate body")
    return _eval(node.source, env.parent)


def _ev_map(node: Map, env: _Env) -> ZSet:
    f = _lookup(MAPS, node.fn, "map").fn
    return consolidate((f(r), w) for r, w in _eval(node.source, env).items())


def _ev_filter(node: Filter, env: _Env) -> ZSet:
    p = _lookup(FILTERS, node.pred, "predicate").fn
    return {r: w for r, w in _eval(node.source, env).items() if p(r)}


def _ev_flat_map(node: FlatMap, env: _Env) -> ZSet:
    f = _lookup(FLAT_MAPS, node.fn, "flat_map").fn
    return consolidate((o, w) for r, w in _eval(node.source, env).items() for o in f(r))


def _ev_negate(node: Negate, env: _Env) -> ZSet:
    return {r: -w for r, w in _eval(node.source, env).items()}


def _ev_concat(node: Concat, env: _Env) -> ZSet:
    left, right = _eval(node.left, env), _eval(node.right, env)
    return consolidate(list(left.items()) + list(right.items()))


def _ev_consolidate(node: Consolidate, env: _Env) -> ZSet:
    return _eval(node.source, env)


def _ev_join(node: Join, env: _Env) -> ZSet:
    right = _by_key(_eval(node.right, env))
    return consolidate(
        ((k, (v1, v2)), w1 * w2)
        for (k, v1), w1 in _eval(node.left, env).items()
        for v2, w2 in right.get(k, ())
    )


def _ev_semijoin(node: Semijoin, env: _Env) -> ZSet:
    keys = _eval(node.keys, env)
    return consolidate((r, w * keys.get(r[0], 0)) for r, w in _eval(node.source, env).items())


def _ev_antijoin(node: Antijoin, env: _Env) -> ZSet:
    keys = _eval(node.keys, env)
    return consolidate((r, w - w * keys.get(r[0], 0)) for r, w in _eval(node.source, env).items())


def _ev_reduce(node: Reduce, env: _Env) -> ZSet:
    logic = _lookup(REDUCERS, node.logic, "reducer").fn
    out: List[Tuple[Record, int]] = []
    for k, vs in _by_key(_eval(node.source, env)).items():
        # The source is consolidated, so ``vs`` holds each value once with a nonzero weight and
        # no key here has an empty list: reduce never runs for keys without values.
        vs.sort(key=lambda vw: vw[0])
        out.extend(((k, o), w) for o, w in logic(k, vs))
    return consolidate(out)


def _ev_count(node: Count, env: _Env) -> ZSet:
    return {(r, w): 1 for r, w in _eval(node.source, env).items()}


def _ev_distinct(node: Distinct, env: _Env) -> ZSet:
    return {r: 1 for r, w in _eval(node.source, env).items() if w > 0}


def _ev_threshold(node: Threshold, env: _Env) -> ZSet:
    f = _lookup(THRESHOLDS, node.fn, "threshold").fn
    return consolidate((r, f(r, w)) for r, w in _eval(node.source, env).items())


def _ev_iterate(node: Iterate, env: _Env) -> ZSet:
    x = _eval(node.source, env)
    for _ in range(env.max_iterations):
        nxt = _eval(node.body, _Env(env.inputs, x, env, env.max_iterations))
        if nxt == x:
            return x
        x = nxt
    raise NonConvergenceError(
        f"iterate did not converge within {env.max_iterations} iterations: {node!r}"
    )


_EVAL: Dict[str, Callable[[Any, _Env], ZSet]] = {
    "Input": _ev_input,
    "Variable": _ev_variable,
    "Enter": _ev_enter,
    "Map": _ev_map,
    "Filter": _ev_filter,
    "FlatMap": _ev_flat_map,
    "Negate": _ev_negate,
    "Concat": _ev_concat,
    "Consolidate": _ev_consolidate,
    "Join": _ev_join,
    "Semijoin": _ev_semijoin,
    "Antijoin": _ev_antijoin,
    "Reduce": _ev_reduce,
    "Count": _ev_count,
    "Distinct": _ev_distinct,
    "Threshold": _ev_threshold,
    "Iterate": _ev_iterate,
}
# Dispatch is by class *name*, so nodes made by a second import of this module (``reference``
# versus ``tests.reference``) still evaluate.


# ---------------------------------------------------------------------------------------------
# Building the program out of engine collections


class _BuildCtx:
    """Build scope: the engine's input collections, the loop variable (None at the root), the
    enclosing context, and a memo of node -> engine collection for this scope."""

    __slots__ = ("inputs", "variable", "parent", "memo")

    def __init__(
        self, inputs: Mapping[int, Any], variable: Any, parent: Optional["_BuildCtx"]
    ) -> None:
        self.inputs = inputs
        self.variable = variable
        self.parent = parent
        self.memo: Dict[Node, Any] = {}


def build_direct(
    program: ProgramLike, scope: Any, collections: Union[Sequence[Any], Mapping[int, Any]]
) -> Any:
    """Build ``program`` out of the engine's input collections with the Collection API's
    methods of the same names (not through the plan) and return the output Collection: what
    checks the collection methods themselves (``join``, ``antijoin``, ``iterate``...).

    ``collections[i]`` is the engine collection for ``Input(i)`` (a sequence or a mapping).
    ``scope`` is the dataflow scope the inputs live in; the Collection API does not need it (every
    operator is a method of a collection), it is accepted so callers can pass it uniformly.

    Node -> API: ``Map/Filter/FlatMap`` -> ``c.map(f)/c.filter(p)/c.flat_map(f)`` with the
    registered function; ``Negate/Consolidate/Count/Distinct`` -> the method of the same name;
    ``Concat/Join/Semijoin/Antijoin`` ->
    ``a.concat(b)/a.join(b)/a.semijoin(keys)/a.antijoin(keys)``;
    ``Reduce`` -> ``c.reduce(logic)``; ``Threshold`` -> ``c.threshold(f)``; ``Iterate`` ->
    ``src.iterate(body)`` where, inside ``body(inner)``, ``Variable()`` is ``inner`` and
    ``Enter(n)`` is ``built(n).enter(inner.scope)``. Collections that a body enters are built in
    the enclosing scope *before* ``iterate`` is called. Shared (equal) sub-programs are built once
    per scope.
    """
    inputs = (
        dict(collections.items())
        if isinstance(collections, Mapping)
        else dict(enumerate(collections))
    )
    return _build(_root(program), _BuildCtx(inputs, None, None))


def _build(node: Node, ctx: _BuildCtx) -> Any:
    try:
        return ctx.memo[node]
    except KeyError:
        pass
    result = _build_node(node, ctx)
    ctx.memo[node] = result
    return result


def _enter_targets(node: Node) -> Iterator[Node]:
    """The sources of the Enter nodes of an iterate body that refer to the scope just outside it
    (not those inside nested bodies, which refer to this body's scope)."""
    kind = type(node).__name__
    if kind == "Enter":
        yield node.source
    elif kind == "Iterate":
        yield from _enter_targets(node.source)
    else:
        for c in node.children():
            yield from _enter_targets(c)


def _build_node(node: Node, ctx: _BuildCtx) -> Any:
    kind = type(node).__name__
    b = lambda n: _build(n, ctx)  # noqa: E731
    if kind == "Input":
        if ctx.parent is not None:
            raise ProgramError(f"{node!r} used inside an iterate body; wrap it in Enter(...)")
        try:
            return ctx.inputs[node.index]
        except KeyError:
            raise ProgramError(f"no engine collection given for {node!r}") from None
    if kind == "Variable":
        if ctx.variable is None:
            raise ProgramError("Variable() used outside of any iterate body")
        return ctx.variable
    if kind == "Enter":
        if ctx.parent is None:
            raise ProgramError(f"{node!r} used outside of any iterate body")
        return _build(node.source, ctx.parent).enter(ctx.variable.scope)
    if kind == "Map":
        return b(node.source).map(_lookup(MAPS, node.fn, "map").fn)
    if kind == "Filter":
        return b(node.source).filter(_lookup(FILTERS, node.pred, "predicate").fn)
    if kind == "FlatMap":
        return b(node.source).flat_map(_lookup(FLAT_MAPS, node.fn, "flat_map").fn)
    if kind == "Negate":
        return b(node.source).negate()
    if kind == "Concat":
        return b(node.left).concat(b(node.right))
    if kind == "Consolidate":
        return b(node.source).consolidate()
    if kind == "Join":
        return b(node.left).join(b(node.right))
    if kind == "Semijoin":
        return b(node.source).semijoin(b(node.keys))
    if kind == "Antijoin":
        return b(node.source).antijoin(b(node.keys))
    if kind == "Reduce":
        return b(node.source).reduce(_lookup(REDUCERS, node.logic, "reducer").fn)
    if kind == "Count":
        return b(node.source).count()
    if kind == "Distinct":
        return b(node.source).distinct()
    if kind == "Threshold":
        return b(node.source).threshold(_lookup(THRESHOLDS, node.fn, "threshold").fn)
    if kind == "TemporalFilter":
        lower, upper = (None if x is None else BOUNDS[x].fn for x in (node.lower, node.upper))
        return b(node.source).temporal_filter(lower, upper)
    if kind == "FreezeAt":
        return b(node.source).freeze_at(BOUNDS[node.cutoff].fn)
    if kind == "Iterate":
        source = b(node.source)
        for target in _enter_targets(node.body):
            b(target)  # build entered collections in this scope, before the loop scope exists

        def body(inner: Any) -> Any:
            return _build(node.body, _BuildCtx(ctx.inputs, inner, ctx))

        return source.iterate(body)
    raise ProgramError(f"not a program node: {node!r}")


# ---------------------------------------------------------------------------------------------
# Through the plan: to_plan, evaluate (the plan evaluator), build (the plan lowering)


def _plan_fn(registry: Mapping[str, Fn], name: str, what: str) -> P.Fn:
    return P.Fn(name, _lookup(registry, name, what).fn)


def one_tuple(x: Any) -> Tuple[Any]:
    """``x -> (x,)``: an int key as a one-column row (the plan's joins take tuples)."""
    return (x,)


_ONE_TUPLE = P.Fn("one_tuple", one_tuple)
_PAIR_JOIN = (P.Column(0), P.Row((P.Column(1), P.Column(3))))  # (k, v1) + (k, v2) -> (k, (v1, v2))


def loop_name(depth: int) -> str:
    """The :class:`~timelypy.plan.Fixpoint` name of the loop variable of an iterate nested
    ``depth`` deep (1 for the outermost)."""
    return f"x{depth}"


def to_plan(program: ProgramLike) -> P.Plan:
    """``program`` as a :mod:`timelypy.plan` plan: ``Input(i)`` is ``Scan(str(i))``, an
    :class:`Iterate` is a one-name :class:`~timelypy.plan.Fixpoint` (its :class:`Variable` a
    ``Recur``, named by nesting depth), ``Enter`` disappears (the plan enters loop-independent
    sub-plans itself), the named functions become ``Fn``s, ``Concat`` a ``Union``, ``Join`` a
    relational join on column 0 giving ``(k, (v1, v2))``, ``Semijoin`` a semijoin on the keys
    made one-column rows, and ``Antijoin`` (whose keys need not be a set) ``source -
    semijoin``. :class:`ProgramError` for a misplaced ``Input``/``Variable``/``Enter`` or an
    unknown function name."""
    return _to_plan(_root(program), 0)


def _to_plan(node: Node, depth: int) -> P.Plan:
    kind = type(node).__name__
    t = lambda m: _to_plan(m, depth)  # noqa: E731
    if kind == "Input":
        if depth:
            raise ProgramError(f"{node!r} used inside an iterate body; wrap it in Enter(...)")
        return P.Scan(str(node.index))
    if kind == "Variable":
        if not depth:
            raise ProgramError("Variable() used outside of any iterate body")
        return P.Recur(loop_name(depth))
    if kind == "Enter":
        if not depth:
            raise ProgramError(f"{node!r} used outside of any iterate body")
        return _to_plan(node.source, depth - 1)
    if kind == "Map":
        return P.Map(t(node.source), _plan_fn(MAPS, node.fn, "map"))
    if kind == "Filter":
        return P.Filter(t(node.source), _plan_fn(FILTERS, node.pred, "predicate"))
    if kind == "FlatMap":
        return P.FlatMap(t(node.source), _plan_fn(FLAT_MAPS, node.fn, "flat_map"))
    if kind == "Threshold":
        return P.Threshold(t(node.source), _plan_fn(THRESHOLDS, node.fn, "threshold"))
    if kind == "Reduce":
        return P.Reduce(t(node.source), _plan_fn(REDUCERS, node.logic, "reducer"))
    if kind in ("Negate", "Consolidate", "Distinct", "Count"):
        return getattr(P, kind)(t(node.source))  # type: ignore[no-any-return]
    if kind == "Concat":
        return P.Union((t(node.left), t(node.right)))
    if kind == "Join":
        return P.Join(t(node.left), t(node.right), (0,), (0,), _PAIR_JOIN)
    if kind in ("Semijoin", "Antijoin"):
        source = t(node.source)
        semi = P.Semijoin(source, P.Map(t(node.keys), _ONE_TUPLE), (0,), (0,))
        return semi if kind == "Semijoin" else P.Union((source, P.Negate(semi)))
    if kind == "TemporalFilter":
        lower, upper = (None if x is None else BOUNDS[x].expr for x in (node.lower, node.upper))
        return P.TemporalFilter(t(node.source), lower, upper)
    if kind == "FreezeAt":
        return P.FreezeAt(t(node.source), BOUNDS[node.cutoff].expr)
    if kind == "Iterate":
        name = loop_name(depth + 1)
        return P.Fixpoint((name,), (t(node.source),), (_to_plan(node.body, depth + 1),), name)
    raise ProgramError(f"not a program node: {node!r}")


def _named_inputs(inputs: Mapping[int, Any]) -> Dict[str, Any]:
    return {str(i): c for i, c in inputs.items()}


def evaluate(
    program: ProgramLike,
    inputs: Union[Mapping[int, Mapping[Record, int]], Sequence[Mapping[Record, int]]],
    *,
    time: Optional[int] = None,
    history: Optional[Callable[[int], Mapping[int, Mapping[Record, int]]]] = None,
    max_iterations: int = 100,
) -> ZSet:
    """Evaluate ``program`` from scratch: :func:`to_plan`, then the plan evaluator
    (``tests/oracle/plan.py``).

    ``inputs`` maps an input index (``Input(i)``) to its accumulated multiset (a list indexed by
    ``i`` works too); an index that is absent is an empty collection. Zero weights in the inputs
    are ignored. Returns the consolidated output (``record -> nonzero weight``), a fresh dict;
    :class:`NonConvergenceError` if an iterate runs more than ``max_iterations`` rounds.
    ``time`` (the time the inputs are at) and ``history`` (``t -> inputs`` at an earlier time
    ``t``) are what the temporal nodes read.
    """
    plan = to_plan(program)
    named = _named_inputs(_normalize_inputs(inputs))
    named_history = None
    if history is not None:
        past = history

        def named_history(t: int) -> Dict[str, Any]:
            return _named_inputs(_normalize_inputs(past(t)))

    return plan_oracle.evaluate_plan(
        plan, named, time=time, history=named_history, max_iterations=max_iterations
    )


def build(
    program: ProgramLike, scope: Any, collections: Union[Sequence[Any], Mapping[int, Any]]
) -> Any:
    """Build ``program`` out of the engine's input collections through the plan
    (:func:`to_plan`, then :func:`timelypy.plan.lower_one`) and return the output Collection.

    ``collections[i]`` is the engine collection for ``Input(i)`` (a sequence or a mapping);
    ``scope`` is accepted so callers can pass it uniformly (the lowering finds the scope of
    the collections). :func:`build_direct` builds with the Collection methods instead.
    """
    inputs = (
        dict(collections.items())
        if isinstance(collections, Mapping)
        else dict(enumerate(collections))
    )
    return P.lower_one(to_plan(program), _named_inputs(inputs))


# ---------------------------------------------------------------------------------------------
# Times, accumulation and driver scripts


def _default_le() -> Callable[[Any, Any], bool]:
    from timelypy.order import less_equal

    return less_equal


def accumulate(
    updates: Iterable[Update], t: Any, le: Optional[Callable[[Any, Any], bool]] = None
) -> ZSet:
    """Sum the diffs of all ``(data, time, diff)`` updates with ``le(time, t)``; zeros dropped.

    ``le`` is the partial order (default: ``timelypy.order.less_equal``, correct for ints and
    ``Product``s; never Python's ``<=`` on Products, which is lexicographic).
    """
    le = le or _default_le()
    return consolidate((d, w) for d, time, w in updates if le(time, t))


def script_updates(script: Iterable[tuple], n_inputs: int) -> Dict[int, List[Update]]:
    """Replay a driver script (``strategies.update_streams``) into per-input update lists.

    Actions: ``("update", i, record, diff)`` at input i's current time;
    ``("update_at", i, record, offset, diff)`` at current time + offset;
    ``("advance", i, new_time)`` moves input i's current time; ``("step", n)`` and ``("close",
    i)`` (no later action touches input i) do nothing here.
    Every input starts at time 0. Returns ``{i: [(record, time, diff), ...]}`` for every input.
    """
    now = [0] * n_inputs
    out: Dict[int, List[Update]] = {i: [] for i in range(n_inputs)}
    for action in script:
        kind = action[0]
        if kind == "update":
            _, i, rec, diff = action
            out[i].append((rec, now[i], diff))
        elif kind == "update_at":
            _, i, rec, offset, diff = action
            if offset < 0:
                raise ValueError(f"negative time offset in {action!r}")
            out[i].append((rec, now[i] + offset, diff))
        elif kind == "advance":
            _, i, new_time = action
            if new_time < now[i]:
                raise ValueError(f"input {i} advanced backwards: {action!r} at time {now[i]}")
            now[i] = new_time
        elif kind not in ("step", "close"):
            raise ValueError(f"unknown script action {action!r}")
    return out


def final_times(script: Iterable[tuple], n_inputs: int) -> List[int]:
    """Each input's current time after the script has run (0 for inputs never advanced)."""
    now = [0] * n_inputs
    for action in script:
        if action[0] == "advance":
            now[action[1]] = max(now[action[1]], action[2])
    return now


def evaluate_at(
    program: ProgramLike,
    updates_by_input: Mapping[int, Iterable[Update]],
    t: Any,
    le: Optional[Callable[[Any, Any], bool]] = None,
    *,
    max_iterations: int = 100,
) -> ZSet:
    """The expected accumulated output at time ``t``: ``evaluate`` on the inputs accumulated
    at ``t`` (and, for the temporal nodes, at the times before it)."""
    updates = {i: list(u) for i, u in updates_by_input.items()}

    def at(s: Any) -> Dict[int, ZSet]:
        return {i: accumulate(u, s, le) for i, u in updates.items()}

    return evaluate(program, at(t), time=t, history=at, max_iterations=max_iterations)
