"""Antichains (frontiers) and MutableAntichain (counts of times, and the frontier they imply)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from ..order import less_equal as _generic_le

__all__ = ["Antichain", "MutableAntichain", "antichain_join", "antichain_meet"]


class _FrontierQueries:
    """``less_equal`` / ``less_than`` of a frontier held in ``self._elements`` (shared by
    :class:`Antichain` and :class:`MutableAntichain`)."""

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

    Comparisons, as in the Differential Dataflow book: ``A.less_equal(t)`` means some ``a <= t`` ("t is at or beyond
    the frontier"); ``A <= B`` is :meth:`le`: every ``b`` has an
    ``a <= b``.

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


class MutableAntichain(_FrontierQueries):
    """A multiset of times with the frontier of those whose count is positive.

    :meth:`update_iter` applies count changes and returns the *changes to the frontier* as
    ``(time, +1)`` (entered) and ``(time, -1)`` (left). Negative counts are allowed
    transiently and are ignored by the frontier.

    Costs: an update that cannot move the frontier is O(len(frontier)); one that can causes a
    rebuild, O(n log n) in the number of distinct times with non-zero counts.

    >>> m = MutableAntichain(); m.update_iter([(3, 1), (5, 1)])
    [(3, 1)]
    >>> m.update_iter([(3, -1)])
    [(3, -1), (5, 1)]
    """

    __slots__ = ("_counts", "_elements", "_le", "_total")

    def __init__(
        self, le: Optional[Callable[[Any, Any], bool]] = None, total: bool = False
    ) -> None:
        self._le = le or _generic_le
        self._counts: Dict[Any, int] = {}
        self._elements: List[Any] = []
        self._total = total
        if total and type(self) is MutableAntichain:
            self.__class__ = _TotalAntichain

    @classmethod
    def from_elem(
        cls, t: Any, le: Optional[Callable[[Any, Any], bool]] = None
    ) -> "MutableAntichain":
        """Holds ``t`` once, so the frontier is ``{t}`` (partial-order mode). O(1)."""
        m = cls(le)
        m._counts[t] = 1
        m._elements = [t]
        return m

    @property
    def frontier(self) -> List[Any]:
        """The current frontier: the minimal times with a positive count (do not mutate)."""
        return self._elements

    def antichain(self) -> Antichain:
        """A copy of the current frontier as an :class:`Antichain`. O(len(frontier))."""
        a = Antichain(le=self._le)
        a._elements = list(self._elements)
        return a

    def update_iter(self, updates: Iterable[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
        """Apply count changes; return the resulting frontier changes.

        O(len(frontier)) per change that cannot move the frontier, plus one rebuild (see the
        class docstring) if any change can.
        """
        if self._total:
            return self._update_total(updates)
        le = self._le
        counts = self._counts
        frontier = self._elements
        rebuild = False
        for t, d in updates:
            if not d:
                continue
            c = counts.get(t, 0) + d
            if c:
                counts[t] = c
            else:
                del counts[t]
            if rebuild:
                continue
            if d > 0:
                # Positive at or beyond a frontier element cannot change the frontier.
                for f in frontier:
                    if le(f, t):
                        break
                else:
                    rebuild = True
            else:
                # Negative only matters at a frontier element.
                if t in frontier:
                    rebuild = True
        if not rebuild:
            return []
        return self._rebuild()

    def _update_total(self, updates: Iterable[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
        # Totally ordered times: the frontier is the least time with a positive count.
        counts = self._counts
        frontier = self._elements
        if frontier:
            old = frontier[0]
            rebuild = False
            for t, d in updates:
                if d:
                    c = counts.get(t, 0) + d
                    if c:
                        counts[t] = c
                    else:
                        del counts[t]
                    if t <= old:
                        rebuild = True
            if not rebuild:
                return []
        else:
            old = None
            for t, d in updates:
                if d:
                    c = counts.get(t, 0) + d
                    if c:
                        counts[t] = c
                    else:
                        del counts[t]
        if not counts:
            new = None
        else:
            new = min(counts)
            if counts[new] <= 0:  # transiently negative counts (several workers): scan
                new = min((t for t, c in counts.items() if c > 0), default=None)
        if new == old:
            return []
        if new is None:
            self._elements = []
            return [(old, -1)]
        self._elements = [new]
        if old is None:
            return [(new, 1)]
        return [(old, -1), (new, 1)]

    def update(self, t: Any, d: int) -> List[Tuple[Any, int]]:
        """Apply one count change; return the frontier changes (costs as :meth:`update_iter`)."""
        return self.update_iter(((t, d),))

    def _rebuild(self) -> List[Tuple[Any, int]]:
        le = self._le
        old = self._elements
        positive = [t for t, c in self._counts.items() if c > 0]
        if len(positive) <= 1:
            new = positive
        else:
            # One pass in sorted order suffices: the sort order extends the partial order.
            positive.sort()
            new = []
            for t in positive:
                for f in new:
                    if le(f, t):
                        break
                else:
                    new.append(t)
        self._elements = new
        if old == new:
            return []
        if len(old) <= 1 and len(new) <= 1:
            changes = [(old[0], -1)] if old else []
            if new:
                changes.append((new[0], 1))
            return changes
        old_set, new_set = set(old), set(new)
        changes = [(t, -1) for t in old if t not in new_set]
        changes.extend((t, 1) for t in new if t not in old_set)
        return changes

    def count_for(self, t: Any) -> int:
        """The count of ``t`` (0 if absent; transiently negative counts show as such). O(1)."""
        return self._counts.get(t, 0)

    def is_empty(self) -> bool:
        """The frontier is empty (no time with a positive count). O(1)."""
        return not self._elements

    def counts(self) -> Dict[Any, int]:
        """A copy of the non-zero counts, ``{time: count}``. O(n)."""
        return dict(self._counts)

    def _check(self) -> None:
        """Assert the invariant: the frontier is the minimal elements of positive-count times."""
        positive = [t for t, c in self._counts.items() if c > 0]
        le = self._le
        minimal = {t for t in positive if not any(u != t and le(u, t) for u in positive)}
        assert set(self._elements) == minimal, (self._elements, minimal)
        assert len(self._elements) == len(minimal)

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={sorted(self._elements)!r})"


class _TotalAntichain(MutableAntichain):
    """A :class:`MutableAntichain` of totally ordered times (what ``MutableAntichain(le,
    total=True)`` makes): updates and queries without the partial-order dispatch."""

    __slots__ = ()

    update_iter = MutableAntichain._update_total

    def less_than(self, t: Any) -> bool:
        """The frontier's time is ``< t``. O(1)."""
        e = self._elements
        return bool(e) and e[0] < t

    def less_equal(self, t: Any) -> bool:
        """The frontier's time is ``<= t``. O(1)."""
        e = self._elements
        return bool(e) and e[0] <= t
