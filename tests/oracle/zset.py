"""A test oracle: pure functions over batches of ``(data, time, diff)`` updates (the Z-set algebra).

The Z-set operators of the DBSP paper (Budiu et al., VLDB 2023) and the collection operators of
"Differential Dataflow" (McSherry et al., CIDR 2013), written as plain functions over lists.
The engine does not use this module: tests check worked examples against it.
"""

from __future__ import annotations

from functools import reduce
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    NoReturn,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from timelypy.errors import TimeOrderError, UnhashableDataError
from timelypy.order import Product, less_equal
from timelypy.order import join as lattice_join
from timelypy.order import meet as lattice_meet

__all__ = [
    "Update",
    "IndexedUpdate",
    "TraceEntry",
    "consolidate",
    "consolidate_data",
    "consolidate_trace",
    "negate",
    "plus",
    "minus",
    "inspect",
    "map_updates",
    "filter_updates",
    "flat_map_updates",
    "explode",
    "join_function",
    "index_with",
    "join",
    "join_trace",
    "distinct",
    "threshold",
    "count",
    "aggregate",
    "accumulate_at",
    "advance_by",
    "distinct_trace",
    "distinct_incremental",
]

# A batch is a plain list of tuples.
Update = Tuple[Any, Any, int]
"""``(data, time, diff)``: ``diff`` copies of ``data`` are added at ``time``."""
IndexedUpdate = Tuple[Tuple[Any, Any], Any, int]
"""``((key, val), time, diff)``."""
TraceEntry = Tuple[Any, Any, Any, int]
"""``(key, val, time, diff)``: the flat 4-tuple form of trace entries."""
Accumulation = Dict[Any, int]
"""``{data: weight}`` with no zero weights."""


# --------------------------------------------------------------------------------------
# Helpers


def _is_hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _hash_error(func: str, role: str, value: Any) -> Optional[UnhashableDataError]:
    """The :class:`UnhashableDataError` to raise if ``value`` is unhashable, else ``None``.

    Called from an ``except TypeError`` block: ``None`` means the ``TypeError`` came from
    elsewhere (a bad diff, a user function) and should propagate unchanged.
    """
    if _is_hashable(value):
        return None
    return UnhashableDataError(
        f"{func}: {role} must be hashable, got {type(value).__name__} {value!r}"
    )


def _reraise(e: TypeError, *candidates: Tuple[str, str, Any]) -> NoReturn:
    """Re-raise ``e`` as :class:`UnhashableDataError` for the first unhashable candidate
    ``(func, role, value)``, or unchanged if all are hashable. Never returns."""
    for func, role, value in candidates:
        err = _hash_error(func, role, value)
        if err is not None:
            raise err from e
    raise e


def _sort_items(items: List[Tuple[Any, Any]]) -> List[Tuple[Any, Any]]:
    """Sort ``(key, value)`` pairs by key; by ``repr(key)`` (stable) if keys do not compare."""
    try:
        return sorted(items, key=lambda kv: kv[0])
    except TypeError:
        return sorted(items, key=lambda kv: repr(kv[0]))


def _D(x: int) -> int:
    """Distinct of one accumulated weight: 1 if positive, else 0 (negative means absent)."""
    return 1 if x > 0 else 0


# --------------------------------------------------------------------------------------
# Consolidation


def consolidate(updates: Iterable[Update]) -> List[Update]:
    """Sum the diffs of equal ``(data, time)`` and drop zero sums.

    The result is sorted by ``(data, time)`` (Python tuple order, which for :class:`Product`
    times is lexicographic: a deterministic order, not "happens before"); if those are not
    mutually comparable, by their ``repr`` (stable, so ties keep first-seen order).

    Cost: O(n) hashing plus O(m log m) sorting for m distinct ``(data, time)``.
    Raises :class:`UnhashableDataError` if a ``data`` is not hashable.
    """
    return _consolidate(updates, "consolidate")


def _consolidate(updates: Iterable[Update], func: str) -> List[Update]:
    """:func:`consolidate`, naming ``func`` in errors."""
    acc: Dict[Tuple[Any, Any], int] = {}
    get = acc.get
    data = None
    try:
        for data, time, diff in updates:
            k = (data, time)
            acc[k] = get(k, 0) + diff
    except TypeError as e:
        _reraise(e, (func, "data", data))
    items = _sort_items([kv for kv in acc.items() if kv[1] != 0])
    return [(d, t, w) for (d, t), w in items]


