"""Collections: streams of ``(data, time, diff)`` updates, and the differential operators.

A collection's content at time ``t`` is the sum of the diffs of all updates at times ``<= t``.
Linear operators (map, filter, flat_map, explode, join_function, negate, enter/leave time
changes) are *fused*: a chain of them runs as one operator pass over each batch (seed 001); the
fused operator appears in the dataflow's structure as ``Linear[map>filter>...]``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..dataflow.capture import Captured
from ..dataflow.fusion import fuse_updates
from ..dataflow.probe import ProbeHandle
from ..dataflow.stream import Stream
from ..errors import TimelyError
from .arrange import Arranged, arrange

__all__ = ["Collection", "CapturedCollection", "concatenate"]


class Collection:
    """A changing multiset of records, as a stream of ``(data, time, diff)`` updates.

    Build collections with ``scope.new_collection()``; every method returns a new collection
    (or an :class:`~timelypy.differential.arrange.Arranged`, a probe, or a capture).
    """

    __slots__ = ("scope", "_stream", "_base", "_stages")

    def __init__(self, scope: Any, stream: Optional[Stream] = None, *,
                 base: Optional["Collection"] = None, stages: Optional[List] = None):
        self.scope = scope
        self._stream = stream
        self._base = base
        self._stages = stages or []

    # ------------------------------------------------------------------ plumbing
    @property
    def inner(self) -> Stream:
        """The timely stream of update batches (builds the fused linear operator if needed)."""
        if self._stream is None:
            base = self._base.inner
            names = ">".join(kind for kind, _ in self._stages)
            fn = fuse_updates(list(self._stages), self.scope.order.join)
            self._stream = base.map_batch(fn, name=f"Linear[{names}]")
        return self._stream

    def _then(self, kind: str, f: Any) -> "Collection":
        if self._stream is not None:
            return Collection(self.scope, base=self, stages=[(kind, f)])
        return Collection(self.scope, base=self._base, stages=self._stages + [(kind, f)])

    # ------------------------------------------------------------------ linear
    def map(self, f: Callable[[Any], Any]) -> "Collection":
        """Apply ``f`` to every record (counts of records made equal add up)."""
        return self._then("map", f)

    def filter(self, predicate: Callable[[Any], bool]) -> "Collection":
        """Keep the records satisfying ``predicate``."""
        return self._then("filter", predicate)

    def flat_map(self, f: Callable[[Any], Iterable[Any]]) -> "Collection":
        """Replace each record by the records of ``f(record)``."""
        return self._then("flat_map", f)

    def explode(self, f: Callable[[Any], Iterable[Tuple[Any, int]]]) -> "Collection":
        """Replace each record by ``(record2, diff2)`` pairs; diffs multiply (seed 001)."""
        return self._then("explode", f)

    def join_function(self, f: Callable[[Any], Iterable[Tuple[Any, Any, int]]]) -> "Collection":
        """The general linear operator: each record ``x`` becomes the updates ``f(x)`` of
        ``(record2, time2, diff2)``; output time is the lattice join of the times, diff the
        product (seed 001)."""
        return self._then("join_function", f)

    def negate(self) -> "Collection":
        """Every diff negated."""
        return self._then("negate", None)

    def inspect(self, f: Callable[[Tuple[Any, Any, int]], Any]) -> "Collection":
        """Call ``f((data, time, diff))`` for every update; pass the collection through."""
        return self._then("inspect", f)

    def map_times(self, f: Callable[[Any], Any]) -> "Collection":
        """Apply ``f`` to every update's time (``f`` must not move times backwards)."""
        return self._then("time", f)

    def results_in(self, summary: Any) -> "Collection":
        """Advance every update's time by a path summary, dropping those that overflow."""
        return self._then("results_in", summary.results_in)

    def concat(self, *others: "Collection") -> "Collection":
        """The sum of this collection and ``others``."""
        if not others:
            return self
        return Collection(self.scope, self.inner.concat(*[o.inner for o in others]))

    def concatenate(self, others: Iterable["Collection"]) -> "Collection":
        return self.concat(*list(others))

    def consolidate(self, name: str = "Consolidate") -> "Collection":
        """The same collection with at most one update per ``(data, time)`` (and none that
        sum to zero), emitted once each time is complete."""
        from .consolidate import consolidate_stream

        return Collection(self.scope, consolidate_stream(self, name))

    # ------------------------------------------------------------------ scopes
    def enter(self, child: Any) -> "Collection":
        """This collection inside the nested scope ``child`` (unchanging across iterations)."""

        return Collection(child, self.inner.enter(child)).map_times(_to_inner)

    def leave(self) -> "Collection":
        """This collection in the parent scope, accumulating every iteration."""
        parent = self.scope.parent
        if parent is None:
            raise TimelyError("leave: the collection is in a root scope")
        return Collection(parent, self.map_times(_to_outer).inner.leave())

    def iterate(self, body: Callable[["Collection"], "Collection"],
                max_iterations: Optional[int] = None, name: str = "Iterate") -> "Collection":
        """The fixed point of ``body`` starting from this collection (seed 003).

        ``body`` receives the loop variable (a collection in a nested scope) and returns the
        next iterate; bring outer collections in with ``outer.enter(variable.scope)``. The body
        must consolidate (reduce, distinct, consolidate...) or cancelling updates may circulate.
        ``max_iterations`` bounds the loop: exceeding it raises
        :class:`~timelypy.errors.NotConvergedError`.
        """
        from .iterate import Variable

        def inner(child):
            var = Variable.new_from(self.enter(child), max_iterations=max_iterations)
            result = body(var)
            if not isinstance(result, Collection) or result.scope.subgraph is not child.subgraph:
                raise TimelyError("iterate: the body must return a collection of the loop's scope")
            var.set(result)
            return result.leave()

        return self.scope.iterative(inner, name)

    # ------------------------------------------------------------------ arranged
    def arrange_by_key(self, name: Optional[str] = None) -> Arranged:
        """Index ``(key, val)`` records by key into a shared trace."""
        return arrange(self, by_self=False, name=name)

    def arrange_by_self(self, name: Optional[str] = None) -> Arranged:
        """Index records by themselves (keys with no values)."""
        return arrange(self, by_self=True, name=name)

    def join(self, other: "Collection") -> "Collection":
        """``(key, (v1, v2))`` for matching ``(key, v1)`` and ``(key, v2)``; counts multiply."""
        return _arranged(self).join(_arranged(other))

    def join_map(self, other: "Collection", f: Callable[[Any, Any, Any], Any]) -> "Collection":
        """``f(key, v1, v2)`` for every matching pair."""
        return _arranged(self).join_map(_arranged(other), f)

    def join_core(self, other: Any, logic: Callable[[Any, Any, Any], Iterable[Any]]) -> "Collection":
        """The records of the iterable ``logic(key, v1, v2)`` for every matching pair."""
        return _arranged(self).join_core(_arranged(other), logic)

    def semijoin(self, keys: Any) -> "Collection":
        """The ``(key, val)`` records whose key is in ``keys`` (counts multiply)."""
        return _arranged(self).semijoin(keys)

    def antijoin(self, keys: Any) -> "Collection":
        """The ``(key, val)`` records whose key is not in ``keys`` (``keys`` should be a set)."""
        return self.concat(self.semijoin(keys).negate())

    def reduce(self, logic: Callable[[Any, List[Tuple[Any, int]]], List[Tuple[Any, int]]],
               name: str = "Reduce") -> "Collection":
        """Per key, ``logic(key, [(val, count), ...])`` (sorted by value, counts non-zero)
        returns ``[(out_val, count), ...]``; the result holds ``(key, out_val)``."""
        return arrange(self, False, "ArrangeByKey", keep_trace=False).reduce(logic, name)

    def count(self) -> "Collection":
        """``(record, count)`` for every record with a non-zero count."""
        if self.scope.order.is_total:
            return self.count_total()
        return self._private_by_self().reduce(_count_logic, "Count").map(_unwrap_key_value)

    def count_total(self) -> "Collection":
        """``count`` for totally ordered times: O(1) per update (no interesting times)."""
        from .reduce import total_reduce

        return total_reduce(self._private_by_self(), "count", None, "CountTotal")

    def sum(self) -> "Collection":
        """``(key, total)`` where ``total`` sums ``value * count`` over the key's values."""
        return self.reduce(_sum_logic, "Sum")

    def distinct(self) -> "Collection":
        """Each record with a positive count, once (seed 000: non-positive counts vanish)."""
        if self.scope.order.is_total:
            return self.distinct_total()
        return self._private_by_self().reduce(_distinct_logic, "Distinct").map(_first)

    def distinct_total(self) -> "Collection":
        """``distinct`` for totally ordered times: O(1) per update."""
        return self.threshold_total(_positive, name="DistinctTotal")

    def threshold(self, f: Callable[[Any, int], int]) -> "Collection":
        """Each record with count ``f(record, count)`` (``f`` is called for non-zero counts)."""
        if self.scope.order.is_total:
            return self.threshold_total(f)

        def logic(key, vals):
            c = f(key, vals[0][1])
            return [((), c)] if c else []
        return self._private_by_self().reduce(logic, "Threshold").map(_first)

    def threshold_total(self, f: Callable[[Any, int], int], name: str = "ThresholdTotal") -> "Collection":
        """``threshold`` for totally ordered times: O(1) per update."""
        from .reduce import total_reduce

        return total_reduce(self._private_by_self(), "threshold", f, name)

    def _private_by_self(self) -> Arranged:
        return arrange(self, True, "ArrangeBySelf", keep_trace=False)

    # ------------------------------------------------------------------ observing
    def probe(self) -> ProbeHandle:
        """A probe on this collection's frontier."""
        return self.inner.probe()

    def probe_with(self, handle: ProbeHandle) -> "Collection":
        self.inner.probe_with(handle)
        return self

    def capture(self) -> "CapturedCollection":
        """Record every update (see :class:`CapturedCollection`)."""
        return CapturedCollection(self.inner.capture(), self.scope.order.le)

    def exchange(self, key_fn: Callable[[Any], Any]) -> "Collection":
        """Move every record to the worker owning ``key_fn(record)``."""
        return Collection(self.scope, self.inner.exchange(lambda u: key_fn(u[0])))

    def __repr__(self) -> str:
        return f"Collection({self.scope.name})"


