"""Antichains (frontiers) and MutableAntichain (counts of times, and the frontier they imply)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from ..order import less_equal as _generic_le
from .kernel import frontier_changes, least_positive, minimal_positive, update_partial

__all__ = ["Antichain", "MutableAntichain", "antichain_join", "antichain_meet"]


class _FrontierQueries:
    """``less_equal`` / ``less_than`` of a frontier held in ``self._elements``."""

    __slots__ = ()
    _elements: List[Any]
    _le: Callable[[Any, Any], bool]

    def less_equal(self, t: Any) -> bool:
        """Some element ``<= t``: ``t`` is at or beyond this frontier. O(len)."""
        le = self._le
        for e in self._elements:
            if le(e, t):
                return True
        return False

    def less_than(self, t: Any) -> bool:
        """Some element ``< t`` (strictly): times before ``t`` may still arrive. O(len)."""
        le = self._le
        for e in self._elements:
            if e != t and le(e, t):
                return True
        return False


class Antichain(_FrontierQueries):
    """A set of mutually incomparable times, kept minimal. Used as a frontier (lower bound).

    ``Antichain([])`` is the empty frontier: "nothing can ever arrive" (the greatest
    antichain). ``Antichain([min])`` is the least.

    Comparisons, as in the Differential Dataflow book: ``A.less_equal(t)`` means some
    ``a <= t`` ("t is at or beyond the frontier"); ``A <= B`` is :meth:`le`: every ``b`` has
    an ``a <= b``.

    >>> from timelypy.order import Product
    >>> a = Antichain([Product(1, 2), Product(2, 1), Product(2, 2)])
    >>> sorted(a)
    [Product(1, 2), Product(2, 1)]
    """

    __slots__ = ("_elements", "_le")

    def __init__(
        self, elements: Iterable[Any] = (), le: Optional[Callable[[Any, Any], bool]] = None
    ) -> None:
        self._le = le or _generic_le
        self._elements: List[Any] = []
        for e in elements:
            self.insert(e)

    @classmethod
    def from_elem(cls, t: Any, le: Optional[Callable[[Any, Any], bool]] = None) -> "Antichain":
        """The single-element frontier ``{t}``. O(1)."""
        a = cls(le=le)
        a._elements.append(t)
        return a

    def insert(self, t: Any) -> bool:
        """Add ``t`` unless some element is ``<= t``; drop elements ``>= t``. O(len)."""
        le = self._le
        for e in self._elements:
            if le(e, t):
                return False
        self._elements = [e for e in self._elements if not le(t, e)]
        self._elements.append(t)
        return True

    def le(self, other: "Antichain") -> bool:
        """Antichain order: every element of ``other`` is at or beyond ``self``.
        O(len(self) * len(other))."""
        return all(self.less_equal(b) for b in other._elements)

    def is_empty(self) -> bool:
        """The empty frontier: no time can still arrive. O(1)."""
        return not self._elements

    def elements(self) -> List[Any]:
        """The elements, sorted. O(len log len)."""
        return sorted(self._elements)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._elements)

    def __len__(self) -> int:
        return len(self._elements)

    def __bool__(self) -> bool:
        return bool(self._elements)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Antichain):
            return set(self._elements) == set(other._elements)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._elements))

    def __repr__(self) -> str:
        return f"Antichain({self.elements()!r})"


def antichain_meet(
    a: Iterable[Any], b: Iterable[Any], le: Optional[Callable[[Any, Any], bool]] = None
) -> Antichain:
    """Greatest lower bound of two frontiers: the minimal elements of their union.
    O((len(a) + len(b)) ** 2)."""
    out = Antichain(a, le=le)
    for t in b:
        out.insert(t)
    return out


def antichain_join(
    a: Iterable[Any],
    b: Iterable[Any],
    join: Callable[[Any, Any], Any],
    le: Optional[Callable[[Any, Any], bool]] = None,
) -> Antichain:
    """Least upper bound of two frontiers: the minimal elements of all pairwise joins.
    O(len(a) * len(b) * len(result))."""
    out = Antichain(le=le)
    b = list(b)
    for x in a:
        for y in b:
            out.insert(join(x, y))
    return out


class MutableAntichain:
    """A multiset of times with the frontier of those whose count is positive.

    :meth:`update_iter` applies count changes and returns the *changes to the frontier* as
    ``(time, +1)`` (entered) and ``(time, -1)`` (left). Negative counts are allowed
    transiently and are ignored by the frontier.

    Costs: an update that cannot move the frontier is O(len(frontier)); one that can causes a
    rebuild, O(n log n) in the number of distinct times with non-zero counts.

    Two public members are live state, for the hot loops of progress tracking (the
    count-table contract of :mod:`timelypy.progress.kernel`): :attr:`table`, the count table,
    and :attr:`frontier`, the list of its minimal positive times. A writer that changes
    ``table`` directly must then replace ``frontier`` by the frontier of the new table (never
    mutate the list: readers may hold it as a snapshot).

    >>> m = MutableAntichain(); m.update_iter([(3, 1), (5, 1)])
    [(3, 1)]
    >>> m.update_iter([(3, -1)])
    [(3, -1), (5, 1)]
    """

    __slots__ = ("frontier", "table", "_le", "_total")

    def __init__(
        self, le: Optional[Callable[[Any, Any], bool]] = None, total: bool = False
    ) -> None:
        self._le = le or _generic_le
        self.table: Dict[Any, int] = {}
        """The live count table ``{time: non-zero count}`` (the count-table contract)."""
        self.frontier: List[Any] = []
        """The current frontier: the minimal times with a positive count (do not mutate)."""
        self._total = total
        if total and type(self) is MutableAntichain:
            self.__class__ = _TotalAntichain

    @classmethod
    def from_elem(
        cls, t: Any, le: Optional[Callable[[Any, Any], bool]] = None
    ) -> "MutableAntichain":
        """Holds ``t`` once, so the frontier is ``{t}`` (partial-order mode). O(1)."""
        m = cls(le)
        m.table[t] = 1
        m.frontier = [t]
        return m

    def less_equal(self, t: Any) -> bool:
        """Some frontier element ``<= t``: ``t`` is at or beyond this frontier. O(len)."""
        le = self._le
        for e in self.frontier:
            if le(e, t):
                return True
        return False

    def less_than(self, t: Any) -> bool:
        """Some frontier element ``< t`` (strictly): times before ``t`` may still arrive.
        O(len)."""
        le = self._le
        for e in self.frontier:
            if e != t and le(e, t):
                return True
        return False

    def antichain(self) -> Antichain:
        """A copy of the current frontier as an :class:`Antichain`. O(len(frontier))."""
        a = Antichain(le=self._le)
        a._elements = list(self.frontier)
        return a

    def update_iter(self, updates: Iterable[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
        """Apply count changes; return the resulting frontier changes.

        O(len(frontier)) per change that cannot move the frontier, plus one rebuild (see the
        class docstring) if any change can.
        """
        if self._total:
            return self._update_total(updates)
        if not update_partial(self.table, self.frontier, updates, self._le):
            return []
        old = self.frontier
        new = self.frontier = minimal_positive(self.table, self._le)
        return frontier_changes(old, new)

    def _update_total(self, updates: Iterable[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
        # Totally ordered times: the frontier is the least time with a positive count.
        frontier = self.frontier
        old = frontier[0] if frontier else None
        counts = self.table
        lowered = False
        for t, d in updates:  # (kernel.update_total, written out: the count-table contract)
            if d:
                c = counts.get(t, 0) + d
                if c:
                    counts[t] = c
                else:
                    del counts[t]
                if old is None or t <= old:
                    lowered = True
        if not lowered:
            return []
        new = least_positive(counts)
        if new == old:
            return []
        if new is None:
            self.frontier = []
            return [(old, -1)]
        self.frontier = [new]
        if old is None:
            return [(new, 1)]
        return [(old, -1), (new, 1)]

    def update(self, t: Any, d: int) -> List[Tuple[Any, int]]:
        """Apply one count change; return the frontier changes (costs as :meth:`update_iter`)."""
        return self.update_iter(((t, d),))

    def count_for(self, t: Any) -> int:
        """The count of ``t`` (0 if absent; transiently negative counts show as such). O(1)."""
        return self.table.get(t, 0)

    def is_empty(self) -> bool:
        """The frontier is empty (no time with a positive count). O(1)."""
        return not self.frontier

    def counts(self) -> Dict[Any, int]:
        """A copy of the non-zero counts, ``{time: count}``. O(n)."""
        return dict(self.table)

    def _check(self) -> None:
        """Assert the invariant: the frontier is the minimal elements of positive-count times."""
        positive = [t for t, c in self.table.items() if c > 0]
        le = self._le
        minimal = {t for t in positive if not any(u != t and le(u, t) for u in positive)}
        assert set(self.frontier) == minimal, (self.frontier, minimal)
        assert len(self.frontier) == len(minimal)
        assert all(self.table.values()), self.table

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={sorted(self.frontier)!r})"


class _TotalAntichain(MutableAntichain):
    """A :class:`MutableAntichain` of totally ordered times (what ``MutableAntichain(le,
    total=True)`` makes): updates and queries without the partial-order dispatch."""

    __slots__ = ()

    update_iter = MutableAntichain._update_total

    def less_than(self, t: Any) -> bool:
        """The frontier's time is ``< t``. O(1)."""
        e = self.frontier
        return bool(e) and e[0] < t

    def less_equal(self, t: Any) -> bool:
        """The frontier's time is ``<= t``. O(1)."""
        e = self.frontier
        return bool(e) and e[0] <= t
