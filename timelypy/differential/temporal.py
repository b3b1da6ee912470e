"""The temporal filter: each record present from ``lower(record)`` until ``upper(record)``.

A record that arrives at time ``t`` with diff ``d`` becomes two updates, ``(record, t ⊔ lower,
+d)`` and ``(record, t ⊔ upper, -d)`` (Materialize's temporal filters, and differential
dataflow's ``join_function`` with two outputs): the collection holds the record exactly while
``lower <= time < upper``, retracts it by itself when ``upper`` passes, and arrangements
downstream compact the pair away once the frontier passes ``upper``. It is linear, so it fuses
with the map / filter / flat_map chain around it (:mod:`.fusion`).

Bounds are in the outermost coordinate of the scope's time: in a nested scope (``Product``
times) ``lower`` and ``upper`` move the outer time and keep the inner rounds. ``None`` is
unbounded: no ``lower`` means present from arrival, no ``upper`` means never leaves. In a loop,
``freeze_at`` keeps the updates at ``Product(t, i)`` with ``t`` before the cutoff: round ``i``
at a later time sees round ``i`` of the last time before the cutoff, so the loop at the later
time can still change after a round that repeated the one before, until the rounds it reads
have settled.

A bound that does not compare with the time (a string bound on int times) is a ``TypeError``
naming the record, the bound and the time; the operator running the stage reports it as an
:class:`~timelypy.errors.OperatorError` naming itself, the record, its time and its diff.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Tuple

from ..errors import short_repr
from ..order import Product

__all__ = ["Bound", "Stage", "before", "presence", "outer_time", "with_outer_at_least"]

Bound = Optional[Callable[[Any], Any]]
"""A function of a record giving a time (outer coordinate), or ``None`` for no bound."""

Stage = Callable[[Any, Any], Sequence[Tuple[Any, int]]]
"""A fused stage of kind ``"temporal"``: ``f(record, time) -> [(time2, sign)]``."""


def outer_time(t: Any) -> Any:
    """The outermost coordinate of ``t`` (``t`` itself at the top scope's times).

    Example: ``outer_time(Product(Product(3, 1), 2))`` is ``3``."""
    while type(t) is Product:
        t = t[0]
    return t


def with_outer_at_least(t: Any, bound: Any) -> Any:
    """``t`` joined with ``bound`` in the outermost coordinate (the inner rounds kept).

    Example: ``with_outer_at_least(Product(2, 5), 4)`` is ``Product(4, 5)``."""
    if type(t) is Product:
        return Product(with_outer_at_least(t[0], bound), t[1])
    return bound if bound > t else t


def _keep(record: Any, t: Any) -> Tuple[Tuple[Any, int], ...]:
    return ((t, 1),)


def presence(lower: Bound, upper: Bound) -> Stage:
    """``f(record, time)``: the ``(time, sign)`` updates that make a record arriving at
    ``time`` present from ``lower(record)`` to ``upper(record)`` (nothing when it never is).
    A bound function that is ``None`` or returns ``None`` is no bound.

    Example: ``presence(lambda r: r[0], lambda r: r[1])((2, 5), 0)`` is
    ``((2, 1), (5, -1))``; at time 6 the same record gives nothing."""
    if lower is None and upper is None:
        return _keep
    lo_of = lower if lower is not None else _none
    hi_of = upper if upper is not None else _none

    def at(record: Any, t: Any) -> Sequence[Tuple[Any, int]]:
        lo = lo_of(record)
        hi = hi_of(record)
        if type(t) is int and type(lo) is int and type(hi) is int:  # the hot case
            start = lo if lo > t else t
            return () if start >= hi else ((start, 1), (hi, -1))  # start < hi: hi > t
        try:
            start = t if lo is None else with_outer_at_least(t, lo)
            if hi is None:
                return ((start, 1),)
            if not outer_time(start) < hi:  # gone before it arrives (or never present)
                return ()
            return ((start, 1), (with_outer_at_least(t, hi), -1))
        except TypeError as exc:
            raise TypeError(
                f"temporal_filter: the bounds of {short_repr(record)} (lower {short_repr(lo)}, "
                f"upper {short_repr(hi)}) do not compare with its time {t!r}: {exc}"
            ) from None

    return at


def before(cutoff: Bound) -> Stage:
    """``f(record, time)``: keep an update only while its time (outer coordinate) is before
    ``cutoff(record)`` (a ``None`` function or result: no cutoff). The collection's count of
    each record stops changing at its cutoff: a window's result kept after its inputs are
    retracted.

    Example: ``before(lambda r: r[1])((0, 3), 2)`` is ``((2, 1),)``; at time 3 it is empty."""
    if cutoff is None:
        return _keep
    of = cutoff

    def at(record: Any, t: Any) -> Sequence[Tuple[Any, int]]:
        c = of(record)
        if type(t) is int and type(c) is int:  # the hot case
            return ((t, 1),) if t < c else ()
        try:
            return ((t, 1),) if c is None or outer_time(t) < c else ()
        except TypeError as exc:
            raise TypeError(
                f"freeze_at: the cutoff of {short_repr(record)} ({short_repr(c)}) does not "
                f"compare with its time {t!r}: {exc}"
            ) from None

    return at


def _none(_record: Any) -> None:
    return None