def concatenate(collections: Sequence[Collection]) -> Collection:
    """The sum of several collections of one scope."""
    first, *rest = collections
    return first.concat(*rest)


def _arranged(c: Any) -> Arranged:
    if isinstance(c, Arranged):
        return c
    return c.arrange_by_key()


def _to_inner(t):
    from ..order import Product

    return Product(t, 0)


def _to_outer(t):
    return t[0]


def _first(kv):
    return kv[0]


def _unwrap_key_value(kv):
    return (kv[0], kv[1])


def _count_logic(key, vals):
    return [(vals[0][1], 1)]


def _sum_logic(key, vals):
    total = 0
    for v, c in vals:
        total += v * c
    return [(total, 1)]


def _positive(record, count):
    return 1 if count > 0 else 0


def _distinct_logic(key, vals):
    return [((), 1)] if vals[0][1] > 0 else []


class CapturedCollection:
    """The updates a collection produced, for tests and programs.

    ``updates()``: every ``(data, time, diff)``; ``consolidated()``: summed per
    ``(data, time)``; ``at(t)``: the collection's content at time ``t`` as ``{data: count}``;
    ``by_time()``: consolidated updates grouped by time.
    """

    def __init__(self, captured: Captured, le: Callable):
        self.captured = captured
        self._le = le

    def updates(self) -> List[Tuple[Any, Any, int]]:
        """Every ``(data, time, diff)`` in arrival order."""
        return [u for _, data in self.captured.messages for u in data]

    def changes_from(self, start: int) -> Tuple[List[Tuple[Any, Any, int]], int]:
        """The updates of messages ``start`` onwards, and the next position (for polling
        readers such as a driver session)."""
        messages = self.captured.messages
        return [u for _, data in messages[start:] for u in data], len(messages)

    def consolidated(self) -> List[Tuple[Any, Any, int]]:
        acc: Dict[Tuple[Any, Any], int] = {}
        for d, t, r in self.updates():
            acc[(d, t)] = acc.get((d, t), 0) + r
        out = [(d, t, r) for (d, t), r in acc.items() if r]
        try:
            out.sort(key=lambda u: (u[1], u[0]))
        except TypeError:
            out.sort(key=repr)
        return out

    def at(self, t: Any) -> Dict[Any, int]:
        le = self._le
        acc: Dict[Any, int] = {}
        for d, t1, r in self.updates():
            if le(t1, t):
                acc[d] = acc.get(d, 0) + r
        return {d: r for d, r in acc.items() if r}

    def by_time(self) -> Dict[Any, List[Tuple[Any, int]]]:
        out: Dict[Any, List[Tuple[Any, int]]] = {}
        for d, t, r in self.consolidated():
            out.setdefault(t, []).append((d, r))
        return out

    @property
    def frontier(self) -> List[Any]:
        return self.captured.frontier

    def done(self) -> bool:
        return self.captured.done()

    def less_than(self, t: Any) -> bool:
        return self.captured.less_than(t)
