"""Traces: the indexed, compacted history of a collection, shared by the operators that read it.

A :class:`Batch` holds updates ``(key, val, time, diff)`` as a dict ``key -> [(val, time,
diff)]`` (sequential access by key, then value, then time), with the frontiers ``lower`` and
``upper`` it covers and a sequence number. A :class:`Spine` is the list of batches of one
arrangement, merged geometrically (a batch is merged into its predecessor while it is at least
half its size, or at once into a predecessor the spine owns and updates in place) once every
reader has seen both. Merging advances times to the readers' common
*since* frontier (logical compaction) and consolidates, so under steady churn the stored update
count stays proportional to the live data, not to the history.

Readers hold :class:`TraceHandle` s: ``set_logical_compaction(frontier)`` promises to read only
at times at or beyond ``frontier``; the reader's acknowledged batch sequence number plays the
role of physical compaction (batches a reader has not yet seen are never merged away from it).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..progress.frontier import MutableAntichain

__all__ = ["Batch", "Spine", "TraceHandle", "advance_time"]

_INF = float("inf")


def advance_time(t: Any, frontier: Sequence[Any], join: Callable, meet: Callable) -> Any:
    """``advance_by``: the meet over ``f`` in ``frontier`` of ``join(t, f)`` (``t`` if empty)."""
    if not frontier:
        return t
    if len(frontier) == 1:
        return join(t, frontier[0])
    it = iter(frontier)
    result = join(t, next(it))
    for f in it:
        result = meet(result, join(t, f))
    return result


class Batch:
    """An immutable (once sent) set of updates grouped by key.

    ``data[key]`` is a list of ``(val, time, diff)``. ``lower``/``upper`` are frontiers (lists).
    ``count`` is the number of updates. ``owned`` batches were made by a spine merge, were
    never sent as messages, and may be updated in place by later merges.
    """

    __slots__ = ("data", "lower", "upper", "seq", "count", "owned", "_sorted", "_sorted_len")

    def __init__(self, data: Dict[Any, List[Tuple[Any, Any, int]]], lower: List[Any],
                 upper: List[Any], seq: int = 0, count: Optional[int] = None, owned: bool = False):
        self.data = data
        self.lower = lower
        self.upper = upper
        self.seq = seq
        self.count = sum(map(len, data.values())) if count is None else count
        self.owned = owned
        self._sorted: Optional[List[Any]] = None
        self._sorted_len = -1

    def sorted_keys(self) -> List[Any]:
        """The keys in sorted order (cached; recomputed if an owned batch changed)."""
        if self._sorted is None or self._sorted_len != len(self.data) or self.owned:
            self._sorted = sorted(self.data)
            self._sorted_len = len(self.data)
        return self._sorted

    def updates(self) -> List[Tuple[Any, Any, Any, int]]:
        """Every ``(key, val, time, diff)``."""
        return [(k, v, t, r) for k, vals in self.data.items() for v, t, r in vals]

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"Batch(seq={self.seq}, keys={len(self.data)}, updates={self.count}, " \
               f"lower={self.lower}, upper={self.upper})"


def _consolidate_vals(vals: Iterable[Tuple[Any, Any, int]]) -> List[Tuple[Any, Any, int]]:
    acc: Dict[Tuple[Any, Any], int] = {}
    for v, t, r in vals:
        k = (v, t)
        acc[k] = acc.get(k, 0) + r
    return [(v, t, r) for (v, t), r in acc.items() if r]


class Spine:
    """The batches of one arrangement on one worker, with geometric merging and compaction.

    Costs: :meth:`insert` is amortised O(batch size) plus the merge work it triggers; merging a
    batch into an owned predecessor costs O(size of the newer batch) (in place), so each update
    is copied O(1) times after its first merge. A full compaction pass runs when the stored
    count doubles since the last one.
    """

    def __init__(self, order: Any, name: str = "trace"):
        self.order = order
        self.name = name
        self.batches: List[Batch] = []
        self.seq = 0
        self.upper: List[Any] = [order.minimum]
        self._since = MutableAntichain(order.le)
        self._since.update_iter([(order.minimum, 1)])  # the writer's own hold, see `writer_since`
        self._writer_since: List[Any] = [order.minimum]
        self.handles: List["TraceHandle"] = []
        self.listeners: List[Any] = []
        self._compacted_at = 0
        self._inserted = 0
        self._force_compaction = False
        self.complete = False

    # ------------------------------------------------------------------ writing
    def new_batch(self, data: Dict[Any, List[Tuple[Any, Any, int]]], upper: List[Any],
                  count: Optional[int] = None) -> Batch:
        """Make and insert the next batch (from the spine's upper to ``upper``)."""
        self.seq += 1
        batch = Batch(data, self.upper, list(upper), self.seq, count)
        self.insert(batch)
        return batch

    def insert(self, batch: Batch) -> None:
        self.batches.append(batch)
        self._inserted += batch.count
        self.upper = batch.upper
        for listener in self.listeners:
            listener.notify(batch)
        self._maintain()

    def seal(self, upper: List[Any]) -> None:
        """Advance the upper frontier over a region without updates."""
        self.upper = list(upper)
        if not upper:
            self.complete = True
        for listener in self.listeners:
            listener.notify_upper(self.upper)

    def advance_writer(self, frontier: List[Any]) -> None:
        """The arrange operator's own hold on compaction follows its input frontier."""
        if frontier == self._writer_since:
            return
        changes = [(t, 1) for t in frontier] + [(t, -1) for t in self._writer_since]
        self._writer_since = list(frontier)
        self._since.update_iter(changes)

    # ------------------------------------------------------------------ reading
    @property
    def since(self) -> List[Any]:
        return self._since.frontier

    def physical_seq(self) -> float:
        """Batches with seq at or below this have been seen by every reader."""
        if not self.handles:
            return _INF
        return min(h.through_seq for h in self.handles)

    def batches_through(self, seq: float) -> List[Batch]:
        """Batches with sequence number ``<= seq`` (a prefix of the spine)."""
        out = []
        for b in self.batches:
            if b.seq > seq:
                break
            out.append(b)
        return out

    def get(self, key: Any, seq: float = _INF) -> List[Tuple[Any, Any, int]]:
        """Every ``(val, time, diff)`` of ``key`` in batches through ``seq``."""
        out: List[Tuple[Any, Any, int]] = []
        for b in self.batches:
            if b.seq > seq:
                break
            vals = b.data.get(key)
            if vals:
                out.extend(vals)
        return out

    def accumulate(self, key: Any, time: Any) -> Dict[Any, int]:
        """The values of ``key`` and their counts accumulated at ``time``."""
        le = self.order.le
        acc: Dict[Any, int] = {}
        for v, t, r in self.get(key):
            if le(t, time):
                acc[v] = acc.get(v, 0) + r
        return {v: r for v, r in acc.items() if r}

    def cursor(self, seq: float = _INF) -> Iterable[Tuple[Any, List[Tuple[Any, List[Tuple[Any, int]]]]]]:
        """Sequential access by key, then value, then time (seed 000): yields
        ``(key, [(val, [(time, diff), ...]), ...])`` in sorted order over the batches through
        ``seq``. Keys must be mutually comparable. Cost: O(n log n) for the first pass over a
        batch (its sorted key list is then cached until the batch changes), plus a k-way merge.
        """
        import heapq

        batches = self.batches_through(seq)
        key_lists = [b.sorted_keys() for b in batches]
        previous = object()
        for key in heapq.merge(*key_lists):
            if key == previous:
                continue
            previous = key
            by_val: Dict[Any, Dict[Any, int]] = {}
            for b in batches:
                for v, t, r in b.data.get(key, ()):
                    times = by_val.setdefault(v, {})
                    times[t] = times.get(t, 0) + r
            vals = []
            for v in sorted(by_val):
                times = sorted((t, r) for t, r in by_val[v].items() if r)
                if times:
                    vals.append((v, times))
            if vals:
                yield key, vals

    def keys(self) -> set:
        out: set = set()
        for b in self.batches:
            out.update(b.data.keys())
        return out

    def stored_updates(self) -> int:
        """Number of ``(key, val, time, diff)`` entries stored (for compaction tests)."""
        return sum(b.count for b in self.batches)

    # ------------------------------------------------------------------ maintenance
    def _maintain(self) -> None:
        phys = self.physical_seq()
        batches = self.batches
        # The mergeable prefix: batches every reader has seen.
        m = 0
        while m < len(batches) and batches[m].seq <= phys:
            m += 1
        i = m - 1
        # Geometric merging (a batch joins its predecessor once it is at least half its size);
        # a predecessor the spine owns is updated in place at O(size of the newer batch), so
        # merging into it directly copies each update once instead of O(log n) times.
        while i >= 1 and (batches[i - 1].owned or batches[i].count * 2 >= batches[i - 1].count):
            merged = self._merge(batches[i - 1], batches[i])
            batches[i - 1:i + 1] = [merged]
            i -= 1
            m -= 1
        # Amortised full compaction: once as many updates arrived as half of what is stored
        # (each update pays for O(1) compaction work), or after a reader advanced its
        # logical compaction explicitly.
        stored = 0
        for b in batches[:m]:
            stored += b.count
        if stored > 1024 and (self._inserted * 2 >= stored or self._force_compaction):
            self._compact_prefix(m)

    def _compact_prefix(self, m: int) -> None:
        """Compact (advance to since, consolidate) every batch of the first ``m``."""
        total = 0
        for idx in range(m):
            b = self.batches[idx]
            if not b.owned:
                b = Batch({k: list(v) for k, v in b.data.items()}, b.lower, b.upper, b.seq,
                          b.count, owned=True)
                self.batches[idx] = b
            self._compact(b)
            total += b.count
        self._compacted_at = total
        self._inserted = 0
        self._force_compaction = False

    def maintain(self) -> None:
        """Merge what readers allow (called by readers after they acknowledge batches)."""
        self._maintain()

    def _merge(self, a: Batch, b: Batch) -> Batch:
        since = list(self._since.frontier)
        join, meet = self.order.join, self.order.meet
        if a.owned:
            target = a
        else:
            target = Batch({k: list(v) for k, v in a.data.items()}, a.lower, a.upper, a.seq,
                           a.count, owned=True)
        data = target.data
        count = target.count
        single = since[0] if len(since) == 1 else None
        is_total = self.order.is_total
        for key, vals in b.data.items():
            existing = data.get(key)
            if existing is None:
                data[key] = list(vals)
                count += len(vals)
                continue
            if is_total and single is not None and len(existing) == 1 and len(vals) == 1:
                v1, t1, r1 = existing[0]
                v2, t2, r2 = vals[0]
                if t1 < single:
                    t1 = single
                if t2 < single:
                    t2 = single
                if v1 == v2 and t1 == t2:
                    r = r1 + r2
                    if r:
                        data[key] = [(v1, t1, r)]
                    else:
                        del data[key]
                        count -= 1
                else:
                    data[key] = [(v1, t1, r1), (v2, t2, r2)]
                    count += 1
                continue
            combined = existing + vals
            acc: Dict[Tuple[Any, Any], int] = {}
            for v, t, r in combined:
                if single is not None and is_total:
                    if t < single:
                        t = single
                elif since:
                    t = advance_time(t, since, join, meet)
                k = (v, t)
                acc[k] = acc.get(k, 0) + r
            new = [(v, t, r) for (v, t), r in acc.items() if r]
            count += len(new) - len(existing)
            if new:
                data[key] = new
            else:
                del data[key]
        target.count = count
        target.upper = b.upper
        target.seq = b.seq
        return target

    def _compact(self, batch: Batch) -> None:
        """Advance every time of ``batch`` to ``since`` and consolidate (O(batch size))."""
        since = list(self._since.frontier)
        data = batch.data
        count = 0
        if self.order.is_total and len(since) <= 1:
            if not since:
                return
            s0 = since[0]
            for key in list(data):
                vals = data[key]
                if len(vals) == 1:
                    v, t, r = vals[0]
                    if t < s0:
                        vals[0] = (v, s0, r)
                    count += 1
                    continue
                acc: Dict[Tuple[Any, Any], int] = {}
                for v, t, r in vals:
                    k = (v, t if t >= s0 else s0)
                    acc[k] = acc.get(k, 0) + r
                new = [(v, t, r) for (v, t), r in acc.items() if r]
                if new:
                    data[key] = new
                    count += len(new)
                else:
                    del data[key]
            batch.count = count
            return
        join, meet = self.order.join, self.order.meet
        for key in list(data):
            acc = {}
            for v, t, r in data[key]:
                t = advance_time(t, since, join, meet)
                k = (v, t)
                acc[k] = acc.get(k, 0) + r
            new = [(v, t, r) for (v, t), r in acc.items() if r]
            if new:
                data[key] = new
                count += len(new)
            else:
                del data[key]
        batch.count = count

    def compact(self) -> None:
        """Merge what readers allow and compact every batch they have all seen, now
        (normally automatic and amortised)."""
        self._maintain()
        phys = self.physical_seq()
        m = 0
        while m < len(self.batches) and self.batches[m].seq <= phys:
            m += 1
        self._compact_prefix(m)

    # ------------------------------------------------------------------ readers
    def handle(self, since: Optional[List[Any]] = None, through_seq: float = 0,
               explicit: bool = False) -> "TraceHandle":
        h = TraceHandle(self, since, through_seq)
        h.explicit = explicit
        return h

    def _check(self) -> None:
        """Assert the batches tile time and sequence numbers increase."""
        prev_seq = 0
        for b in self.batches:
            assert b.seq > prev_seq, (b.seq, prev_seq)
            prev_seq = b.seq
            assert b.count == sum(map(len, b.data.values())), b


class TraceHandle:
    """One reader's hold on a :class:`Spine`.

    ``set_logical_compaction(frontier)``: this reader will only read at times at or beyond
    ``frontier`` (it never moves backwards). ``set_physical_compaction(frontier)``: with ``[]``
    the reader no longer blocks merging. ``close()`` releases both holds.
    """

    def __init__(self, spine: Spine, since: Optional[List[Any]] = None, through_seq: float = 0):
        self.spine = spine
        self.since: List[Any] = list(spine.since if since is None else since)
        self.through_seq = through_seq
        self.closed = False
        self.explicit = False  # set for handles given to users (their advances trigger compaction)
        spine._since.update_iter([(t, 1) for t in self.since])
        spine.handles.append(self)

    def set_logical_compaction(self, frontier: Sequence[Any]) -> None:
        """Allow compaction up to ``frontier`` (joined with the current one; never backwards)."""
        if self.closed:
            return
        order = self.spine.order
        if order.is_total and len(frontier) == 1 and len(self.since) == 1:
            f, old = frontier[0], self.since[0]
            if f <= old:
                return
            self.since = [f]
            if self.spine._since.update_iter(((f, 1), (old, -1))) and self.explicit:
                self.spine._force_compaction = True
            return
        new: List[Any] = []
        from ..progress.frontier import Antichain

        joined = Antichain(le=order.le)
        if not frontier:
            pass
        else:
            for a in self.since:
                for b in frontier:
                    joined.insert(order.join(a, b))
            if not self.since:
                joined = Antichain(frontier, le=order.le)
        new = list(joined)
        if set(new) == set(self.since):
            return
        changes = [(t, 1) for t in new] + [(t, -1) for t in self.since]
        self.since = new
        if self.spine._since.update_iter(changes) and self.explicit:
            self.spine._force_compaction = True

    def set_physical_compaction(self, frontier: Sequence[Any]) -> None:
        """With an empty frontier, stop blocking merges of batches not yet acknowledged."""
        if not frontier:
            self.through_seq = _INF
            self.spine.maintain()

    def acknowledge(self, seq: int) -> None:
        """This reader has seen every batch up to ``seq``."""
        if seq > self.through_seq:
            self.through_seq = seq

    def import_(self, scope: Any, name: str = "Import") -> Any:
        """This trace as an arrangement in another dataflow on the same worker (seed 003)."""
        from .arrange import import_trace

        return import_trace(self, scope, name)

    def get(self, key: Any) -> List[Tuple[Any, Any, int]]:
        return self.spine.get(key)

    def cursor(self):
        """Sequential access by key, then value, then time (see :meth:`Spine.cursor`)."""
        return self.spine.cursor()

    def accumulate(self, key: Any, time: Any) -> Dict[Any, int]:
        """Values of ``key`` with their counts at ``time`` (must be at or beyond ``since``)."""
        return self.spine.accumulate(key, time)

    def close(self) -> None:
        """Release this reader's holds on compaction and merging. Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self.spine._since.update_iter([(t, -1) for t in self.since]) and self.explicit:
            self.spine._force_compaction = True
        self.since = []
        if self in self.spine.handles:
            self.spine.handles.remove(self)
        self.spine.maintain()

    def __repr__(self) -> str:
        return f"TraceHandle({self.spine.name!r}, since={self.since})"
