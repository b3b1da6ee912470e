"""Decoded segments of a column batch: its dictionary, filled a range of keys at a time.

A column batch's ``key -> [(val, time, diff), ...]`` is decoded a segment of distinct keys at a
time, as look-ups by key first reach them: a large batch read key by key (the load's batch
behind a closed loop's small ones) decodes the parts it reads, not the whole batch at once.
:func:`decode_range` makes the dictionary of a range of distinct keys from the sorted columns;
:class:`SegmentDict` is the dictionary a :class:`~.column_batch.ColumnBatch` answers from once
its look-ups are many.
"""

from __future__ import annotations

from bisect import bisect_right
from functools import partial
from typing import Any, Dict, List, Optional

import numpy as np

from .batch import BatchData, Vals
from .layout import Layout

__all__ = ["SEGMENT_KEYS", "SegmentDict", "decode_range"]

SEGMENT_KEYS = 256
"""Distinct keys per segment a column batch decodes when a look-up first needs it: a closed
loop probing a few keys of a large batch decodes the parts it reads (about 40 µs each, the
cost of some twenty look-ups by binary search), not the whole batch at once (tens of
milliseconds per 10^5 updates)."""


def decode_range(
    key_layout: Layout,
    val_layout: Layout,
    key_cols: List[np.ndarray],
    val_cols: List[np.ndarray],
    times: np.ndarray,
    diffs: np.ndarray,
    starts: np.ndarray,
    first: int,
    end: int,
) -> BatchData:
    """``key -> [(val, time, diff), ...]`` of the distinct keys ``first .. end - 1`` of sorted
    columns (``starts``: the first row of each distinct key)."""
    count = len(times)
    lo = int(starts[first]) if first < len(starts) else count
    hi = int(starts[end]) if end < len(starts) else count
    keys = key_layout.decode([col[starts[first:end]] for col in key_cols], len(starts[first:end]))
    n = hi - lo
    vals = val_layout.decode([c[lo:hi] for c in val_cols], n)
    triples = list(zip(vals, times[lo:hi].tolist(), diffs[lo:hi].tolist()))
    if len(keys) == n:  # one update per key: the dictionary made in C
        return dict(zip(keys, map(list, zip(triples))))
    bounds = (starts[first:end] - lo).tolist() + [n]
    data: Dict[Any, Vals] = {}
    for i, key in enumerate(keys):
        data[key] = triples[bounds[i] : bounds[i + 1]]
    return data


class SegmentDict(Dict[Any, Vals]):
    """A column batch's ``key -> [(val, time, diff), ...]``, filled a segment of
    :data:`SEGMENT_KEYS` keys at a time: ``d[key]`` is a dictionary hit (in C) once the key's
    segment is decoded; a miss (``__missing__``) finds the segment by bisection in the
    segments' first keys, decodes it, and answers None for a key the batch does not hold. A key
    not comparable with the batch's keys decodes every segment (then equal keys of other
    types are found as in the whole dictionary). It holds the columns, not the batch (no
    reference cycle)."""

    __slots__ = ("firsts", "decoded", "left", "decode")

    def __init__(self, firsts: List[Any], decode: "partial[BatchData]"):
        super().__init__()
        self.firsts = firsts
        self.decoded = [False] * len(firsts)
        self.left = len(firsts)
        self.decode = decode

    def __missing__(self, key: Any) -> Optional[Vals]:
        if not self.left:
            return None
        try:
            j = bisect_right(self.firsts, key) - 1
        except TypeError:  # not comparable with the keys: decode them all
            for j in range(len(self.firsts)):
                self._fill(j)
            return self.get(key)
        if j < 0 or self.decoded[j]:
            return None
        self._fill(j)
        return self.get(key)

    def _fill(self, j: int) -> None:
        if not self.decoded[j]:
            self.decoded[j] = True
            self.left -= 1
            self.update(self.decode(j * SEGMENT_KEYS, (j + 1) * SEGMENT_KEYS))
