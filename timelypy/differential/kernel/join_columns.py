"""The join's column kernel: sort-merge matching of column batches and the matched outputs.

It matches a column batch's keys against column batches, in chunks, and builds the output
records of the matched pairs.

This is the column twin of :mod:`.join` for batches kept as numpy columns (see
:mod:`.columns`): keys sorted in both inputs, times totally ordered ``int64``, diffs ``int64``.

Contract. :func:`key_ranges` gives, for each distinct key of ``mine`` (a sorted
:func:`.columns.search_array` of them), the rows ``[lo, hi)`` of the equal keys in ``theirs``
(the sorted search array of another batch's updates). :func:`pair_offsets` gives the running
count of matching pairs over the keys of ``mine`` (``offsets[k]``: the pairs of the keys before
``k``; one entry more than keys), given each key's rows ``[starts, ends)`` in ``mine`` and the
ranges against every other batch, and which of those batches match any key at all.
:func:`chunk_end` gives the end ``e > k`` of the keys from ``k`` whose pairs make at least
``fuel`` (or every key left).
:func:`expand_pairs` gives the index pairs ``(i, j)`` of those keys against one other batch,
``i``-major (``i`` rows of ``mine``, ``j`` rows of ``theirs``). :func:`pair_updates` gives the
joined times (``max(t1, t2)``) and diffs (``r1 * r2``) of such pairs as Python lists.
:func:`range_updates` gives, for a few keys and their ranges in one other batch, the
dictionary ``key -> [(val, time, diff), ...]`` of the keys with updates there (what the object
kernels of :mod:`.join` read), decoding only those rows (``vals_of(lo, hi)`` decodes the values
of rows ``[lo, hi)``).

A *column product* (:func:`column_pairs`, :func:`column_semijoin_pairs`, :func:`column_mapped`,
:func:`column_core`), called as ``product(first, logic)``, returns a *builder*
``build(keys, mine, theirs, times, diffs)`` over equally long lists (one entry per matched pair:
the key, the value of ``mine``'s update, of ``theirs``', the joined time and diff) returning an
iterable (read once: the pairs' products are lazy, so a caller that only inspects them never
holds them all) of the output updates ``(record, time, diff)`` exactly as the products of
:mod:`.join` make them
(``record`` is ``(key, (v1, v2))``, ``(key, v1)``, ``logic(key, v1, v2)`` or each item of it,
where ``v1`` is the first input's value: ``mine``'s when ``first``, else ``theirs``').

Invariants: nothing given is changed; equal inputs give equal outputs. Cost: O(k log m) per
other batch for the ranges of ``k`` keys against ``m`` updates, O(p) numpy work for ``p``
pairs, and the output records built by ``zip`` / ``map`` over Python lists.

Example:

>>> import numpy as np
>>> mine, starts = np.array([1, 2]), np.array([0, 1])
>>> theirs = np.array([1, 1, 3])
>>> lo, hi = key_ranges(mine, theirs)
>>> offsets, hit = pair_offsets(starts, np.array([1, 2]), [(lo, hi)])
>>> offsets.tolist(), hit, chunk_end(offsets, 0, 1)
([0, 2, 2], [True], 1)
>>> [a.tolist() for a in expand_pairs(starts[:1], np.array([1]), lo[:1], hi[:1])]
[[0, 0], [0, 1]]
>>> list(column_pairs(True)([1], ["a"], ["b"], [3], [2]))
[((1, ('a', 'b')), 3, 2)]
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, cast

import numpy as np

from .columns import sort_consolidate

__all__ = [
    "chunk_end",
    "column_core",
    "column_mapped",
    "column_pairs",
    "column_semijoin_pairs",
    "consolidate_pairs",
    "expand_pairs",
    "key_ranges",
    "pair_offsets",
    "pair_updates",
    "range_updates",
    "repeats_records",
]

Builder = Callable[[List[Any], List[Any], List[Any], List[Any], List[Any]], Iterable[Any]]
"""``build(keys, mine, theirs, times, diffs)``: the output updates of the matched pairs (an
iterable read once)."""
Ranges = Tuple[np.ndarray, np.ndarray]
"""``(lo, hi)``: per key of ``mine``, its equal keys' rows ``[lo, hi)`` in another batch."""


def key_ranges(mine_keys: np.ndarray, theirs: np.ndarray) -> Ranges:
    """Per distinct key of ``mine_keys``, the rows ``[lo, hi)`` of equal keys in ``theirs``."""
    return np.searchsorted(theirs, mine_keys, "left"), np.searchsorted(theirs, mine_keys, "right")


def pair_offsets(
    starts: np.ndarray, ends: np.ndarray, ranges: Sequence[Ranges]
) -> Tuple[np.ndarray, List[bool]]:
    """The running count of matching pairs before each key (one entry more than keys), and
    whether each range matches any key."""
    matched = np.zeros(len(starts), dtype=np.int64)
    hit: List[bool] = []
    for lo, hi in ranges:
        n = hi - lo
        if n.any():
            matched += n
            hit.append(True)
        else:
            hit.append(False)
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum((ends - starts) * matched, out=offsets[1:])
    return offsets, hit


def chunk_end(offsets: np.ndarray, start: int, fuel: int) -> int:
    """The end of the keys from ``start`` whose pairs make at least ``fuel`` (at least one
    key; every key left when they make less)."""
    keys = len(offsets) - 1
    end = int(np.searchsorted(offsets, offsets[start] + max(fuel, 1), "left"))
    return min(max(end, start + 1), keys)


