"""The shared hypothesis strategies of the timelypy test-suite.

Programs (see ``oracle.reference`` for the AST and its semantics):

* :func:`programs` -- random well-typed programs over 1..3 inputs of ``(key, val)`` pairs, using
  every node kind (linear chains, join, semijoin/antijoin, reduce, count, distinct, threshold,
  iterate); every ``Iterate`` it generates provably converges (see :func:`_iterate`).
* :func:`linear_programs`, :func:`iterative_programs` -- narrower variants.

Data and drivers:

* :func:`pair_records`, :func:`zsets` -- records and weighted collections (evaluator inputs).
* :func:`update_streams` -- a script of input-session actions with frequent retractions.
* :func:`program_and_script` -- a program, a script and the ``TIMELYPY_COLUMNS`` mode to run in.
* :func:`times`, :func:`product_times`, :func:`time_strategies`, :func:`antichains`,
  :func:`batches` -- timestamps and ``(data, time, diff)`` batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hypothesis import strategies as st
from oracle import reference as ref

from timelypy.order import Product, less_equal

from .columns import MODES, Script

__all__ = [
    "KEY_RANGE",
    "VAL_RANGE",
    "pair_records",
    "int_records",
    "zsets",
    "programs",
    "linear_programs",
    "iterative_programs",
    "update_streams",
    "times",
    "product_times",
    "time_strategies",
    "antichains",
    "batches",
]

KEY_RANGE = (0, 5)
VAL_RANGE = (0, 5)

Node = ref.Node


# ---------------------------------------------------------------------------------------------
# Records and collections


def pair_records(
    max_key: int = KEY_RANGE[1], max_val: int = VAL_RANGE[1]
) -> st.SearchStrategy[Tuple[int, int]]:
    """``(key, val)`` with ``0 <= key <= max_key`` and ``0 <= val <= max_val``."""
    return st.tuples(st.integers(0, max_key), st.integers(0, max_val))


def int_records(max_value: int = 5) -> st.SearchStrategy[int]:
    """Small ints ``0..max_value``."""
    return st.integers(0, max_value)


def zsets(
    records: Optional[st.SearchStrategy[Any]] = None,
    *,
    max_size: int = 12,
    min_weight: int = -2,
    max_weight: int = 3,
) -> st.SearchStrategy[Dict[Any, int]]:
    """Multisets ``record -> nonzero weight`` (pairs by default), mostly positive weights."""
    records = pair_records() if records is None else records
    weights = st.one_of(st.integers(1, max_weight), st.integers(min_weight, max_weight)).filter(
        bool
    )
    return st.dictionaries(records, weights, max_size=max_size)


# ---------------------------------------------------------------------------------------------
# Programs


def _names(
    registry: Dict[str, ref.Fn],
    *,
    arg: Optional[str] = None,
    out: Optional[str] = None,
    closed: Optional[bool] = None,
    nonneg: Optional[bool] = None,
) -> List[str]:
    return [
        name
        for name, f in registry.items()
        if (arg is None or f.arg == arg)
        and (out is None or f.out == out)
        and (closed is None or f.closed == closed)
        and (nonneg is None or f.nonneg == nonneg)
    ]


@dataclass(frozen=True)
class _Ctx:
    """Where a sub-program is generated: at the root (``parent is None``) or inside an iterate
    body. Inside a body every generated collection must have nonnegative weights whenever the
    loop variable is a set (see :func:`_iterate`), so ``Negate``, signed thresholds/reducers and
    antijoins against non-sets are not generated there, and entered collections are ``Distinct``.
    """

    n_inputs: int
    loops: int
    max_loops: int
    parent: Optional["_Ctx"] = None
    linear_only: bool = False
    temporal: bool = False

    @property
    def inner(self) -> bool:
        return self.parent is not None

    def enter_loop(self) -> "_Ctx":
        return _Ctx(
            self.n_inputs, self.loops + 1, self.max_loops, self, self.linear_only, self.temporal
        )


def _leaf(draw: Any, typ: str, ctx: _Ctx) -> Node:
    """The simplest collection of type ``typ`` available in ``ctx``."""
    if typ == ref.PAIR:
        if not ctx.inner:
            return ref.Input(draw(st.integers(0, ctx.n_inputs - 1)))
        if draw(st.booleans()):
            return ref.Variable()
        outer = _gen(draw, ref.PAIR, draw(st.integers(0, 1)), ctx.parent)
        return ref.Enter(ref.Distinct(outer))
    if typ == ref.INT:
        return ref.Map(
            _leaf(draw, ref.PAIR, ctx), draw(st.sampled_from(["key", "val", "sum_mod6"]))
        )
    if typ == ref.JOINED:
        return ref.Join(_leaf(draw, ref.PAIR, ctx), _leaf(draw, ref.PAIR, ctx))
    if typ == ref.PCOUNT:
        return ref.Count(_leaf(draw, ref.PAIR, ctx))
    if typ == ref.TEXT:
        return ref.Map(_leaf(draw, ref.PAIR, ctx), "spell")
    raise ValueError(typ)


def _keys(draw: Any, depth: int, ctx: _Ctx, *, as_set: bool) -> Node:
    """A collection of keys (ints), usually ``Map(pairs, 'key')`` as in the book."""
    if draw(st.integers(0, 3)):
        keys = ref.Map(_gen(draw, ref.PAIR, depth, ctx), "key")
    else:
        keys = _gen(draw, ref.INT, depth, ctx)
    return ref.Distinct(keys) if as_set else keys


def _options(typ: str, depth: int, ctx: _Ctx) -> List[str]:
    """Which constructions may produce a ``typ`` collection here (simplest first, for shrinking)."""
    opts = ["map", "filter", "flat_map", "concat", "consolidate", "distinct", "threshold"]
    if not _names(ref.MAPS, out=typ):
        opts.remove("map")
    if not ctx.inner:
        opts.append("negate")
    if ctx.temporal and typ == ref.PAIR:
        opts += ["temporal_filter", "freeze_at"] * 2
    if ctx.linear_only:
        return [o for o in opts if o not in ("distinct", "threshold")]
    if typ == ref.PAIR:
        # Listed twice: the pair-only constructions would otherwise be rare.
        opts += ["semijoin", "antijoin", "reduce", "count"] * 2
        # Records that do not fit numpy columns (strings; ints beyond int64, not where time
        # bounds are read from values), so that arrangements take both paths.
        opts += ["text"] if ctx.temporal else ["text", "wide"]
        if ctx.loops < ctx.max_loops and depth >= 2:
            opts += ["iterate"] * (4 if ctx.loops == 0 else 1)
    elif typ == ref.JOINED:
        opts.append("join")
    elif typ == ref.PCOUNT:
        opts.append("count")
    return opts


def _gen(draw: Any, typ: str, depth: int, ctx: _Ctx) -> Node:
    """A random program of record type ``typ`` with roughly ``depth`` levels of operators."""
    # Drawn first so that shrinking (towards 0) can cut any sub-program down to a leaf.
    if depth <= 0 or draw(st.integers(0, 7)) == 0:
        return _leaf(draw, typ, ctx)
    kind = draw(st.sampled_from(_options(typ, depth, ctx)))
    sub = depth - 1
    if kind == "map":
        fns = _names(ref.MAPS, out=typ)
        if ctx.linear_only:
            fns = [f for f in fns if ref.MAPS[f].arg in (ref.PAIR, ref.INT)]
        if ctx.temporal:  # time bounds are read from the values: keep them small
            fns = [f for f in fns if f != "widen"]
        fn = ref.MAPS[draw(st.sampled_from(fns))]
        return ref.Map(_gen(draw, fn.arg, sub, ctx), fn.name)
    if kind == "filter":
        pred = draw(st.sampled_from(_names(ref.FILTERS, arg=typ)))
        return ref.Filter(_gen(draw, typ, sub, ctx), pred)
    if kind == "flat_map":
        names = _names(ref.FLAT_MAPS, out=typ)
        if not names:  # no flat_map produces this type: fall back to a filter
            return ref.Filter(
                _gen(draw, typ, sub, ctx), draw(st.sampled_from(_names(ref.FILTERS, arg=typ)))
            )
        fn = ref.FLAT_MAPS[draw(st.sampled_from(names))]
        return ref.FlatMap(_gen(draw, fn.arg, sub, ctx), fn.name)
    if kind == "concat":
        return ref.Concat(_gen(draw, typ, sub, ctx), _gen(draw, typ, sub, ctx))
    if kind == "consolidate":
        return ref.Consolidate(_gen(draw, typ, sub, ctx))
    if kind == "negate":
        return ref.Negate(_gen(draw, typ, sub, ctx))
    if kind == "distinct":
        return ref.Distinct(_gen(draw, typ, sub, ctx))
    if kind == "threshold":
        names = _names(ref.THRESHOLDS, nonneg=True) if ctx.inner else list(ref.THRESHOLDS)
        return ref.Threshold(_gen(draw, typ, sub, ctx), draw(st.sampled_from(names)))
    if kind == "join":
        return ref.Join(_gen(draw, ref.PAIR, sub, ctx), _gen(draw, ref.PAIR, sub, ctx))
    if kind == "semijoin":
        return ref.Semijoin(_gen(draw, ref.PAIR, sub, ctx), _keys(draw, sub, ctx, as_set=False))
    if kind == "antijoin":
        # Inside a body, keys must be a set so that a - a.semijoin(keys) stays nonnegative.
        return ref.Antijoin(_gen(draw, ref.PAIR, sub, ctx), _keys(draw, sub, ctx, as_set=ctx.inner))
    if kind == "reduce":
        names = _names(ref.REDUCERS, nonneg=True) if ctx.inner else list(ref.REDUCERS)
        return ref.Reduce(_gen(draw, ref.PAIR, sub, ctx), draw(st.sampled_from(names)))
    if kind == "count":
        return ref.Count(_gen(draw, ref.INT if typ == ref.PAIR else ref.PAIR, sub, ctx))
    if kind == "temporal_filter":
        bounds = st.one_of(st.none(), st.sampled_from(sorted(ref.BOUNDS)))
        return ref.TemporalFilter(_gen(draw, typ, sub, ctx), draw(bounds), draw(bounds))
    if kind == "freeze_at":
        cutoff = draw(st.sampled_from(sorted(ref.BOUNDS)))
        return ref.FreezeAt(_gen(draw, typ, sub, ctx), cutoff)
    if kind == "iterate":
        return _iterate(draw, sub, ctx)
    if kind == "text":
        return ref.Map(_gen(draw, ref.TEXT, sub, ctx), "unspell")
    if kind == "wide":  # pairs of which some have values beyond int64
        wide = ref.Map(_gen(draw, ref.PAIR, sub, ctx), "widen")
        return ref.Concat(wide, _gen(draw, ref.PAIR, sub, ctx))
    raise AssertionError(kind)


def _iterate(draw: Any, depth: int, ctx: _Ctx) -> ref.Iterate:
    """A convergent ``Iterate`` over pairs. Two templates:

    *Reachability* (the book's shape)::

        roots = Distinct(R); edges = Distinct(E)
        Iterate(roots, Distinct(Concat(Map(Join(Variable(), Enter(edges)), 'hop'), Enter(roots))))

      ``F(x) = distinct(hop(x ⋈ edges) + roots)`` is monotone on sets and ``x0 = roots <= F(x0)``,
      so the iterates increase; records are ``(node, label)`` over finitely many nodes/labels.

    *Inflationary*::

        Iterate(S, Distinct(Concat(Map(G, closed_fn), Variable())))

      ``G`` is any body sub-program that has nonnegative weights whenever the loop variable is a
      set (enforced by ``_Ctx``), and ``closed_fn`` maps into the 36 pairs of 0..5 x 0..5. From
      ``x1`` on every iterate is a set and ``x_{i+1} = distinct(f(G(x_i)) + x_i) >= x_i``, an
      increasing chain within ``supp(x1) ∪ 0..5²``: it converges in fewer than ~40 steps.
    """
    body_ctx = ctx.enter_loop()
    if draw(st.booleans()):
        roots = ref.Distinct(_gen(draw, ref.PAIR, max(depth - 1, 0), ctx))
        edges = ref.Distinct(_gen(draw, ref.PAIR, max(depth - 1, 0), ctx))
        step = ref.Map(ref.Join(ref.Variable(), ref.Enter(edges)), "hop")
        return ref.Iterate(roots, ref.Distinct(ref.Concat(step, ref.Enter(roots))))
    source = _gen(draw, ref.PAIR, depth, ctx)
    g = _gen(draw, ref.PAIR, depth, body_ctx)
    fn = draw(st.sampled_from(_names(ref.MAPS, arg=ref.PAIR, out=ref.PAIR, closed=True)))
    return ref.Iterate(source, ref.Distinct(ref.Concat(ref.Map(g, fn), ref.Variable())))


_OUTPUT_TYPES = (ref.PAIR, ref.PAIR, ref.PAIR, ref.INT, ref.JOINED, ref.PCOUNT)


@st.composite
def programs(
    draw: Any,
    max_depth: int = 4,
    n_inputs: Optional[int] = None,
    *,
    max_loops: int = 2,
    output_types: Sequence[str] = _OUTPUT_TYPES,
    temporal: bool = False,
) -> ref.Program:
    """Random well-typed :class:`reference.Program` s.

    ``max_depth`` bounds operator nesting (binary operators make trees of up to ~2**max_depth
    leaves); ``n_inputs`` (default: drawn from 1..3) is the number of input collections, all of
    ``(key, val)`` pairs; ``max_loops`` bounds iterate nesting (0: no iterate; 2: Product times
    nested two deep). The output record type is drawn from ``output_types`` (``'pair'``,
    ``'int'``, ``'joined'``, ``'pcount'``; repeat a type to weight it). All iterates converge
    (see :func:`_iterate`). ``temporal``: also temporal filters and freeze_at (on pairs, at
    the root and in iterate bodies, bounds from ``reference.BOUNDS``).
    """
    n = draw(st.integers(1, 3)) if n_inputs is None else n_inputs
    depth = draw(st.integers(0, max_depth))
    typ = draw(st.sampled_from(list(output_types)))
    ctx = _Ctx(n_inputs=n, loops=0, max_loops=max_loops, temporal=temporal)
    return ref.Program(_gen(draw, typ, depth, ctx), n)


@st.composite
def linear_programs(draw: Any, max_depth: int = 5, n_inputs: Optional[int] = None) -> ref.Program:
    """Programs of only linear operators: map, filter, flat_map, negate, concat, consolidate."""
    n = draw(st.integers(1, 3)) if n_inputs is None else n_inputs
    ctx = _Ctx(n_inputs=n, loops=0, max_loops=0, linear_only=True)
    typ = draw(st.sampled_from([ref.PAIR, ref.INT]))
    return ref.Program(_gen(draw, typ, draw(st.integers(0, max_depth)), ctx), n)


@st.composite
def iterative_programs(
    draw: Any,
    max_depth: int = 3,
    n_inputs: Optional[int] = None,
    *,
    max_loops: int = 2,
    temporal: bool = False,
) -> ref.Program:
    """Programs whose output is an ``Iterate`` (possibly post-processed by one operator);
    ``temporal`` as in :func:`programs`."""
    n = draw(st.integers(1, 3)) if n_inputs is None else n_inputs
    ctx = _Ctx(n_inputs=n, loops=0, max_loops=max(max_loops, 1), temporal=temporal)
    node: Node = _iterate(draw, max(max_depth - 1, 0), ctx)
    post = draw(st.sampled_from(["none", "count", "reduce", "map"]))
    if post == "count":
        node = ref.Count(node)
    elif post == "reduce":
        node = ref.Reduce(node, draw(st.sampled_from(list(ref.REDUCERS))))
    elif post == "map":
        node = ref.Map(node, draw(st.sampled_from(_names(ref.MAPS, arg=ref.PAIR))))
    return ref.Program(node, n)


# ---------------------------------------------------------------------------------------------
# Driver scripts


_ACTIONS = ("insert", "retract", "advance", "step", "insert_at", "retract_at", "negative")


@st.composite
def update_streams(
    draw: Any,
    n_inputs: int,
    *,
    max_actions: int = 40,
    records: Optional[st.SearchStrategy[Any]] = None,
    max_diff: int = 2,
    max_advance: int = 3,
    max_offset: int = 3,
    max_step: int = 3,
) -> List[tuple]:
    """A script of driver actions for ``n_inputs`` input sessions (every session starts at 0):

    * ``("update", i, record, diff)`` -- at session i's current time;
    * ``("update_at", i, record, offset, diff)`` -- at current time + ``offset`` (offset >= 0);
    * ``("advance", i, new_time)`` -- ``new_time`` > session i's current time; each session
      advances on its own, so the inputs' frontiers are uneven;
    * ``("step", n)`` -- run the workers ``n`` steps;
    * ``("close", i)`` -- close session i early (rare; no later action touches input i), so
      operators see one input complete while others still change.

    Diffs are nonzero. Most negative diffs retract (part of) a record previously inserted into
    the same input; a few are retractions of records never inserted. ``reference.script_updates``
    turns a script into the expected per-input ``(record, time, diff)`` lists.
    """
    records = pair_records() if records is None else records
    now = [0] * n_inputs
    live: List[Dict[Any, int]] = [{} for _ in range(n_inputs)]  # record -> inserted, not retracted
    open_inputs = list(range(n_inputs))
    script: List[tuple] = []
    for _ in range(draw(st.integers(0, max_actions))):
        kind = draw(st.sampled_from(_ACTIONS))
        if kind == "step":
            script.append(("step", draw(st.integers(1, max_step))))
            continue
        if not open_inputs:
            continue
        i = draw(st.sampled_from(open_inputs))
        if draw(st.integers(0, 24)) == 0:
            open_inputs.remove(i)
            script.append(("close", i))
            continue
        if kind == "advance":
            now[i] += draw(st.integers(1, max_advance))
            script.append(("advance", i, now[i]))
            continue
        if kind in ("retract", "retract_at") and live[i]:
            rec = draw(st.sampled_from(sorted(live[i])))
            diff = -draw(st.integers(1, live[i][rec]))
        elif kind == "negative":
            rec, diff = draw(records), -draw(st.integers(1, max_diff))
        else:
            rec, diff = draw(records), draw(st.integers(1, max_diff))
        left = live[i].get(rec, 0) + diff
        if left > 0:
            live[i][rec] = left
        else:
            live[i].pop(rec, None)
        if kind.endswith("_at"):
            script.append(("update_at", i, rec, draw(st.integers(0, max_offset)), diff))
        else:
            script.append(("update", i, rec, diff))
    return script


# ---------------------------------------------------------------------------------------------
# Times, antichains, batches


def times(max_value: int = 20) -> st.SearchStrategy[int]:
    """Root-scope times: ints ``0..max_value``."""
    return st.integers(0, max_value)


def product_times(depth: Optional[int] = None, max_value: int = 8) -> st.SearchStrategy[Product]:
    """``Product`` times: ``depth`` 1 gives ``Product(int, int)``, 2 gives
    ``Product(Product(int, int), int)`` (a loop inside a loop); ``None`` draws either."""
    if depth is None:
        return st.one_of(product_times(1, max_value), product_times(2, max_value))
    if depth < 1:
        return st.integers(0, max_value)
    return st.builds(Product, product_times(depth - 1, max_value), st.integers(0, max_value))


def time_strategies(max_value: int = 8) -> st.SearchStrategy[st.SearchStrategy[Any]]:
    """A strategy *of* time strategies, each of one shape (int, Product, nested Product), for
    drawing several times that are comparable with each other."""
    return st.sampled_from(
        [times(max_value), product_times(1, max_value), product_times(2, max_value)]
    )


def _minimal(elements: Sequence[Any]) -> List[Any]:
    """The minimal elements of ``elements`` under the partial order (an antichain), sorted."""
    uniq = sorted(set(elements))
    return [t for t in uniq if not any(u != t and less_equal(u, t) for u in uniq)]


@st.composite
def antichains(
    draw: Any, elements: Optional[st.SearchStrategy[Any]] = None, max_size: int = 6
) -> List[Any]:
    """Antichains: lists of mutually incomparable times of one shape (drawn if ``elements`` is
    None), sorted (lexicographically, for determinism). May be empty."""
    elements = draw(time_strategies()) if elements is None else elements
    return _minimal(draw(st.lists(elements, max_size=max_size)))


@st.composite
def batches(
    draw: Any,
    time_strategy: Optional[st.SearchStrategy[Any]] = None,
    records: Optional[st.SearchStrategy[Any]] = None,
    *,
    min_size: int = 0,
    max_size: int = 20,
    max_diff: int = 3,
    allow_zero: bool = False,
) -> List[Tuple[Any, Any, int]]:
    """Batches of ``(data, time, diff)`` updates with times of one shape (drawn if
    ``time_strategy`` is None) and physical duplicates allowed; zero diffs only if
    ``allow_zero``."""
    time_strategy = draw(time_strategies()) if time_strategy is None else time_strategy
    records = pair_records() if records is None else records
    diffs = st.integers(-max_diff, max_diff)
    if not allow_zero:
        diffs = diffs.filter(bool)
    return draw(
        st.lists(st.tuples(records, time_strategy, diffs), min_size=min_size, max_size=max_size)
    )


@st.composite
def program_and_script(
    draw,
    program_strategy: Optional[st.SearchStrategy] = None,
    columns: Sequence[str] = MODES,
):
    """``(program, script, n_inputs)``: a program (``programs(max_depth=4)`` unless
    ``program_strategy`` is given) and an update stream over its inputs, a
    :class:`~support.columns.Script` naming the ``TIMELYPY_COLUMNS`` mode it runs in, drawn
    from ``columns`` (both by default: each mode runs about half of a test's examples, and the
    suite checks both paths without running twice)."""
    program = draw(program_strategy if program_strategy is not None else programs(max_depth=4))
    n_inputs = program.n_inputs
    script = draw(update_streams(n_inputs, max_actions=30))
    mode = draw(st.sampled_from(list(columns)))
    return program, Script(script, mode), n_inputs
