"""Trace views: a spine read through a filter and a time map (DD's trace wrappers)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple

from ...order import Product
from .batch import BatchReader, Vals
from .spine import Spine

__all__ = ["TraceView", "wrap_items"]


def wrap_items(
    items: Iterable[Tuple[Any, Vals]], pred: Optional[Callable], tm: Optional[Callable]
) -> Iterator[Tuple[Any, Vals]]:
    """``(key, vals)`` pairs seen through a filter (``pred(key, val)``) and a time map
    (``tm(time)``); keys left with no values are skipped."""
    for k, vals in items:
        if pred is not None:
            vals = [(v, t, r) for v, t, r in vals if pred(k, v)]
            if not vals:
                continue
        if tm is not None:
            vals = [(v, tm(t), r) for v, t, r in vals]
        yield k, vals


class TraceView:
    """A :class:`~.spine.Spine` seen through ``pred(key, val)`` (differential-dataflow's
    ``TraceFilter``) and ``time_map`` (``TraceEnter``: times read as ``Product(t, 0)`` in a
    nested scope; ``frontier_unmap`` maps a frontier of the nested scope back to the spine's).
    Views never copy the spine: wrappers apply to every read.
    """

    __slots__ = ("spine", "pred", "time_map", "frontier_unmap")

    def __init__(
        self,
        spine: Spine,
        pred: Optional[Callable] = None,
        time_map: Optional[Callable] = None,
        frontier_unmap: Optional[Callable] = None,
    ):
        self.spine = spine
        self.pred = pred
        self.time_map = time_map
        self.frontier_unmap = frontier_unmap

    def read_batch(self, batch: BatchReader) -> Iterable[Tuple[Any, Vals]]:
        """``(key, [(val, time, diff)])`` of ``batch`` through this view's wrappers."""
        pred, tm = self.pred, self.time_map
        if pred is None and tm is None:
            return batch.items()
        return wrap_items(batch.items(), pred, tm)

    def lookup(self, batch: BatchReader) -> Callable[[Any], Optional[Vals]]:
        """``lookup(key)``: the updates of ``key`` in ``batch`` through this view's wrappers
        (None or empty when none are left)."""
        pred, tm = self.pred, self.time_map
        get = batch.get
        if pred is None and tm is None:
            return get

        if pred is None and tm is not None:  # entered into a nested scope: re-timed only
            time_map = tm

            def retimed(key: Any) -> Optional[Vals]:
                vals = get(key)
                return [(v, time_map(t), r) for v, t, r in vals] if vals else vals

            return retimed

        def wrapped(key: Any) -> Optional[Vals]:
            vals = get(key)
            if not vals:
                return vals
            if pred is not None:
                vals = [(v, t, r) for v, t, r in vals if pred(key, v)]
            if tm is not None:
                vals = [(v, tm(t), r) for v, t, r in vals]
            return vals

        return wrapped

    def filter(self, pred: Callable[[Any, Any], bool]) -> "TraceView":
        """This view, further restricted to ``pred(key, val)``."""
        old = self.pred
        new_pred = pred if old is None else (lambda k, v: old(k, v) and pred(k, v))
        return TraceView(self.spine, new_pred, self.time_map, self.frontier_unmap)

    def enter(self) -> "TraceView":
        """This view one scope deeper: times read as ``Product(t, 0)``."""
        old_map, old_unmap = self.time_map, self.frontier_unmap
        if old_map is None:
            time_map = _to_inner
            unmap = _to_outer
        else:
            if old_unmap is None:
                raise ValueError(f"trace {self.spine.name!r}: a time map without its inverse")
            inner_map, inner_unmap = old_map, old_unmap
            time_map = lambda t: Product(inner_map(t), 0)  # noqa: E731
            unmap = lambda t: inner_unmap(t[0])  # noqa: E731
        return TraceView(self.spine, self.pred, time_map, unmap)

    def unmap_frontier(self, frontier: Iterable[Any]) -> List[Any]:
        """A frontier of the view's scope as a frontier of the spine's times."""
        if self.frontier_unmap is None:
            return list(frontier)
        return [self.frontier_unmap(t) for t in frontier]


def _to_inner(t: Any) -> Product:
    return Product(t, 0)


def _to_outer(t: Any) -> Any:
    return t[0]
