"""Arrangements: a collection indexed by key into a shared trace, and the operators reading it.

``arrange_by_key`` exchanges updates ``((key, val), time, diff)`` by key, batches them as the
input frontier advances, inserts each batch into a :class:`~.trace.Spine` and sends it
downstream. :class:`Arranged` is the pair (stream of batches, trace): joins, semijoins and
reductions read it instead of building their own indexes, and several of them can share it.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ..dataflow.capability import CapabilitySet
from ..dataflow.channels import Exchange
from ..dataflow.operator import OperatorCore
from ..errors import unhashable_error
from ..dataflow.stream import Stream
from ..errors import TimelyError
from ..progress.frontier import Antichain
from .trace import Batch, Spine, TraceHandle

__all__ = ["Arranged", "ArrangeOperator", "ImportOperator", "arrange", "import_trace", "wrap_items"]


def _key_of_update(u):
    return u[0][0]


class ArrangeOperator(OperatorCore):
    """Turns a stream of ``((key, val), time, diff)`` into batches in a trace.

    Holds one capability per minimal pending time; when the input frontier passes a
    capability, the updates it covers are consolidated into a batch, inserted into the spine,
    and sent at that capability.
    """

    def __init__(self, scope: Any, name: str, keep_trace: bool = True):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        self.spine = Spine(self.order, name)
        # An arrangement private to one reducer that keeps its own state only batches updates:
        # storing a trace nobody reads would be wasted work.
        self.keep_trace = keep_trace
        self._pending: List[Tuple[Any, Any, int]] = []
        self._caps = CapabilitySet(self.order.le)
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._out = self.output_ports[0]

    def schedule(self) -> bool:
        changed = self._apply_frontiers()
        q = self._queue
        if q:
            consumed = self._consumed
            pending = self._pending
            caps = self._caps
            internal = self.shared.internals[0]
            while q:
                time, data = q.popleft()
                consumed.update(time, len(data))
                caps.retain(time, internal, 0, self.name)
                pending.extend(data)
        if changed:
            try:
                self._seal()
            except TypeError as exc:
                raise unhashable_error(self, (u[0] for u in self._pending)) from exc
        return False

    def _seal(self) -> None:
        frontier = list(self.input_frontiers[0].frontier)
        caps = self._caps
        if self.order.is_total and len(caps.caps) == 1:
            self._seal_total(frontier, caps.caps[0])
            return
        le = self.order.le
        spine = self.spine

        beyond = self.input_frontiers[0].less_equal  # t is at or beyond the input frontier

        ready_caps = sorted((c for c in caps if not beyond(c.time)), key=lambda c: c.time)
        if not ready_caps:
            if frontier != spine.upper:
                spine.seal(frontier)
            spine.advance_writer(frontier)
            return
        remaining = self._pending
        for i, cap in enumerate(ready_caps):
            upper = Antichain(frontier, le=le)
            for later in ready_caps[i + 1:]:
                upper.insert(later.time)
            upper_elems = list(upper)
            ready: Dict[Any, Dict[Tuple[Any, Any], int]] = {}
            keep = []
            if self.order.is_total and len(upper_elems) == 1:
                u0 = upper_elems[0]
                for upd in remaining:
                    t = upd[1]
                    if t < u0:
                        (k, v), _, r = upd
                        d = ready.get(k)
                        if d is None:
                            ready[k] = d = {}
                        vt = (v, t)
                        d[vt] = d.get(vt, 0) + r
                    else:
                        keep.append(upd)
            else:
                for upd in remaining:
                    t = upd[1]
                    if not any(le(u, t) for u in upper_elems):
                        (k, v), _, r = upd
                        d = ready.get(k)
                        if d is None:
                            ready[k] = d = {}
                        vt = (v, t)
                        d[vt] = d.get(vt, 0) + r
                    else:
                        keep.append(upd)
            remaining = keep
            data: Dict[Any, List[Tuple[Any, Any, int]]] = {}
            count = 0
            for k, d in ready.items():
                vals = [(v, t, r) for (v, t), r in d.items() if r]
                if vals:
                    data[k] = vals
                    count += len(vals)
            self._emit(data, upper_elems, count, cap.time)
        self._pending = remaining
        # Hold capabilities only for the minimal times still pending.
        pending_frontier = Antichain(le=le)
        for upd in remaining:
            pending_frontier.insert(upd[1])
        caps.downgrade(list(pending_frontier))
        spine.advance_writer(frontier)


    def _emit(self, data: Dict[Any, List[Tuple[Any, Any, int]]], upper: List[Any], count: int,
              time: Any) -> None:
        """Make the next batch (into the trace, unless private), send it at ``time``."""
        spine = self.spine
        if self.keep_trace:
            batch = spine.new_batch(data, upper, count)
        else:
            spine.seq += 1
            batch = Batch(data, spine.upper, upper, spine.seq, count)
            spine.upper = upper
        if count:
            self._out.push(time, [batch])

    def _seal_total(self, frontier: List[Any], cap: Any) -> None:
        """The common case: totally ordered times and one held capability."""
        spine = self.spine
        f = frontier[0] if frontier else None
        if f is not None and cap.time >= f:
            if frontier != spine.upper:
                spine.seal(frontier)
            spine.advance_writer(frontier)
            return
        # Group by key first; consolidate only the keys that received several updates.
        data: Dict[Any, List[Tuple[Any, Any, int]]] = {}
        keep = []
        get = data.get
        for upd in self._pending:
            kv, t, r = upd
            if f is None or t < f:
                lst = get(kv[0])
                if lst is None:
                    data[kv[0]] = [(kv[1], t, r)]
                else:
                    lst.append((kv[1], t, r))
            else:
                keep.append(upd)
        count = 0
        for k, lst in list(data.items()):
            if len(lst) > 1:
                acc: Dict[Tuple[Any, Any], int] = {}
                for v, t, r in lst:
                    vt = (v, t)
                    acc[vt] = acc.get(vt, 0) + r
                lst = [(v, t, r) for (v, t), r in acc.items() if r]
                if not lst:
                    del data[k]
                    continue
                data[k] = lst
            count += len(lst)
        self._emit(data, frontier, count, cap.time)
        self._pending = keep
        if keep:
            m = min(u[1] for u in keep)
            if m != cap.time:
                cap.downgrade(m)
        else:
            cap.drop()
            self._caps.caps = []
        spine.advance_writer(frontier)


class Arranged:
    """An arranged collection: ``stream`` of batches plus the shared ``spine``.

    ``pred`` (a filter wrapper) and ``time_map`` (an ``enter`` wrapper) apply to every read,
    so wrappers never build a new index.
    """

    def __init__(self, scope: Any, stream: Stream, spine: Spine, *, by_self: bool = False,
                 pred: Optional[Callable] = None, time_map: Optional[Callable] = None,
                 frontier_unmap: Optional[Callable] = None):
        self.scope = scope
        self.stream = stream
        self.spine = spine
        self.by_self = by_self
        self.pred = pred
        self.time_map = time_map
        self.frontier_unmap = frontier_unmap

    def lookup(self, key: Any) -> Dict[Any, int]:
        """The values of ``key`` accumulated over every time in the trace, with their non-zero
        counts (an interactive query, as in the book's "interactive queries")."""
        acc: Dict[Any, int] = {}
        for v, _t, r in self.spine.get(key):
            acc[v] = acc.get(v, 0) + r
        return {v: r for v, r in acc.items() if r}

    # ------------------------------------------------------------------ sharing
    @property
    def trace(self) -> TraceHandle:
        """A new reader handle on the trace (it holds back compaction until advanced/closed)."""
        return self.spine.handle(through_seq=float("inf"), explicit=True)

    def filter(self, pred: Callable[[Any, Any], bool]) -> "Arranged":
        """The same arrangement seen through ``pred(key, val)`` (no new index)."""
        old = self.pred
        new_pred = pred if old is None else (lambda k, v: old(k, v) and pred(k, v))
        return Arranged(self.scope, self.stream, self.spine, by_self=self.by_self, pred=new_pred,
                        time_map=self.time_map, frontier_unmap=self.frontier_unmap)

    def enter(self, child: Any) -> "Arranged":
        """The arrangement inside the nested scope ``child``, times read as ``Product(t, 0)``."""
        from ..order import Product

        inner_stream = self.stream.enter(child)
        old_map, old_unmap = self.time_map, self.frontier_unmap
        if old_map is None:
            time_map = lambda t: Product(t, 0)  # noqa: E731
            unmap = lambda t: t[0]  # noqa: E731
        else:
            time_map = lambda t: Product(old_map(t), 0)  # noqa: E731
            unmap = lambda t: old_unmap(t[0])  # noqa: E731
        return Arranged(child, inner_stream, self.spine, by_self=self.by_self, pred=self.pred,
                        time_map=time_map, frontier_unmap=unmap)

    def read_batch(self, batch: Batch) -> Iterable[Tuple[Any, List[Tuple[Any, Any, int]]]]:
        """``(key, [(val, time, diff)])`` of ``batch`` through this view's wrappers."""
        pred, tm = self.pred, self.time_map
        if pred is None and tm is None:
            return batch.data.items()
        return wrap_items(batch.data.items(), pred, tm)

    # ------------------------------------------------------------------ operators
    def as_collection(self, f: Optional[Callable[[Any, Any], Any]] = None) -> Any:
        """The arranged updates as a collection; ``f(key, val)`` makes each record (default
        ``(key, val)``, or ``key`` for an arrangement by self)."""
        from .collection import Collection

        view = self
        if f is None:
            f = (lambda k, v: k) if self.by_self else (lambda k, v: (k, v))

        def flatten(batches):
            out = []
            for b in batches:
                for k, vals in view.read_batch(b):
                    for v, t, r in vals:
                        out.append((f(k, v), t, r))
            return out

        return Collection(self.scope, self.stream.map_batch(flatten, name="AsCollection"))

    def join_core(self, other: "Arranged", logic: Callable[[Any, Any, Any], Iterable[Any]],
                  name: str = "JoinCore") -> Any:
        """For every pair of matching keys, the records ``logic(key, val1, val2)`` (an
        iterable) at the join of the two times with the product of the diffs."""
        from .join import join_arranged

        return join_arranged(self, other, "core", logic, name)

    def join_map(self, other: "Arranged", f: Callable[[Any, Any, Any], Any],
                 name: str = "JoinMap") -> Any:
        from .join import join_arranged

        return join_arranged(self, other, "map", f, name)

    def join(self, other: "Arranged", name: str = "Join") -> Any:
        from .join import join_arranged

        return join_arranged(self, other, "join", None, name)

    def semijoin(self, keys: Any, name: str = "Semijoin") -> Any:
        """The ``(key, val)`` records whose key is in ``keys`` (a collection or arrangement by
        self), with multiplicities multiplied."""
        from .join import join_arranged

        if not isinstance(keys, Arranged):
            keys = keys.arrange_by_self()
        return join_arranged(self, keys, "semijoin", None, name)

    def reduce(self, logic: Callable[[Any, List[Tuple[Any, int]]], List[Tuple[Any, int]]],
               name: str = "Reduce") -> Any:
        """Per key: ``logic(key, [(val, count)])`` returns ``[(out_val, count)]``; the output
        collection holds ``(key, out_val)`` with those counts at every time."""
        from .reduce import reduce_arranged

        return reduce_arranged(self, logic, name)


def wrap_items(items, pred, tm):
    """``(key, vals)`` pairs seen through a filter (``pred``) and a time map (``tm``)."""
    for k, vals in items:
        if pred is not None:
            vals = [(v, t, r) for v, t, r in vals if pred(k, v)]
            if not vals:
                continue
        if tm is not None:
            vals = [(v, tm(t), r) for v, t, r in vals]
        yield k, vals


def arrange(collection: Any, by_self: bool = False, name: Optional[str] = None,
            keep_trace: bool = True) -> Arranged:
    """Arrange ``collection`` (of ``(key, val)``, or of keys when ``by_self``).

    ``keep_trace=False`` makes a batcher only, for an arrangement private to an operator that
    keeps its own state (reduce, count, distinct, threshold on a collection).
    """
    scope = collection.scope
    name = name or ("ArrangeBySelf" if by_self else "ArrangeByKey")
    updates = collection.inner
    if by_self:
        updates = updates.map_batch(lambda data: [((d, ()), t, r) for d, t, r in data],
                                    name="AsKeys")
    op = ArrangeOperator(scope, name, keep_trace)
    updates.connect_to(op, 0, Exchange(_key_of_update))
    return Arranged(scope, Stream(scope, op.output_ports[0]), op.spine, by_self=by_self)


class _ImportListener:
    def __init__(self, op: "ImportOperator"):
        self.op = op

    def notify(self, batch: Batch) -> None:
        self.op.queue.append(("batch", batch))
        self.op.queue.append(("upper", list(batch.upper)))
        self.op.wake()

    def notify_upper(self, upper: List[Any]) -> None:
        self.op.queue.append(("upper", list(upper)))
        self.op.wake()


class ImportOperator(OperatorCore):
    """Replays a trace from another dataflow: a snapshot of its current contents, then every
    new batch, downgrading its capability as the trace's upper frontier advances."""

    def __init__(self, scope: Any, handle: TraceHandle, name: str):
        super().__init__(scope, name, 0, 1)
        from ..dataflow.capability import Capability

        self.handle = handle
        spine = handle.spine
        self.queue: List[Tuple[str, Any]] = []
        self.cap = Capability(self.order.minimum, self.shared.internals[0], self.order.le, 0,
                              name, record=False)
        snapshot: Dict[Any, List[Tuple[Any, Any, int]]] = {}
        for b in spine.batches:
            for k, vals in b.data.items():
                snapshot.setdefault(k, []).extend(vals)
        if snapshot:
            self.queue.append(("batch", Batch(snapshot, [self.order.minimum], list(spine.upper),
                                              spine.seq)))
        self.queue.append(("upper", list(spine.upper)))
        self.listener = _ImportListener(self)
        spine.listeners.append(self.listener)

    def wake(self) -> None:
        self.activate()
        if self.subgraph.parent is not None:
            self.subgraph.wake()

    def schedule(self) -> bool:
        cap = self.cap
        out = self.output_ports[0]
        for kind, item in self.queue:
            if not cap.valid:
                break
            if kind == "batch":
                if item.count:
                    out.push(cap.time, [item])
            else:
                if not item:
                    cap.drop()
                else:
                    t = item[0]
                    for u in item[1:]:
                        t = self.order.meet(t, u)
                    if self.order.le(cap.time, t):
                        cap.downgrade(t)
        self.queue = []
        if not cap.valid and self.listener in self.handle.spine.listeners:
            self.handle.spine.listeners.remove(self.listener)
        return False


def import_trace(handle: TraceHandle, scope: Any, name: str = "Import") -> Arranged:
    """An :class:`Arranged` in ``scope`` (another dataflow on the same worker) reading
    ``handle``'s trace."""
    if handle.closed:
        raise TimelyError("import: the trace handle is closed")
    op = ImportOperator(scope, handle, name)
    return Arranged(scope, Stream(scope, op.output_ports[0]), handle.spine)
