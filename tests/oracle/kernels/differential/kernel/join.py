"""The join kernel, plainly: every pair of matching updates, in nested loops."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

__all__ = ["core", "join_keys", "mapped", "pairs", "semijoin_pairs"]

Vals = List[Tuple[Any, Any, int]]
Kernel = Callable[[Any, Vals, Vals, List[Any]], None]


def _product(order: Any, first: bool, records: Callable[[Any, Any, Any], Iterable[Any]]) -> Kernel:
    """The kernel making ``records(key, first input's value, second input's value)`` per pair."""

    def kernel(key: Any, mine: Vals, theirs: Vals, out: List[Any]) -> None:
        for v1, t1, r1 in mine:
            for v2, t2, r2 in theirs:
                a, b = (v1, v2) if first else (v2, v1)
                for record in records(key, a, b):
                    out.append((record, order.join(t1, t2), r1 * r2))

    return kernel


def pairs(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """``(key, (v1, v2))`` per matching pair."""
    return _product(order, first, lambda key, a, b: [(key, (a, b))])


def semijoin_pairs(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """``(key, v1)`` per matching pair (the second input's values are ``()``)."""
    return _product(order, first, lambda key, a, b: [(key, a)])


def mapped(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """``logic(key, v1, v2)`` per matching pair."""
    assert logic is not None
    return _product(order, first, lambda key, a, b: [logic(key, a, b)])


def core(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """Each record of ``logic(key, v1, v2)`` per matching pair."""
    assert logic is not None
    return _product(order, first, logic)


def join_keys(
    keys: Iterator[Tuple[Any, Vals]],
    lookups: Sequence[Callable[[Any], Optional[Vals]]],
    kernel: Kernel,
    fuel: int,
) -> List[Any]:
    """The next keys joined with what ``lookups`` find, until ``fuel`` outputs are made."""
    out: List[Any] = []
    if not lookups:
        return out
    for key, mine in keys:
        theirs: Vals = []
        for lookup in lookups:
            theirs.extend(lookup(key) or [])
        if theirs:
            kernel(key, mine, theirs, out)
            if len(out) >= fuel:
                break
    return out