def consolidate_data(updates: Iterable[Update]) -> Accumulation:
    """Sum diffs per ``data`` ignoring times: ``{data: weight}`` without zero weights.

    Keys are inserted in sorted order (``repr`` order if not comparable), so
    ``list(result.items())`` is the sorted list of ``(data, weight)``.

    Cost: O(n) hashing plus O(m log m) sorting for m distinct data.
    """
    acc: Dict[Any, int] = {}
    get = acc.get
    data = None
    try:
        for data, _time, diff in updates:
            acc[data] = get(data, 0) + diff
    except TypeError as e:
        _reraise(e, ("consolidate_data", "data", data))
    return dict(_sort_items([kv for kv in acc.items() if kv[1] != 0]))


def consolidate_trace(trace: Iterable[TraceEntry], time: Any = None) -> List[IndexedUpdate]:
    """``consolidate``: merge a trace of ``(key, val, time, diff)`` across all of
    its times into one indexed batch ``((key, val), time, weight)`` at ``time`` (``None``:
    ``None``, "the operator's current time").

    Cost: O(n) hashing plus O(m log m) sorting for m distinct ``(key, val)``.
    """
    acc: Dict[Tuple[Any, Any], int] = {}
    get = acc.get
    kv: Any = None
    try:
        for key, val, _t, diff in trace:
            kv = (key, val)
            acc[kv] = get(kv, 0) + diff
    except TypeError as e:
        _reraise(e, ("consolidate_trace", "(key, val)", kv))
    return [(kv, time, w) for kv, w in _sort_items([p for p in acc.items() if p[1] != 0])]


# --------------------------------------------------------------------------------------
# Linear, element-wise operators (order-preserving, not consolidated)


def negate(updates: Iterable[Update]) -> List[Update]:
    """Flip the sign of every diff. Order preserved. Cost: O(n)."""
    return [(d, t, -w) for d, t, w in updates]


def plus(a: Iterable[Update], b: Iterable[Update]) -> List[Update]:
    """``a + b``, consolidated. Cost: that of :func:`consolidate` on ``|a| + |b|`` updates."""
    return _consolidate([*a, *b], "plus")


def minus(a: Iterable[Update], b: Iterable[Update]) -> List[Update]:
    """``a - b``, consolidated. Cost: that of :func:`consolidate` on ``|a| + |b|`` updates."""
    return _consolidate([*a, *negate(b)], "minus")


def inspect(f: Callable[[List[Update]], Any], updates: List[Update]) -> List[Update]:
    """Call ``f(updates)`` once on the whole batch (a debugging hook) and return ``updates``
    itself, unchanged. Cost: O(1) plus ``f``."""
    f(updates)
    return updates


def map_updates(f: Callable[[Any], Any], updates: Iterable[Update]) -> List[Update]:
    """``(f(data), time, diff)`` for each update. Order preserved. Cost: O(n) calls of ``f``."""
    return [(f(d), t, w) for d, t, w in updates]


def filter_updates(p: Callable[[Any], bool], updates: Iterable[Update]) -> List[Update]:
    """The updates whose ``data`` satisfies ``p``. Order preserved. Cost: O(n) calls of ``p``."""
    return [u for u in updates if p(u[0])]


def flat_map_updates(f: Callable[[Any], Iterable[Any]], updates: Iterable[Update]) -> List[Update]:
    """``(x, time, diff)`` for each ``x`` in ``f(data)``. Order preserved.
    Cost: O(n + output) plus the calls of ``f``."""
    return [(x, t, w) for d, t, w in updates for x in f(d)]


def explode(
    f: Callable[[Any], Iterable[Tuple[Any, int]]], updates: Iterable[Update]
) -> List[Update]:
    """``(data2, time, diff * diff2)`` for each ``(data2, diff2)`` in ``f(data)``.

    ``diff2`` may be negative, turning an insertion into a retraction and vice versa.
    Order preserved, zero products kept (consolidate to drop them).
    Cost: O(n + output) plus the calls of ``f``.
    """
    return [(d2, t, w * w2) for d, t, w in updates for d2, w2 in f(d)]


