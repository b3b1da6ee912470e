"""The temporal filter: each record present from ``lower(record)`` until ``upper(record)``.

A record that arrives at time ``t`` with diff ``d`` becomes two updates, ``(record, t ⊔ lower,
+d)`` and ``(record, t ⊔ upper, -d)`` (Materialize's temporal filters, and differential
dataflow's ``join_function`` with two outputs): the collection holds the record exactly while
``lower <= time < upper``, retracts it by itself when ``upper`` passes, and arrangements
downstream compact the pair away once the frontier passes ``upper``. It is linear, so it fuses
with the map / filter / flat_map chain around it (:mod:`.fusion`).

Bounds are in the outermost coordinate of the scope's time: in a nested scope (``Product``
times) ``lower`` and ``upper`` move the outer time and keep the inner rounds. ``None`` is
unbounded: no ``lower`` means present from arrival, no ``upper`` means never leaves.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from ..errors import TimelyError
from ..order import Product

__all__ = ["Bound", "before", "presence", "outer_time", "with_outer_at_least"]

Bound = Optional[Callable[[Any], Any]]
"""A function of a record giving a time (outer coordinate), or ``None`` for no bound."""


def outer_time(t: Any) -> Any:
    """The outermost coordinate of ``t`` (``t`` itself at the top scope's times)."""
    while type(t) is Product:
        t = t[0]
    return t


def with_outer_at_least(t: Any, bound: Any) -> Any:
    """``t`` joined with ``bound`` in the outermost coordinate (the inner rounds kept)."""
    if type(t) is Product:
        return Product(with_outer_at_least(t[0], bound), t[1])
    return bound if bound > t else t


def presence(lower: Bound, upper: Bound) -> Callable[[Any, Any], List[Tuple[Any, int]]]:
    """``f(record, time)``: the ``(time, sign)`` updates that make a record arriving at
    ``time`` present from ``lower(record)`` to ``upper(record)`` (nothing when it never is)."""
    if lower is None and upper is None:
        raise TimelyError("temporal_filter: give lower, upper or both (both None keeps all)")

    def bounds(record: Any) -> Tuple[Any, Any]:
        lo = lower(record) if lower is not None else None
        hi = upper(record) if upper is not None else None
        return lo, hi

    def at(record: Any, t: Any) -> List[Tuple[Any, int]]:
        lo, hi = bounds(record)
        try:
            start = t if lo is None else with_outer_at_least(t, lo)
            if hi is None:
                return [(start, 1)]
            if not outer_time(start) < hi:  # gone before it arrives (or never present)
                return []
            return [(start, 1), (with_outer_at_least(t, hi), -1)]
        except TypeError as exc:
            raise TimelyError(
                f"temporal_filter: the bounds of {record!r} (lower {lo!r}, upper {hi!r}) do "
                f"not compare with its time {t!r}: {exc}"
            ) from None

    return at


def before(cutoff: Callable[[Any], Any]) -> Callable[[Any, Any], List[Tuple[Any, int]]]:
    """``f(record, time)``: keep an update only while its time (outer coordinate) is before
    ``cutoff(record)`` (``None``: no cutoff). The collection's count of each record stops
    changing at its cutoff: a window's result kept after its inputs are retracted."""

    def at(record: Any, t: Any) -> List[Tuple[Any, int]]:
        c = cutoff(record)
        try:
            return [(t, 1)] if c is None or outer_time(t) < c else []
        except TypeError as exc:
            raise TimelyError(
                f"freeze_at: the cutoff of {record!r} ({c!r}) does not compare with its time "
                f"{t!r}: {exc}"
            ) from None

    return at
