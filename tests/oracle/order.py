"""Brute-force order oracles: enumerate, compare all pairs; slow and obviously correct.

The order and progress property tests (``tests/progress/``) check ``timelypy.order`` and
``timelypy.progress`` against these, never against the library's own helpers.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, List, Optional, Sequence, Set, Tuple

from timelypy.order import IntSummary, Product, ProductSummary, less_equal


def grid(shape: str, hi: int) -> List[Any]:
    """Every time of ``shape`` with coordinates in ``[0, hi]`` (closed under join and meet)."""
    r = range(hi + 1)
    if shape == "int":
        return list(r)
    if shape == "p":
        return [Product(a, b) for a in r for b in r]
    if shape == "pp":
        return [Product(Product(a, b), c) for a in r for b in r for c in r]
    if shape == "p_inner":
        return [Product(a, Product(b, c)) for a in r for b in r for c in r]
    raise ValueError(shape)


def minimal_elements(xs: Iterable[Any], le: Callable = less_equal) -> Set[Any]:
    """The minimal elements of a set under ``le`` (all-pairs)."""
    xs = set(xs)
    return {x for x in xs if not any(y != x and le(y, x) for y in xs)}


def upset(antichain: Iterable[Any], universe: Iterable[Any], le: Callable = less_equal) -> Set[Any]:
    """Elements of ``universe`` at or above some element of ``antichain``."""
    a = list(antichain)
    return {u for u in universe if any(le(x, u) for x in a)}


def is_antichain(xs: Sequence[Any], le: Callable = less_equal) -> bool:
    return len(set(xs)) == len(xs) and all(not le(x, y) for x, y in itertools.permutations(xs, 2))


def opt_le(a: Optional[Any], b: Optional[Any], le: Callable = less_equal) -> bool:
    """Partial order on ``T ∪ {None}`` with ``None`` (the invalid/overflowed time) on top."""
    if b is None:
        return True
    if a is None:
        return False
    return le(a, b)


def PS(outer: int, inner: int) -> ProductSummary:
    """``ProductSummary(IntSummary(outer), IntSummary(inner))``."""
    return ProductSummary(IntSummary(outer), IntSummary(inner))


def ps_key(s: ProductSummary) -> Tuple[int, int]:
    return (s.outer.delta, s.inner.delta)


def minimal_summaries(ss: Iterable[ProductSummary]) -> Set[ProductSummary]:
    ss = set(ss)
    return {s for s in ss if not any(u != s and u.less_equal(s) for u in ss)}
