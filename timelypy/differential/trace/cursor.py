"""Cursors: sequential access to batches by key, then by value, then by (time, diff)."""

from __future__ import annotations

import heapq
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

from ..kernel.consolidation import accumulate
from .batch import BatchReader

__all__ = ["Cursor"]

KeyEntry = Tuple[Any, List[Tuple[Any, List[Tuple[Any, int]]]]]
"""``(key, [(val, [(time, diff), ...]), ...])``."""


class Cursor:
    """A cursor over several batches at once, in the vocabulary of differential-dataflow's
    ``Cursor`` trait: it walks keys in sorted order; at each key, values in sorted order; at
    each value, :meth:`map_times` visits the ``(time, diff)`` pairs, consolidated and sorted.
    Keys whose values all cancel are skipped.

    >>> from timelypy.differential.trace import Batch
    >>> c = Cursor([Batch({1: [("a", 0, 1)], 2: [("b", 0, 1)]}, [0], [1])])
    >>> c.key(), c.val()
    (1, 'a')
    >>> c.step_key(); c.key(), c.val()
    (2, 'b')

    Keys (and values) must be mutually comparable. Cost: O(n log n) for the first pass over a
    batch (its sorted key list is then cached until the batch changes), plus a k-way merge;
    O(updates of the key) to arrive at a key.
    """

    __slots__ = ("_batches", "_keys", "_key_index", "_vals", "_val_index")

    def __init__(self, batches: Sequence[BatchReader]):
        self._batches = list(batches)
        keys: List[Any] = []
        previous = object()
        for key in heapq.merge(*[b.sorted_keys() for b in self._batches]):
            if key != previous:
                keys.append(key)
                previous = key
        self._keys = keys
        self._key_index = 0
        self._vals: List[Tuple[Any, List[Tuple[Any, int]]]] = []
        self._val_index = 0
        self._settle()

    # ------------------------------------------------------------------ keys
    def key_valid(self) -> bool:
        """The cursor is at a key (not past the last one)."""
        return self._key_index < len(self._keys)

    def key(self) -> Any:
        """The current key."""
        return self._keys[self._key_index]

    def step_key(self) -> None:
        """Move to the next key (with at least one non-cancelled value)."""
        self._key_index += 1
        self._settle()

    def seek_key(self, key: Any) -> None:
        """Move forward to the first key ``>= key``."""
        keys, i = self._keys, self._key_index
        while i < len(keys) and keys[i] < key:
            i += 1
        self._key_index = i
        self._settle()

    def rewind_keys(self) -> None:
        """Back to the first key."""
        self._key_index = 0
        self._settle()

    # ------------------------------------------------------------------ values
    def val_valid(self) -> bool:
        """The cursor is at a value of the current key."""
        return self._val_index < len(self._vals)

    def val(self) -> Any:
        """The current value."""
        return self._vals[self._val_index][0]

    def step_val(self) -> None:
        """Move to the next value of the current key."""
        self._val_index += 1

    def seek_val(self, val: Any) -> None:
        """Move forward to the first value ``>= val`` of the current key."""
        vals, i = self._vals, self._val_index
        while i < len(vals) and vals[i][0] < val:
            i += 1
        self._val_index = i

    def rewind_vals(self) -> None:
        """Back to the first value of the current key."""
        self._val_index = 0

    def map_times(self, logic: Callable[[Any, int], None]) -> None:
        """Call ``logic(time, diff)`` for the current value's updates, in time order."""
        for t, r in self._vals[self._val_index][1]:
            logic(t, r)

    # ------------------------------------------------------------------ whole keys
    def entry(self) -> KeyEntry:
        """The current key with all its values and their ``(time, diff)`` lists."""
        return self._keys[self._key_index], list(self._vals)

    def __iter__(self) -> Iterator[KeyEntry]:
        """Every remaining key as :meth:`entry`, stepping the cursor."""
        while self.key_valid():
            yield self.entry()
            self.step_key()

    def _settle(self) -> None:
        """Load the current key's values, skipping keys whose updates all cancel."""
        keys, batches = self._keys, self._batches
        while self._key_index < len(keys):
            key = keys[self._key_index]
            totals = accumulate(((v, t), r) for b in batches for v, t, r in b.get(key) or ())
            by_val: Dict[Any, List[Tuple[Any, int]]] = {}
            for (v, t), r in totals.items():
                by_val.setdefault(v, []).append((t, r))
            vals = [(v, sorted(by_val[v])) for v in sorted(by_val)]
            if vals:
                self._vals, self._val_index = vals, 0
                return
            self._key_index += 1
        self._vals, self._val_index = [], 0