def join_function(
    f: Callable[[Any], Iterable[Tuple[Any, Any, int]]], updates: Iterable[Update]
) -> List[Update]:
    """The general linear operator: for each ``(data2, time2, diff2)`` in
    ``f(data)`` emit ``(data2, lattice_join(time, time2), diff * diff2)``.

    With ``time2`` the minimum time and ``diff2 = 1`` this is :func:`flat_map_updates`.
    Order preserved, not consolidated. Cost: O(n + output) plus the calls of ``f``.
    """
    return [(d2, lattice_join(t, t2), w * w2) for d, t, w in updates for d2, t2, w2 in f(d)]


def index_with(key_fn: Callable[[Any], Any], updates: Iterable[Update]) -> List[IndexedUpdate]:
    """``((key_fn(data), data), time, diff)`` for each update. Order preserved.
    Cost: O(n) calls of ``key_fn``."""
    return [((key_fn(d), d), t, w) for d, t, w in updates]


# --------------------------------------------------------------------------------------
# Joins


def _index_by_key(
    func: str, entries: Iterable[Tuple[Any, Any, Any, int]]
) -> Dict[Any, List[Tuple[Any, Any, int]]]:
    index: Dict[Any, List[Tuple[Any, Any, int]]] = {}
    key = None
    try:
        for key, val, t, w in entries:
            lst = index.get(key)
            if lst is None:
                index[key] = [(val, t, w)]
            else:
                lst.append((val, t, w))
    except TypeError as e:
        _reraise(e, (func, "key", key))
    return index


def _join_indexed(
    func: str,
    f: Callable[[Any, Any, Any], Any],
    batch: Iterable[IndexedUpdate],
    index: Dict[Any, List[Tuple[Any, Any, int]]],
) -> List[Update]:
    acc: Dict[Tuple[Any, Any], int] = {}
    get = acc.get
    key: Any = None
    out: Any = None
    try:
        for (key, v1), t1, w1 in batch:
            matches = index.get(key)
            if not matches:
                continue
            for v2, t2, w2 in matches:
                out = f(key, v1, v2)
                k = (out, lattice_join(t1, t2))
                acc[k] = get(k, 0) + w1 * w2
    except TypeError as e:
        _reraise(e, (func, "key", key), (func, "join output", out))
    items = _sort_items([kv for kv in acc.items() if kv[1] != 0])
    return [(d, t, w) for (d, t), w in items]


def join(
    f: Callable[[Any, Any, Any], Any], a: Iterable[IndexedUpdate], b: Iterable[IndexedUpdate]
) -> List[Update]:
    """``join_stream``: for every pair ``((k, v1), t1, d1)`` in ``a`` and
    ``((k, v2), t2, d2)`` in ``b`` with equal ``k`` emit
    ``(f(k, v1, v2), lattice_join(t1, t2), d1 * d2)``. Consolidated and sorted.

    Bilinear: ``join(f, a1 + a2, b) == join(f, a1, b) + join(f, a2, b)``.
    Cost: O(|a| + |b| + matches) hashing (``b`` is hashed by key) plus sorting the output.
    Keys and outputs of ``f`` must be hashable.
    """
    index = _index_by_key("join", ((k, v, t, w) for (k, v), t, w in b))
    return _join_indexed("join", f, a, index)


def join_trace(
    f: Callable[[Any, Any, Any], Any], batch: Iterable[IndexedUpdate], trace: Iterable[TraceEntry]
) -> List[Update]:
    """Join an indexed batch with a trace of ``(key, val, time, diff)`` entries: as
    :func:`join`, with the trace entry ``(k, v2, t2, d2)`` read as ``((k, v2), t2, d2)``.

    Output times are ``lattice_join(t1, t2)`` (for a batch at the current time and a trace
    of earlier times in a total order, that is the current time: ``None``).
    Cost: O(|batch| + |trace| + matches) plus sorting the output.
    """
    index = _index_by_key("join_trace", trace)
    return _join_indexed("join_trace", f, batch, index)


# --------------------------------------------------------------------------------------
# Non-linear operators on one batch


def threshold(
    f: Callable[[int], int], updates: Union[Iterable[Update], Mapping[Any, int]]
) -> Union[List[Update], Accumulation]:
    """Replace each accumulated weight ``w`` by ``f(w)``, dropping zero results.

    ``updates`` is either a batch — then each ``(data, time)`` is its own group (every time
    slice of the batch is treated as a separate Z-set; for incremental behaviour across times
    use :func:`distinct_trace`) and the result is a consolidated, sorted batch — or an
    accumulation ``{data: weight}`` (e.g. from :func:`accumulate_at`), giving a dict.
    ``f`` is only called on non-zero weights.
    Cost: that of :func:`consolidate`, plus one call of ``f`` per group.
    """
    return _threshold(f, updates, "threshold")


