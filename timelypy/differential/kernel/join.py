"""The join kernel: what a matching pair of updates makes, and the walk of a batch's keys.

Contract. A *product* (:func:`pairs`, :func:`semijoin_pairs`, :func:`mapped`, :func:`core`) is
called once per operator and input as ``product(order, first, logic)`` and returns a *kernel*
``kernel(key, mine, theirs, out)``: for every ``(v1, t1, r1)`` of ``mine`` (the new batch's
updates of ``key``) and ``(v2, t2, r2)`` of ``theirs`` (the other trace's), in that nesting
order, it appends ``(record, order.join(t1, t2), r1 * r2)`` to ``out``, where ``record`` is
``(key, (v1, v2))`` for :func:`pairs`, ``(key, v1)`` for :func:`semijoin_pairs` (the second
input's values are ``()``), ``logic(key, v1, v2)`` for :func:`mapped`, and each item of
``logic(key, v1, v2)`` for :func:`core`; when ``first`` is False the batch is of the second
input, and ``v1`` / ``v2`` swap places in ``record``. :func:`join_keys` walks
``(key, mine)`` pairs, looks each key up in every ``lookup`` (``lookup(key)`` returns the
updates of a batch of the other trace, or None / empty) and calls ``kernel`` with their
concatenation (in ``lookups`` order) when it is not empty, until ``out`` holds at least
``fuel`` updates; it returns ``out``; the pairs it has not reached stay in the iterator.
Invariants: nothing given is changed but ``out`` and the iterator. Cost: O(|mine| * |theirs|)
per key plus one dictionary look-up per key and batch.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, cast

__all__ = ["core", "join_keys", "mapped", "pairs", "semijoin_pairs"]

Vals = List[Tuple[Any, Any, int]]
Kernel = Callable[[Any, Vals, Vals, List[Any]], None]
"""``kernel(key, mine, theirs, out)``: append the outputs of every pair of ``mine`` (the new
batch's updates of ``key``) and ``theirs`` (the other trace's) to ``out``."""
Lookup = Callable[[Any], Optional[Vals]]
"""``lookup(key)``: the updates of ``key`` in one batch (None or empty when it has none)."""


# One comprehension per key and product (the hot loop of every join).
def pairs(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """``(key, (v1, v2))`` for every matching pair."""
    tjoin = order.join
    kernel: Kernel
    if order.is_total:
        if first:

            def kernel(key: Any, vals: Vals, merged: Vals, out: List[Any]) -> None:
                out.extend(
                    [
                        ((key, (v, v2)), t if t >= t2 else t2, r * r2)
                        for v, t, r in vals
                        for v2, t2, r2 in merged
                    ]
                )
        else:

            def kernel(key: Any, vals: Vals, merged: Vals, out: List[Any]) -> None:
                out.extend(
                    [
                        ((key, (v2, v)), t if t >= t2 else t2, r * r2)
                        for v, t, r in vals
                        for v2, t2, r2 in merged
                    ]
                )
    elif first:

        def kernel(key: Any, vals: Vals, merged: Vals, out: List[Any]) -> None:
            out.extend(
                [
                    ((key, (v, v2)), tjoin(t, t2), r * r2)
                    for v, t, r in vals
                    for v2, t2, r2 in merged
                ]
            )
    else:

        def kernel(key: Any, vals: Vals, merged: Vals, out: List[Any]) -> None:
            out.extend(
                [
                    ((key, (v2, v)), tjoin(t, t2), r * r2)
                    for v, t, r in vals
                    for v2, t2, r2 in merged
                ]
            )

    return kernel


def semijoin_pairs(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """``(key, v1)`` for every pair of ``(key, v1)`` (first input) and a key (second input)."""
    tjoin = order.join
    kernel: Kernel
    if first:

        def kernel(key: Any, vals: Vals, merged: Vals, out: List[Any]) -> None:
            out.extend(
                [((key, v), tjoin(t, t2), r * r2) for v, t, r in vals for _, t2, r2 in merged]
            )
    else:

        def kernel(key: Any, vals: Vals, merged: Vals, out: List[Any]) -> None:
            out.extend(
                [((key, v2), tjoin(t, t2), r * r2) for _, t, r in vals for v2, t2, r2 in merged]
            )

    return kernel


def mapped(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """``logic(key, v1, v2)`` for every matching pair."""
    tjoin = order.join
    f = cast(Callable, logic)
    kernel: Kernel
    if first:

        def kernel(key: Any, vals: Vals, merged: Vals, out: List[Any]) -> None:
            out.extend(
                [(f(key, v, v2), tjoin(t, t2), r * r2) for v, t, r in vals for v2, t2, r2 in merged]
            )
    else:

        def kernel(key: Any, vals: Vals, merged: Vals, out: List[Any]) -> None:
            out.extend(
                [(f(key, v2, v), tjoin(t, t2), r * r2) for v, t, r in vals for v2, t2, r2 in merged]
            )

    return kernel


def core(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """Every record of the iterable ``logic(key, v1, v2)`` for every matching pair."""
    tjoin = order.join
    f = cast(Callable, logic)

    def kernel(key: Any, vals: Vals, merged: Vals, out: List[Any]) -> None:
        append = out.append
        for v, t, r in vals:
            for v2, t2, r2 in merged:
                tt, rr = tjoin(t, t2), r * r2
                for x in f(key, v, v2) if first else f(key, v2, v):
                    append((x, tt, rr))

    return kernel


def join_keys(
    keys: Iterator[Tuple[Any, Vals]], lookups: Sequence[Lookup], kernel: Kernel, fuel: int
) -> List[Any]:
    """The outputs of the next keys of ``keys`` joined with the batches ``lookups`` reads
    (stops once ``fuel`` outputs are made)."""
    out: List[Any] = []
    if not lookups:
        return out
    if len(lookups) == 1:
        get = lookups[0]
        for key, vals in keys:
            merged = get(key)
            if merged:
                kernel(key, vals, merged, out)
                if len(out) >= fuel:
                    break
    elif len(lookups) == 2:  # a large batch and the small ones beside it (see the spine)
        get0, get1 = lookups
        for key, vals in keys:
            merged = get0(key)
            more = get1(key)
            if more:
                merged = merged + more if merged else more
            elif not merged:
                continue
            kernel(key, vals, merged, out)
            if len(out) >= fuel:
                break
    else:
        for key, vals in keys:
            merged = []
            for get in lookups:
                found = get(key)
                if found:
                    merged.extend(found)
            if merged:
                kernel(key, vals, merged, out)
                if len(out) >= fuel:
                    break
    return out


from timelypy.kernels import adopt  # noqa: E402  (last: a drop-in replaces the names above)

adopt(__name__, globals())