def expand_pairs(
    starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> Tuple[np.ndarray, np.ndarray]:
    """Index pairs ``(i, j)``, ``i``-major, of the rows ``[starts, ends)`` of ``mine`` and
    ``[lo, hi)`` of ``theirs``, key by key."""
    n_theirs = hi - lo
    hit = n_theirs > 0
    if not hit.all():
        starts, ends, lo, n_theirs = starts[hit], ends[hit], lo[hit], n_theirs[hit]
    sizes = (ends - starts) * n_theirs
    total = int(sizes.sum())
    if not total:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    group = np.repeat(np.arange(len(sizes)), sizes)
    position = np.arange(total) - (np.cumsum(sizes) - sizes)[group]
    width = n_theirs[group]
    return starts[group] + position // width, lo[group] + position % width


def pair_updates(
    times1: np.ndarray, diffs1: np.ndarray, times2: np.ndarray, diffs2: np.ndarray
) -> Tuple[List[Any], List[Any]]:
    """The joined times (``max``) and diffs (products) of matched pairs' updates."""
    return np.maximum(times1, times2).tolist(), (diffs1 * diffs2).tolist()


CONSOLIDATE_LIMIT = 1 << 31
"""Matched pairs are consolidated only while every product of diffs is below this in
magnitude, so that no sum of them can leave ``int64``."""


def consolidate_pairs(
    parts: Sequence[Sequence[np.ndarray]], times: np.ndarray, diffs: np.ndarray
) -> Optional[Tuple[List[List[np.ndarray]], np.ndarray, np.ndarray]]:
    """The matched pairs with equal columns and time summed, zeros dropped: ``parts`` are
    lists of equally long columns (the keys', ``mine``'s values', ``theirs``' values'),
    returned in the same grouping; None when a product of diffs is too large to sum safely.

    A pair of updates and the pair of their retractions at the same joined time cancel here
    (the history of a key not yet compacted meets a change at a later time twice)."""
    if len(diffs) and not (-CONSOLIDATE_LIMIT < diffs.min() and diffs.max() < CONSOLIDATE_LIMIT):
        return None
    cols, times, diffs = sort_consolidate([col for part in parts for col in part], times, diffs)
    grouped, at = [], 0
    for part in parts:
        grouped.append(cols[at : at + len(part)])
        at += len(part)
    return grouped, times, diffs


def repeats_records(cols: Sequence[np.ndarray]) -> bool:
    """Sorted columns hold some row twice in a row (in a batch of consolidated updates sorted
    by record and time: a record at several times)."""
    n = len(cols[0]) if cols else 0
    if n < 2:
        return False
    same = cols[0][1:] == cols[0][:-1]
    for col in cols[1:]:
        same &= col[1:] == col[:-1]
    return bool(same.any())


def range_updates(
    keys: List[Any],
    ranges: Ranges,
    vals_of: Callable[[int, int], List[Any]],
    times: np.ndarray,
    diffs: np.ndarray,
) -> Dict[Any, List[Tuple[Any, Any, int]]]:
    """``key -> [(val, time, diff), ...]`` of the ``keys`` found in another batch's ranges."""
    found: Dict[Any, List[Tuple[Any, Any, int]]] = {}
    for key, lo, hi in zip(keys, ranges[0].tolist(), ranges[1].tolist()):
        if lo < hi:
            found[key] = list(zip(vals_of(lo, hi), times[lo:hi].tolist(), diffs[lo:hi].tolist()))
    return found


def column_pairs(first: bool, logic: Optional[Callable] = None) -> Builder:
    """``(key, (v1, v2))`` for every matched pair."""
    if first:

        def build(keys: List, mine: List, theirs: List, times: List, diffs: List) -> Iterable[Any]:
            return zip(zip(keys, zip(mine, theirs)), times, diffs)
    else:

        def build(keys: List, mine: List, theirs: List, times: List, diffs: List) -> Iterable[Any]:
            return zip(zip(keys, zip(theirs, mine)), times, diffs)

    return build


def column_semijoin_pairs(first: bool, logic: Optional[Callable] = None) -> Builder:
    """``(key, v1)`` for every matched pair (the second input's values are ``()``)."""
    if first:

        def build(keys: List, mine: List, theirs: List, times: List, diffs: List) -> Iterable[Any]:
            return zip(zip(keys, mine), times, diffs)
    else:

        def build(keys: List, mine: List, theirs: List, times: List, diffs: List) -> Iterable[Any]:
            return zip(zip(keys, theirs), times, diffs)

    return build


def column_mapped(first: bool, logic: Optional[Callable] = None) -> Builder:
    """``logic(key, v1, v2)`` for every matched pair."""
    f = cast(Callable, logic)
    if first:

        def build(keys: List, mine: List, theirs: List, times: List, diffs: List) -> Iterable[Any]:
            return zip(map(f, keys, mine, theirs), times, diffs)
    else:

        def build(keys: List, mine: List, theirs: List, times: List, diffs: List) -> Iterable[Any]:
            return zip(map(f, keys, theirs, mine), times, diffs)

    return build


def column_core(first: bool, logic: Optional[Callable] = None) -> Builder:
    """Every record of the iterable ``logic(key, v1, v2)`` for every matched pair."""
    f = cast(Callable, logic)

    def build(keys: List, mine: List, theirs: List, times: List, diffs: List) -> Iterable[Any]:
        out: List[Any] = []
        append = out.append
        pairs = zip(mine, theirs) if first else zip(theirs, mine)
        for key, (v1, v2), t, r in zip(keys, pairs, times, diffs):
            for x in f(key, v1, v2):
                append((x, t, r))
        return out

    return build


from timelypy.kernels import adopt  # noqa: E402  (last: a drop-in replaces the names above)

adopt(__name__, globals())