def _threshold(
    f: Callable[[int], int], updates: Union[Iterable[Update], Mapping[Any, int]], func: str
) -> Union[List[Update], Accumulation]:
    if isinstance(updates, Mapping):
        out: Accumulation = {}
        for d, w in updates.items():
            if w != 0:
                w2 = f(w)
                if w2 != 0:
                    out[d] = w2
        return out
    result = []
    for d, t, w in _consolidate(updates, func):
        w2 = f(w)
        if w2 != 0:
            result.append((d, t, w2))
    return result


def distinct(
    updates: Union[Iterable[Update], Mapping[Any, int]],
) -> Union[List[Update], Accumulation]:
    """Weight 1 for each ``data`` whose accumulated weight is > 0; zero or negative weight
    means absent. Per ``(data, time)`` for a batch, per ``data`` for a ``{data: weight}``
    accumulation (see :func:`threshold`). Cost: that of :func:`consolidate`."""
    return _threshold(_D, updates, "distinct")


def count(values: Sequence[Tuple[Any, int]]) -> int:
    """Aggregate for :func:`aggregate`: the total weight of a key's ``(value, weight)`` list.
    Cost: O(len(values))."""
    return sum(w for _v, w in values)


def aggregate(
    fn: Callable[[List[Tuple[Any, int]]], Any], indexed: Iterable[IndexedUpdate]
) -> List[Update]:
    """For each ``(key, time)`` group emit ``((key, fn(values)), time, 1)`` where ``values``
    is the consolidated, sorted list of ``(value, weight)`` (no zero weights) of that key at
    that time. Keys whose values all cancel produce nothing. Sorted output.

    ``fn`` must be pure (e.g. :func:`count`). Cost: O(n) hashing, sorting each group, one
    call of ``fn`` per group.
    """
    groups: Dict[Tuple[Any, Any], Dict[Any, int]] = {}
    key: Any = None
    val: Any = None
    try:
        for (key, val), t, w in indexed:
            g = groups.get((key, t))
            if g is None:
                g = groups[(key, t)] = {}
            g[val] = g.get(val, 0) + w
    except TypeError as e:
        _reraise(e, ("aggregate", "key", key), ("aggregate", "value", val))
    out = []
    for (key, t), g in _sort_items(list(groups.items())):
        values = _sort_items([vw for vw in g.items() if vw[1] != 0])
        if values:
            out.append(((key, fn(values)), t, 1))
    return out


# --------------------------------------------------------------------------------------
# Times: accumulation and compaction


def accumulate_at(updates: Iterable[Update], t: Any) -> Accumulation:
    """The collection at time ``t``: sum of diffs of updates at times ``<= t`` in the partial
    order, as ``{data: weight}`` without zeros (keys in sorted order).
    Cost: O(n) comparisons and hashing plus sorting."""
    return consolidate_data(u for u in updates if less_equal(u[1], t))


def advance_by(t: Any, frontier: Sequence[Any]) -> Any:
    """Compact time ``t`` against ``frontier`` (a list of times, ideally an antichain): the
    meet over ``f`` in ``frontier`` of ``lattice_join(t, f)``. An empty frontier returns
    ``t`` unchanged.

    Guarantee: for every ``s`` with some ``f`` in ``frontier``, ``f <= s``:
    ``advance_by(t, frontier) <= s`` iff ``t <= s``. So updates may be moved to their advanced
    time without changing any accumulation the frontier still allows to be asked about.
    Cost: O(len(frontier)) lattice operations.
    """
    if not frontier:
        return t
    return reduce(lattice_meet, (lattice_join(t, f) for f in frontier))


# --------------------------------------------------------------------------------------
# Incremental distinct


def _check_batch_time(func: str, batch_time: Any, time: Any) -> None:
    if batch_time is not None and batch_time != time:
        raise TimeOrderError(
            f"{func}: batch update at time {batch_time!r}, but the operator's time is {time!r} "
            f"(batch updates must be at the current time, or None)"
        )


