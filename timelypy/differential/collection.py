"""The facades: collections (streams of updates), arranged collections, and loop variables.

A collection's content at time ``t`` is the sum of the diffs of all updates at times ``<= t``.
Linear operators (map, filter, flat_map, explode, join_function, negate, enter/leave time
changes) are *fused*: a chain of them runs as one operator pass over each batch (see
:mod:`.fusion`); the fused operator appears in the dataflow's structure as
``Linear[map>filter>...]``. The other methods wrap the streams of the operator modules
(:mod:`.arrange`, :mod:`.join`, :mod:`.reduce`, :mod:`.consolidate`, :mod:`.iterate`).
:class:`Collection` and :class:`Arranged` return each other, so they live in one module.
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Iterable,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
    runtime_checkable,
)

from ..dataflow.probe import ProbeHandle
from ..dataflow.scope import enter_time, leave_time
from ..dataflow.stream import Stream
from ..errors import TimelyError
from ..order import PathSummary
from . import join as joins
from .agent import TraceAgent
from .arrange import arrange_stream
from .captured import CapturedCollection
from .consolidate import consolidate_stream
from .consolidation import accumulate
from .fusion import ACCUMULABLE, fuse_updates
from .iterate import loop_variable
from .reduce import (
    Logic,
    count_logic,
    count_total,
    distinct_logic,
    is_product_order,
    reduce_product,
    reduce_stream,
    sum_logic,
    threshold_logic,
    threshold_product,
    threshold_total,
)
from .temporal import before, presence
from .trace import Batch, Spine, TraceView

if TYPE_CHECKING:
    from ..dataflow.feedback import LoopHandle
    from ..dataflow.scope import Scope

Joinable = Union["Collection", "Arranged"]
"""What joins take as their other side: a collection (arranged for the join) or an arrangement."""

__all__ = ["Arranged", "Collection", "FusesInspect", "Variable", "concatenate"]


@runtime_checkable
class FusesInspect(Protocol):
    """An operator that can call an ``inspect``'s function on its own output as it makes it
    (count / distinct / threshold at total times, join), so that :meth:`Collection.inspect`
    straight after it needs no operator of its own."""

    def fuse_inspect(self, f: Callable[[Any], Any]) -> bool:
        """Call ``f((record, time, diff))`` on every output update; False if an inspection is
        fused already (at most one is)."""
        ...


class Collection:
    """A changing multiset of records, as a stream of ``(data, time, diff)`` updates.

    Build collections with ``scope.new_collection()``; every method returns a new collection
    (or an :class:`Arranged`, a probe, or a capture).

    Example: ``session, words = scope.new_collection()`` in a dataflow, then
    ``words.map(len).count()``; the guide's Operators page runs every method.
    """

    __slots__ = ("scope", "_stream", "_base", "_stages")

    def __init__(
        self,
        scope: "Scope",
        stream: Optional[Stream] = None,
        *,
        base: Optional["Collection"] = None,
        stages: Optional[List] = None,
    ):
        self.scope = scope
        self._stream = stream
        self._base = base
        self._stages = stages or []

    # ------------------------------------------------------------------ plumbing
    @property
    def inner(self) -> Stream:
        """The timely stream of update batches (builds the fused linear operator if needed).

        Example: ``collection.inner.inspect(print)`` prints every ``(data, time, diff)`` (a
        timely ``Stream``)."""
        if self._stream is None:
            assert self._base is not None  # a collection has a stream or a base to fuse onto
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
        """Apply ``f`` to every record (counts of records made equal add up).

        Example: ``words.map(len)`` turns ``{"a": 1, "bb": 1, "cc": 1}`` into ``{1: 1, 2: 2}``."""
        return self._then("map", f)

    def filter(self, predicate: Callable[[Any], bool]) -> "Collection":
        """Keep the records satisfying ``predicate``.

        Example: ``numbers.filter(lambda x: x % 2 == 0)`` turns ``{1, 2, 3, 4}`` into
        ``{2, 4}``."""
        return self._then("filter", predicate)

    def flat_map(self, f: Callable[[Any], Iterable[Any]]) -> "Collection":
        """Replace each record by the records of ``f(record)``.

        Example: ``lines.flat_map(str.split)`` turns ``{"a rose is a rose"}`` into
        ``{"a": 2, "is": 1, "rose": 2}``."""
        return self._then("flat_map", f)

    def explode(self, f: Callable[[Any], Iterable[Tuple[Any, int]]]) -> "Collection":
        """Replace each record by ``(record2, diff2)`` pairs; diffs multiply.

        Example: ``pairs.explode(lambda kv: [kv])`` turns the record ``("a", 3)`` into ``"a"``
        with count 3."""
        return self._then("explode", f)

    def join_function(self, f: Callable[[Any], Iterable[Tuple[Any, Any, int]]]) -> "Collection":
        """The general linear operator: each record ``x`` becomes the updates ``f(x)`` of
        ``(record2, time2, diff2)``; output time is the lattice join of the times, diff the
        product (differential-dataflow's ``join_function``).

        Example: ``c.join_function(lambda x: [(x, 5, 1)])`` moves every record of time 0 to time
        5."""
        return self._then("join_function", f)

    def temporal_filter(
        self,
        lower: Optional[Callable[[Any], Any]] = None,
        upper: Optional[Callable[[Any], Any]] = None,
    ) -> "Collection":
        """Keep each record only while ``lower(record) <= time < upper(record)``.

        A record arriving at time ``t`` enters at ``max(t, lower)`` and leaves by itself at
        ``max(t, upper)`` (it never enters when ``upper <= max(t, lower)``). ``None`` (or a
        bound function returning ``None``) is no bound. In a nested scope the bounds are in
        the outer coordinate. Linear: fused with its neighbours; arrangements downstream
        compact the record away once the frontier passes ``upper`` (see ``docs/time.md``).

        Both ``None`` is ``self``. A bound that does not compare with the time fails the
        operator (an :class:`~timelypy.errors.OperatorError` naming the record, the bound and
        the time).

        Example: ``events.temporal_filter(lambda e: e.start, lambda e: e.end)`` holds each
        event during its interval; ``c.temporal_filter(upper=lambda r: r.time + 60)`` keeps
        the last 60 time units of ``c``."""
        if lower is None and upper is None:
            return self
        return self._then("temporal", presence(lower, upper))

    def freeze_at(self, cutoff: Callable[[Any], Any]) -> "Collection":
        """Drop the updates of each record at times from ``cutoff(record)`` on (``None``: no
        cutoff): the record's count stops changing there, whatever happens upstream later.

        Used after an aggregation whose inputs a :meth:`temporal_filter` retracts once they
        can no longer change (a closed window): the result stays, the state upstream
        compacts away. ``c.concat(c.freeze_at(f).negate())`` is the complement: only the
        updates at or after the cutoff (late data). Linear, fused with its neighbours.

        Example: ``windowed.count().freeze_at(lambda wk: wk[0][0].end + 1)`` keeps each
        window's count as it was when the window closed."""
        return self._then("temporal", before(cutoff))

    def negate(self) -> "Collection":
        """Every diff negated.

        Example: ``a.concat(b.negate())`` is ``a - b``: ``{1, 2} - {2, 3}`` is
        ``{1: 1, 3: -1}``."""
        return self._then("negate", None)

    def inspect(self, f: Callable[[Tuple[Any, Any, int]], Any]) -> "Collection":
        """Call ``f((data, time, diff))`` for every update; pass the collection through.

        The inspection is built at once (it ends the current fused chain), so it runs even when
        nothing is connected downstream.

        Example: ``counts.inspect(print)`` prints ``(('a', 2), 0, 1)`` and every later update.
        """
        if self._stream is not None:
            # Straight after count / distinct / threshold at total times, or a join: the
            # operator calls ``f`` on each update as it sends it (no operator in between).
            port = self._stream.port
            op = self.scope.subgraph.children[port.node]
            if isinstance(op, FusesInspect) and op.fuse_inspect(f):
                return Collection(self.scope, self._stream)
        return Collection(self.scope, self._then("inspect", f).inner)

    def map_times(self, f: Callable[[Any], Any]) -> "Collection":
        """Apply ``f`` to every update's time (``f`` must not move times backwards).

        Example: ``c.map_times(lambda t: t + 1)`` delays every update by one time."""
        return self._then("time", f)

    def results_in(self, summary: PathSummary) -> "Collection":
        """Advance every update's time by a path summary, dropping those that overflow.

        Example: ``c.results_in(tp.IntSummary(1))`` delays every update by one time."""
        return self._then("results_in", summary.results_in)

    def concat(self, *others: "Collection") -> "Collection":
        """The sum of this collection and ``others``.

        Example: ``a.concat(b)`` with ``a = {1, 2}`` and ``b = {2, 3}`` is
        ``{1: 1, 2: 2, 3: 1}``."""
        if not others:
            return self
        return Collection(self.scope, self.inner.concat(*[o.inner for o in others]))

    def concatenate(self, others: Iterable["Collection"]) -> "Collection":
        """The sum of this collection and every collection of ``others``.

        Example: ``a.concatenate([b, c])`` is ``a.concat(b, c)``."""
        return self.concat(*list(others))

    def consolidate(self, name: str = "Consolidate") -> "Collection":
        """The same collection with at most one update per ``(data, time)`` (and none that
        sum to zero), emitted once each time is complete.

        Example: ``a.concat(a.negate()).consolidate()`` emits nothing: every update cancels."""
        return Collection(self.scope, consolidate_stream(self.inner, name))

    # ------------------------------------------------------------------ scopes
    def enter(self, child: "Scope") -> "Collection":
        """This collection inside the nested scope ``child`` (unchanging across iterations).

        Example: in ``roots.iterate(body)``, ``body(reached)`` uses
        ``edges.enter(reached.scope)``."""
        return Collection(child, self.inner.enter(child)).map_times(enter_time)

    def leave(self) -> "Collection":
        """This collection in the parent scope, accumulating every iteration.

        Example: ``scope.iterative(lambda child: body(roots.enter(child)).leave())``."""
        parent = self.scope.parent
        if parent is None:
            raise TimelyError("leave: the collection is in a root scope")
        return Collection(parent, self.map_times(leave_time).inner.leave())

    def iterate(
        self,
        body: Callable[["Collection"], "Collection"],
        max_iterations: Optional[int] = None,
        name: str = "Iterate",
    ) -> "Collection":
        """The fixed point of ``body`` starting from this collection.

        ``body`` receives the loop variable (a collection in a nested scope) and returns the
        next iterate; bring outer collections in with ``outer.enter(variable.scope)``. The body
        must consolidate (reduce, distinct, consolidate...) or cancelling updates may circulate.
        ``max_iterations`` bounds the loop: exceeding it raises
        :class:`~timelypy.errors.NotConvergedError`.

        Example: ``roots.iterate(lambda r: r.map(lambda n: (n,
        n)).join_map(edges.enter(r.scope), lambda n, _, m: m).concat(r).distinct())`` is every
        node reachable from ``roots``.
        """

        def inner(child):
            var = Variable.new_from(self.enter(child), max_iterations=max_iterations)
            result = body(var)
            if not isinstance(result, Collection) or result.scope.subgraph is not child.subgraph:
                raise TimelyError("iterate: the body must return a collection of the loop's scope")
            var.set(result)
            return result.leave()

        return self.scope.iterative(inner, name)

    # ------------------------------------------------------------------ arranged
    def arrange_by_key(self, name: Optional[str] = None) -> "Arranged":
        """Index ``(key, val)`` records by key into a shared trace.

        Example: ``by_src = edges.arrange_by_key()``; ``by_src.semijoin(queries)`` and
        ``queries.join_core(by_src, logic)`` then share one index."""
        return self._arrange(False, name or "ArrangeByKey")

    def arrange_by_self(self, name: Optional[str] = None) -> "Arranged":
        """Index records by themselves (keys with no values).

        Example: ``seen = nodes.arrange_by_self()``; ``edges.semijoin(seen)`` reuses it."""
        return self._arrange(True, name or "ArrangeBySelf")

    def _arrange(
        self, by_self: bool, name: str, keep_trace: bool = True, columns: Optional[bool] = None
    ) -> "Arranged":
        stream, spine = arrange_stream(self.inner, self.scope, name, by_self, keep_trace, columns)
        return Arranged(self.scope, stream, spine, by_self=by_self)

    def join(self, other: "Collection") -> "Collection":
        """``(key, (v1, v2))`` for matching ``(key, v1)`` and ``(key, v2)``; counts multiply.

        Example: ``likes.join(lives)``: ``("ann", "tea")`` and ``("ann", "paris")`` give
        ``("ann", ("tea", "paris"))``."""
        return _arranged(self).join(_arranged(other))

    def join_map(self, other: "Collection", f: Callable[[Any, Any, Any], Any]) -> "Collection":
        """``f(key, v1, v2)`` for every matching pair.

        Example: ``likes.join_map(lives, lambda who, what, where: (where, what))`` gives
        ``("paris", "tea")``."""
        return _arranged(self).join_map(_arranged(other), f)

    def join_core(
        self, other: Joinable, logic: Callable[[Any, Any, Any], Iterable[Any]]
    ) -> "Collection":
        """The records of the iterable ``logic(key, v1, v2)`` for every matching pair.

        Example: ``queries.join_core(by_src, lambda q, _, dst: [(q, dst)])`` with ``by_src`` an
        arrangement of ``(src, dst)`` edges."""
        return _arranged(self).join_core(_arranged(other), logic)

    def semijoin(self, keys: Joinable) -> "Collection":
        """The ``(key, val)`` records whose key is in ``keys`` (counts multiply).

        Example: ``likes.semijoin(names)`` with ``names = {"ann"}`` keeps ``("ann", "tea")``,
        drops ``("bob", "coffee")``."""
        return _arranged(self).semijoin(keys)

    def antijoin(self, keys: Joinable) -> "Collection":
        """The ``(key, val)`` records whose key is not in ``keys`` (``keys`` should be a set).

        Example: ``likes.antijoin(names)`` with ``names = {"ann"}`` keeps only
        ``("bob", "coffee")``."""
        return self.concat(self.semijoin(keys).negate())

    def reduce(self, logic: Logic, name: str = "Reduce") -> "Collection":
        """Per key, ``logic(key, [(val, count), ...])`` (sorted by value, counts non-zero)
        returns ``[(out_val, count), ...]``; the result holds ``(key, out_val)``.

        Example: ``prices.reduce(lambda key, vals: [(vals[0][0], 1)])`` (the least value per
        key) turns ``{("tea", 3), ("tea", 2)}`` into ``{("tea", 2)}``."""
        if is_product_order(self.scope.order):  # no arrangement: see reduce_product
            return Collection(self.scope, reduce_product(self.inner, logic, name))
        columns = True if logic is sum_logic else None  # the reduce reads its column batches
        return self._arrange(False, "ArrangeByKey", False, columns).reduce(logic, name)

    def count(self) -> "Collection":
        """``(record, count)`` for every record with a non-zero count.

        Example: ``words.count()`` turns ``{"a": 2, "is": 1}`` into ``{("a", 2), ("is", 1)}``."""
        if self.scope.order.is_total:
            return self.count_total()
        return self._private_by_self().reduce(count_logic, "Count").map(_unwrap_key_value)

    def count_total(self) -> "Collection":
        """``count`` for totally ordered times: O(1) per update (no interesting times).

        Example: ``words.count_total()`` is what ``words.count()`` runs for ``int`` times.

        On one worker, a pending chain of time-preserving linear operators (``lines.flat_map(
        str.split).count()``) runs inside the count (``Linear[flat_map]>CountTotal``): each
        record goes straight into the sums, with no update per record in between."""
        stages = self._stages
        if (
            self._base is not None
            and self._stream is None
            and stages
            and self.scope.worker.peers == 1
            and all(kind in ACCUMULABLE for kind, _ in stages)
        ):
            names = ">".join(kind for kind, _ in stages)
            return Collection(
                self.scope,
                count_total(self._base.inner, f"Linear[{names}]>CountTotal", list(stages)),
            )
        return Collection(self.scope, count_total(self.inner, "CountTotal"))

    def sum(self) -> "Collection":
        """``(key, total)`` where ``total`` sums ``value * count`` over the key's values.

        Example: ``prices.sum()`` turns ``{("tea", 3), ("tea", 2)}`` into ``{("tea", 5)}``."""
        return self.reduce(sum_logic, "Sum")

    def distinct(self) -> "Collection":
        """Each record with a positive count, once (records with non-positive counts
        vanish).

        Example: ``numbers.distinct()`` turns ``{1: 2, 2: 1, 3: -1}`` into ``{1: 1, 2: 1}``."""
        if self.scope.order.is_total:
            return self.distinct_total()
        if is_product_order(self.scope.order):  # no arrangement: see threshold_product
            return Collection(self.scope, threshold_product(self.inner, None, "Distinct"))
        return self._private_by_self().reduce(distinct_logic, "Distinct").map(_first)

    def distinct_total(self) -> "Collection":
        """``distinct`` for totally ordered times: O(1) per update.

        Example: ``numbers.distinct_total()`` is what ``numbers.distinct()`` runs for ``int``
        times."""
        return Collection(self.scope, threshold_total(self.inner, None, "DistinctTotal"))

    def threshold(self, f: Callable[[Any, int], int]) -> "Collection":
        """Each record with count ``f(record, count)`` (``f`` is called for non-zero counts).

        Example: ``numbers.threshold(lambda x, n: 1 if n >= 2 else 0)`` turns ``{1: 2, 2: 1}``
        into ``{1: 1}``."""
        if self.scope.order.is_total:
            return self.threshold_total(f)
        if is_product_order(self.scope.order):
            return Collection(self.scope, threshold_product(self.inner, f, "Threshold"))
        return self._private_by_self().reduce(threshold_logic(f), "Threshold").map(_first)

    def threshold_total(
        self, f: Callable[[Any, int], int], name: str = "ThresholdTotal"
    ) -> "Collection":
        """``threshold`` for totally ordered times: O(1) per update.

        Example: ``numbers.threshold_total(lambda x, n: min(n, 1))`` for ``int`` times."""
        return Collection(self.scope, threshold_total(self.inner, f, name))

    def _private_by_self(self) -> "Arranged":
        return self._arrange(True, "ArrangeBySelf", keep_trace=False)

    # ------------------------------------------------------------------ observing
    def probe(self) -> ProbeHandle:
        """A probe on this collection's frontier.

        Example: ``probe = counts.probe()`` in the dataflow, then
        ``worker.step_until(probe, t)``."""
        return self.inner.probe()

    def probe_with(self, handle: ProbeHandle) -> "Collection":
        """Let ``handle`` also watch this collection's frontier; returns the collection.

        Example: ``probe = tp.ProbeHandle()``, ``a.probe_with(probe)``, ``b.probe_with(probe)``:
        one probe watches both."""
        self.inner.probe_with(handle)
        return self

    def capture(self) -> CapturedCollection:
        """Record every update (see :class:`~.captured.CapturedCollection`).

        Example: ``out = counts.capture()``; after running, ``out.consolidated()``,
        ``out.at(t)`` or ``out.by_time()``."""
        return CapturedCollection(self.inner.capture(), self.scope.order.le)

    def exchange(self, key_fn: Callable[[Any], Any]) -> "Collection":
        """Move every record to the worker owning ``key_fn(record)``.

        Example: ``pairs.exchange(lambda kv: kv[0])`` gathers each key's records on one worker."""
        return Collection(self.scope, self.inner.exchange(lambda u: key_fn(u[0])))

    def __repr__(self) -> str:
        return f"Collection({self.scope.name})"


def concatenate(collections: Sequence[Collection]) -> Collection:
    """The sum of several collections of one scope.

    Example: ``tp.concatenate([a, b, c])`` is ``a.concat(b, c)``."""
    first, *rest = collections
    return first.concat(*rest)


class Variable(Collection):
    """A collection in an iterative scope whose next iterate is given later by :meth:`set`.

    ``Variable.new_from(source)`` starts at ``source`` (the feedback carries
    ``result - source``, so at iteration ``i+1`` the variable equals ``result_i``).
    ``Variable.new(scope)`` starts empty (for mutual recursion).

    Example: ``reached = tp.Variable.new_from(roots.enter(child))`` inside
    ``scope.iterative(loop)``, then ``reached.set(step)`` and ``step.leave()``.
    """

    __slots__ = ("_handle", "_source", "_summary", "_set")
    _handle: "LoopHandle"
    _source: Optional[Collection]
    _summary: PathSummary
    _set: bool

    @classmethod
    def new(
        cls,
        scope: "Scope",
        max_iterations: Optional[int] = None,
        summary: Optional[PathSummary] = None,
    ) -> "Variable":
        """An empty variable in the iterative ``scope``.

        Example: ``v = tp.Variable.new(child)`` in ``scope.iterative(loop)``; later
        ``v.set(next_value)``."""
        return cls._make(scope, None, max_iterations, summary)

    @classmethod
    def new_from(
        cls,
        source: Collection,
        max_iterations: Optional[int] = None,
        summary: Optional[PathSummary] = None,
    ) -> "Variable":
        """A variable starting at ``source`` (a collection of the iterative scope).

        Example: ``reached = tp.Variable.new_from(roots.enter(child))``."""
        return cls._make(source.scope, source, max_iterations, summary)

    @classmethod
    def _make(
        cls,
        scope: "Scope",
        source: Optional[Collection],
        max_iterations: Optional[int],
        summary: Optional[PathSummary],
    ) -> "Variable":
        handle, stream, summary = loop_variable(scope, max_iterations, summary)
        fed_back = Collection(scope, stream)
        collection = fed_back if source is None else fed_back.concat(source)
        var = cls(scope, collection.inner)
        var._handle = handle
        var._source = source
        var._summary = summary
        var._set = False
        return var

    def set(self, result: Collection) -> Collection:
        """Define the next iterate as ``result``; returns ``result``.

        Example: ``reached.set(reached.concat(next_hops).distinct())``."""
        if self._set:
            raise TimelyError("Variable.set called twice")
        self._set = True
        fed = result if self._source is None else result.concat(self._source.negate())
        fed.results_in(self._summary).inner.connect_loop(self._handle)
        return result


class Arranged:
    """An arranged collection: ``stream`` of batches plus a ``view`` of the shared spine.

    Filtering (:meth:`filter`) and entering a nested scope (:meth:`enter`) wrap the view, so
    wrappers never build a new index.

    Example: ``by_src = edges.arrange_by_key()``; ``by_src.lookup(2)``,
    ``by_src.semijoin(queries)``.
    """

    def __init__(
        self,
        scope: "Scope",
        stream: Stream,
        spine: Spine,
        *,
        by_self: bool = False,
        view: Optional[TraceView] = None,
    ):
        self.scope = scope
        self.stream = stream
        self.view = TraceView(spine) if view is None else view
        self.by_self = by_self

    @property
    def spine(self) -> Spine:
        """The shared trace.

        Example: ``arranged.spine.get(2)`` is ``[(3, 0, 1), (4, 0, 1)]`` for edges ``(2, 3)``
        and ``(2, 4)`` at time 0."""
        return self.view.spine

    def lookup(self, key: Any) -> dict:
        """The values of ``key`` accumulated over every time in the trace, with their non-zero
        counts (an interactive query, as in the book's "interactive queries").

        Example: ``by_src.lookup(2)`` is ``{3: 1, 4: 1}`` for edges ``(2, 3)`` and ``(2, 4)``."""
        return accumulate((v, r) for v, _t, r in self.spine.get(key))

    # ------------------------------------------------------------------ sharing
    @property
    def trace(self) -> TraceAgent:
        """A new reader handle on the trace (it holds back compaction until advanced/closed);
        ``handle.import_(scope)`` brings the trace into another dataflow.

        Example: ``trace = by_src.trace``; a later
        ``worker.dataflow(lambda scope: trace.import_(scope).as_collection().capture())``."""
        return TraceAgent(self.spine, through_seq=float("inf"), explicit=True, importer=_imported)

    def filter(self, pred: Callable[[Any, Any], bool]) -> "Arranged":
        """The same arrangement seen through ``pred(key, val)`` (no new index).

        Example: ``by_src.filter(lambda src, dst: src == dst)`` reads only the self-loops."""
        return Arranged(
            self.scope, self.stream, self.spine, by_self=self.by_self, view=self.view.filter(pred)
        )

    def enter(self, child: "Scope") -> "Arranged":
        """The arrangement inside the nested scope ``child``, times read as ``Product(t, 0)``.

        Example: ``by_src.enter(child)`` in ``scope.iterative(loop)``: the edges at every
        iteration."""
        return Arranged(
            child,
            self.stream.enter(child),
            self.spine,
            by_self=self.by_self,
            view=self.view.enter(),
        )

    def read_batch(self, batch: Batch) -> Iterable[Tuple[Any, List[Tuple[Any, Any, int]]]]:
        """``(key, [(val, time, diff)])`` of ``batch`` through this view's wrappers.

        Example: ``for key, vals in arranged.read_batch(batch):`` in an operator reading
        ``arranged.stream``."""
        return self.view.read_batch(batch)

    # ------------------------------------------------------------------ operators
    def as_collection(self, f: Optional[Callable[[Any, Any], Any]] = None) -> Collection:
        """The arranged updates as a collection; ``f(key, val)`` makes each record (default
        ``(key, val)``, or ``key`` for an arrangement by self).

        Example: ``by_src.as_collection(lambda src, dst: dst)`` is the collection of
        destinations."""
        read = self.view.read_batch
        if f is None:
            f = _key_only if self.by_self else _key_value

        def flatten(batches):
            out = []
            for b in batches:
                for k, vals in read(b):
                    for v, t, r in vals:
                        out.append((f(k, v), t, r))
            return out

        return Collection(self.scope, self.stream.map_batch(flatten, name="AsCollection"))

    def _join(
        self,
        other: Joinable,
        product: joins.JoinProduct,
        logic: Optional[Callable],
        name: str,
        by_self: bool = False,
    ) -> Collection:
        if not isinstance(other, Arranged):
            other = _arranged(other, by_self)
        stream = joins.join_streams(
            (self.stream, self.view), (other.stream, other.view), product, logic, name
        )
        return Collection(self.scope, stream)

    def join_core(
        self,
        other: "Arranged",
        logic: Callable[[Any, Any, Any], Iterable[Any]],
        name: str = "JoinCore",
    ) -> Collection:
        """For every pair of matching keys, the records ``logic(key, val1, val2)`` (an
        iterable) at the join of the two times with the product of the diffs.

        Example: ``by_dst.join_core(by_src, lambda mid, src, dst: [(src, dst)])`` is the two-hop
        pairs."""
        return self._join(other, joins.core, logic, name)

    def join_map(
        self, other: "Arranged", f: Callable[[Any, Any, Any], Any], name: str = "JoinMap"
    ) -> Collection:
        """``f(key, val1, val2)`` for every pair of matching keys.

        Example:
        ``likes_by_name.join_map(lives_by_name, lambda who, what, where: (where, what))`` gives
        ``("paris", "tea")``."""
        return self._join(other, joins.mapped, f, name)

    def join(self, other: "Arranged", name: str = "Join") -> Collection:
        """``(key, (val1, val2))`` for every pair of matching keys.

        Example: ``likes_by_name.join(lives_by_name)`` gives ``("ann", ("tea", "paris"))``."""
        return self._join(other, joins.pairs, None, name)

    def semijoin(self, keys: Joinable, name: str = "Semijoin") -> Collection:
        """The ``(key, val)`` records whose key is in ``keys`` (a collection or arrangement by
        self), with multiplicities multiplied.

        Example: ``by_src.semijoin(queries)`` is the ``(src, dst)`` edges of the queried
        sources."""
        return self._join(keys, joins.semijoin_pairs, None, name, by_self=True)

    def reduce(self, logic: Logic, name: str = "Reduce") -> Collection:
        """Per key: ``logic(key, [(val, count)])`` returns ``[(out_val, count)]``; the output
        collection holds ``(key, out_val)`` with those counts at every time.

        Example: ``by_src.reduce(lambda src, dsts: [(len(dsts), 1)])`` is ``(src, out-degree)``."""
        return Collection(self.scope, reduce_stream(self.stream, self.view, logic, name))

    def __repr__(self) -> str:
        return f"Arranged({self.spine.name!r}, scope={self.scope.name})"


def _imported(scope: "Scope", stream: Stream, spine: Spine) -> Arranged:
    """The arrangement a trace handle imports into ``scope``."""
    return Arranged(scope, stream, spine)


def _arranged(c: Joinable, by_self: bool = False) -> Arranged:
    """``c`` itself if arranged, else a new arrangement of it private to the operator that asks
    (no :class:`Arranged` is handed out, so its trace can be let go with that reader)."""
    if isinstance(c, Arranged):
        return c
    arranged = c.arrange_by_self() if by_self else c.arrange_by_key()
    arranged.spine.private = True
    return arranged


def _first(kv: Tuple[Any, Any]) -> Any:
    return kv[0]


def _unwrap_key_value(kv: Tuple[Any, Any]) -> Tuple[Any, Any]:
    return (kv[0], kv[1])


def _key_only(k: Any, v: Any) -> Any:
    return k


def _key_value(k: Any, v: Any) -> Tuple[Any, Any]:
    return (k, v)
