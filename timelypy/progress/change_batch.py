"""ChangeBatch: a consolidating bag of ``(item, delta)`` changes."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Tuple

from .kernel import update_many

__all__ = ["ChangeBatch"]


class ChangeBatch:
    """Accumulates integer deltas per item; items whose deltas sum to zero disappear.

    Backed by a dict (cost O(1) per update). :meth:`drain` and :meth:`items` return the
    non-zero entries sorted by item (Python's order on the items, which for timestamps is a
    total order extending the partial order), so that results are deterministic.

    >>> b = ChangeBatch(); b.update(3, 1); b.update(1, 2); b.update(3, -1); b.drain()
    [(1, 2)]
    """

    __slots__ = ("counts",)

    def __init__(self, pairs: Iterable[Tuple[Any, int]] = ()) -> None:
        self.counts: Dict[Any, int] = {}
        """The live count table ``{item: non-zero count}``: hot loops test it for emptiness
        without a call (``if batch.counts:``) and may write to it in place under the count-table
        contract of :mod:`timelypy.progress.kernel`."""
        update_many(self.counts, pairs)

    def update(self, item: Any, delta: int) -> None:
        """Add ``delta`` to ``item``'s count. O(1)."""
        if delta:  # the count-table contract's full form, written out to save a call
            counts = self.counts
            c = counts.get(item, 0) + delta
            if c:
                counts[item] = c
            else:
                del counts[item]

    def extend(self, pairs: Iterable[Tuple[Any, int]]) -> None:
        """Add every ``(item, delta)`` of ``pairs``. O(len(pairs))."""
        update_many(self.counts, pairs)

    def is_empty(self) -> bool:
        """True when every count is zero. O(1)."""
        return not self.counts

    def __bool__(self) -> bool:
        return bool(self.counts)

    def __len__(self) -> int:
        return len(self.counts)

    def get(self, item: Any) -> int:
        """The current count of ``item`` (0 if absent). O(1)."""
        return self.counts.get(item, 0)

    def items(self) -> List[Tuple[Any, int]]:
        """Non-zero ``(item, count)`` pairs, sorted by item. O(n log n)."""
        try:
            return sorted(self.counts.items())
        except TypeError:
            return sorted(self.counts.items(), key=lambda kv: repr(kv[0]))

    def __iter__(self) -> Iterator[Tuple[Any, int]]:
        return iter(self.items())

    def drain(self) -> List[Tuple[Any, int]]:
        """Return the sorted non-zero pairs and empty the batch. O(n log n)."""
        out = self.items()
        self.counts.clear()
        return out

    def drain_unsorted(self) -> List[Tuple[Any, int]]:
        """Like :meth:`drain` without sorting (for hot paths where order does not matter). O(n)."""
        out = list(self.counts.items())
        self.counts.clear()
        return out

    def drain_into(self, other: "ChangeBatch") -> None:
        """Move every change into ``other``, leaving this batch empty. O(n)."""
        if self.counts:
            other.extend(self.counts.items())
            self.counts.clear()

    def clear(self) -> None:
        """Discard every change."""
        self.counts.clear()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChangeBatch) and other.counts == self.counts

    def __repr__(self) -> str:
        return f"ChangeBatch({self.items()!r})"