def _batch_weights(func: str, batch: Iterable[Update], time: Any) -> Dict[Any, int]:
    acc: Dict[Any, int] = {}
    data: Any = None
    try:
        for data, t, w in batch:
            if time is not None:
                _check_batch_time(func, t, time)
            acc[data] = acc.get(data, 0) + w
    except TypeError as e:
        _reraise(e, (func, "data", data))
    return acc


def distinct_trace(batch: Iterable[Update], trace: Iterable[Update], time: Any) -> List[Update]:
    """The change in ``distinct`` at ``time``, given the new updates ``batch`` at ``time`` and
    ``trace``, every earlier update (``(data, time, diff)`` triples).

    For a :class:`Product` time ``(e, i)`` of two ints, per data with ``w`` its batch weight:

    * ``w1``: trace weight at ``(e0, i0)`` with ``e0 < e`` and ``i0 < i``,
    * ``w2``: at ``(e0, i)`` with ``e0 < e``; ``w3``: at ``(e, i0)`` with ``i0 < i``,

    and the output weight is ``D(w1+w2+w3+w) - D(w1+w2) - D(w1+w3) + D(w1)``, ``D(x) = 1 if
    x > 0 else 0``: the distinct of the accumulation at ``(e, i)`` minus what distinct already
    output at times below it (inclusion-exclusion over the two predecessors). This can retract
    data that are not in ``batch`` (the "couch" case). Trace entries at ``time`` itself or
    at times not ``<= time`` are ignored. For an int ``time`` the output is
    ``D(w_before + w) - D(w_before)``.

    Batch updates must be at ``time`` (or ``None``). Output: ``(data, time, weight)``, sorted.
    Cost: O(|batch| + |trace|) plus sorting the output.
    """
    func = "distinct_trace"
    w = _batch_weights(func, batch, time)
    data: Any = None
    if type(time) is Product:
        e, i = time
        if type(e) is not int or type(i) is not int:
            raise TypeError(f"{func}: Product times must have two int coordinates, got {time!r}")
        w1: Dict[Any, int] = {}
        w2: Dict[Any, int] = {}
        w3: Dict[Any, int] = {}
        try:
            for data, t, diff in trace:
                te, ti = t
                if te < e:
                    if ti < i:
                        w1[data] = w1.get(data, 0) + diff
                    elif ti == i:
                        w2[data] = w2.get(data, 0) + diff
                elif te == e and ti < i:
                    w3[data] = w3.get(data, 0) + diff
        except TypeError as ex:
            _reraise(ex, (func, "data", data))
        out = []
        for d in {**w, **w2, **w3}:
            a, b, c, x = w1.get(d, 0), w2.get(d, 0), w3.get(d, 0), w.get(d, 0)
            r = _D(a + b + c + x) - _D(a + b) - _D(a + c) + _D(a)
            if r:
                out.append((d, time, r))
        return _consolidate(out, func)
    before: Dict[Any, int] = {}
    try:
        for data, t, diff in trace:
            if t < time:
                before[data] = before.get(data, 0) + diff
    except TypeError as ex:
        _reraise(ex, (func, "data", data))
    out = []
    for d, x in w.items():
        p = before.get(d, 0)
        r = _D(p + x) - _D(p)
        if r:
            out.append((d, time, r))
    return _consolidate(out, func)


def distinct_incremental(
    batch: Iterable[Update], trace: Iterable[Update], time: Any = None
) -> List[Update]:
    """``distinct`` (incremental): for each data in ``batch`` (new weight ``w``,
    all its times summed) with ``p`` the total weight of that data in ``trace`` (all its times
    summed: the trace is the integral of the earlier inputs), emit ``(data, time,
    D(p + w) - D(p))`` if non-zero. ``time`` defaults to ``None`` (``None``).
    Only correct for totally ordered times; use :func:`distinct_trace` for Products.
    Cost: O(|batch| + |trace|) plus sorting the output.
    """
    func = "distinct_incremental"
    w = _batch_weights(func, batch, None)
    before: Dict[Any, int] = {}
    data: Any = None
    try:
        for data, _t, diff in trace:
            if data in w:
                before[data] = before.get(data, 0) + diff
    except TypeError as ex:
        _reraise(ex, (func, "data", data))
    out = []
    for d, x in _sort_items(list(w.items())):
        p = before.get(d, 0)
        r = _D(p + x) - _D(p)
        if r:
            out.append((d, time, r))
    return out
