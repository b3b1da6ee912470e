"""The column kernel: consolidation, merging, compaction and key matching on numpy columns.

Where records are fixed-width (see :mod:`timelypy.differential.trace.layout`) a batch keeps its
updates as columns: ``cols`` (the key's columns, then the value's), ``times`` (``int64``,
totally ordered times) and ``diffs`` (``int64``). These kernels are the column twins of
:mod:`.consolidation`, :mod:`.grouping` and :mod:`.merge`, and the matching half of
:mod:`.join`.

Contract. Inputs are never changed; outputs are new arrays. :func:`sort_consolidate` returns the
updates sorted by ``(cols..., time)`` (lexicographically, as Python orders the decoded tuples),
one per distinct ``(cols, time)`` with the summed diff, none zero. :func:`merge_advance` does the
same for several parts concatenated, each time first advanced to ``since`` (``max(t, since)``:
totally ordered times; None leaves times as they are). :func:`key_starts` gives the first index
of each distinct key of sorted columns; :func:`search_array` one array ordering keys as the
columns do (the column itself for a one-column key, a structured array otherwise), for
``numpy.searchsorted``. :func:`match_pairs` gives, for keys sorted in both inputs, the index
pairs ``(i, j)`` of every update ``i`` of ``mine`` and ``j`` of ``theirs`` with equal keys, in
``i``-major order. :func:`compact_sorted` advances the times of updates already sorted and
consolidated (one batch) to ``since``: ``max(t, since)`` keeps their order, so it only sums
neighbours that became equal, without a sort (and returns its inputs when no time is below
``since``). :func:`diffs_fit` says whether diffs are small enough that sums and products
of them cannot overflow ``int64`` (callers fall back to the object path when not).

Strings (``str`` or ``bytes``) are columns of ``int32`` *codes* into a *dictionary*: an object
array of distinct strings, sorted (Python's order, so codes order as their strings do and every
kernel above works on the codes of one dictionary). :func:`dictionary_encode` codes a column of
strings (Arrow hashes large ones where the program imported pyarrow; :func:`sorted_codes` sorts a
dictionary given in any order); :func:`unify_dictionaries` gives the sorted union of several
dictionaries and, for each, the ``int32`` map of its codes into the union (None: the same
codes), so that batches of different dictionaries concatenate; :func:`prune_dictionary` drops
the strings no code uses any more (after a consolidation); :func:`translate_codes` maps codes of
one dictionary into another's, ``-1`` for strings the other lacks (which then match nothing).
Invariants: equal inputs give equal outputs (deterministic); nothing is aliased but ``cols``
entries a caller passes through unchanged. Cost: O(n log n) for sorting (``numpy.lexsort``),
O(n) for the rest, O(k log m) for matching ``k`` keys against ``m`` updates.
"""

from __future__ import annotations

import sys
from itertools import repeat
from typing import List, Optional, Sequence, Tuple

import numpy as np

__all__ = [
    "ARROW_CODING_FROM",
    "DIFF_LIMIT",
    "compact_sorted",
    "dictionary_encode",
    "diffs_fit",
    "key_starts",
    "match_pairs",
    "merge_advance",
    "prune_dictionary",
    "search_array",
    "sort_consolidate",
    "sorted_codes",
    "translate_codes",
    "unify_dictionaries",
]

Columns = List[np.ndarray]
Updates = Tuple[Columns, np.ndarray, np.ndarray]
"""``(cols, times, diffs)``."""

DIFF_LIMIT = 1 << 31
"""Diffs below this in magnitude: a product of two, or a sum of up to 2**31 of them, fits int64."""


def diffs_fit(diffs: np.ndarray) -> bool:
    """Every diff is below :data:`DIFF_LIMIT` in magnitude."""
    if not len(diffs):
        return True
    return bool(-DIFF_LIMIT < diffs.min() and diffs.max() < DIFF_LIMIT)


def _changes(cols: Sequence[np.ndarray], n: int) -> np.ndarray:
    """``change[i]``: row ``i`` differs from row ``i - 1`` in some column (row 0 always)."""
    change = np.empty(n, dtype=bool)
    if not n:
        return change
    change[0] = True
    if not cols:
        change[1:] = False
        return change
    np.not_equal(cols[0][1:], cols[0][:-1], out=change[1:])
    for col in cols[1:]:
        change[1:] |= col[1:] != col[:-1]
    return change


def _packed(cols: Sequence[np.ndarray]) -> Optional[np.ndarray]:
    """One ``int64`` per row ordering the rows as the columns do lexicographically (each
    column offset by its minimum and shifted into its own bits), or None when a column is a
    float or the ranges need more than 63 bits."""
    parts = []
    bits = 0
    for col in cols:
        if col.dtype.kind == "f":
            return None
        if col.dtype.kind == "b":
            parts.append((col.astype(np.int64), 0, 1))
            bits += 1
            continue
        low, high = int(col.min()), int(col.max())
        width = (high - low).bit_length()
        parts.append((col, low, width))
        bits += width
    if bits > 63:
        return None
    packed = np.zeros(len(cols[0]), dtype=np.int64)
    for col, low, width in parts:
        if width:
            packed <<= width
            packed |= col - low if low else col
    return packed


def sort_consolidate(cols: Columns, times: np.ndarray, diffs: np.ndarray) -> Updates:
    """Sort by ``(cols, time)``, sum the diffs of equal rows, drop the zeros."""
    n = len(times)
    if not n:
        return list(cols), times, diffs
    everything = list(cols) + [times]
    packed = _packed(everything)
    if packed is not None:
        # a stable sort of one int64 column: runs already sorted (a merge's inputs) cost O(n)
        order = np.argsort(packed, kind="stable")
        packed = packed[order]
        change = np.empty(n, dtype=bool)
        change[0] = True
        np.not_equal(packed[1:], packed[:-1], out=change[1:])
        del packed
    else:
        order = np.lexsort(everything[::-1])
        change = _changes([col[order] for col in everything], n)
    starts = np.flatnonzero(change)
    summed = diffs[order]
    if len(starts) != n:
        summed = np.add.reduceat(summed, starts)
        order = order[starts]
    keep = summed != 0
    if not keep.all():
        order, summed = order[keep], summed[keep]
    # each column gathered once, by the rows kept (no sorted copy of every column first)
    return [col[order] for col in cols], times[order], summed


MERGE_RANGE_ROWS = 1 << 16
"""A merge of more updates than this runs range by range of its first column (see
:func:`merge_advance`)."""


def merge_advance(parts: Sequence[Updates], since: Optional[int]) -> Updates:
    """The parts (each sorted and consolidated) concatenated, their times advanced to
    ``since``, sorted and consolidated. A large merge runs range by range of the first
    column's values (about :data:`MERGE_RANGE_ROWS` updates each), into output columns made
    once at the size of the inputs and shrunk in place at the end: its temporaries (the
    concatenation, the sort's order and sums) are a range's, not the whole merge's, so a
    trace's largest merge needs about its inputs and its output in memory, not twice that."""
    total = sum(len(p[1]) for p in parts)
    bounds = _range_bounds(parts, total)
    if bounds is None:
        return _merge_all(parts, since)
    width = len(parts[0][0])
    out_cols = [
        np.empty(total, dtype=np.result_type(*[p[0][c] for p in parts])) for c in range(width)
    ]
    out_times = np.empty(total, dtype=np.result_type(*[p[1] for p in parts]))
    out_diffs = np.empty(total, dtype=np.result_type(*[p[2] for p in parts]))
    cuts = [np.searchsorted(p[0][0], bounds, "left").tolist() + [len(p[1])] for p in parts]
    lows = [0] * len(parts)
    made = 0
    for r in range(len(bounds) + 1):
        pieces = []
        for k, (cols, times, diffs) in enumerate(parts):
            lo, hi = lows[k], cuts[k][r]
            if hi > lo:
                pieces.append(([c[lo:hi] for c in cols], times[lo:hi], diffs[lo:hi]))
            lows[k] = hi
        if not pieces:
            continue
        cols, times, diffs = _merge_all(pieces, since)
        end = made + len(times)
        for out, col in zip(out_cols, cols):
            out[made:end] = col
        out_times[made:end] = times
        out_diffs[made:end] = diffs
        made = end
    for out in (*out_cols, out_times, out_diffs):
        out.resize(made, refcheck=False)  # (made here: no view of it exists)
    return out_cols, out_times, out_diffs


def _range_bounds(parts: Sequence[Updates], total: int) -> Optional[np.ndarray]:
    """Values of the first column cutting the merge of ``parts`` into ranges of about
    :data:`MERGE_RANGE_ROWS` updates (taken from the largest part, distinct, increasing),
    or None to merge them at once (a small merge, or no column to cut on)."""
    if total <= MERGE_RANGE_ROWS or not parts[0][0]:
        return None
    largest = max(parts, key=lambda p: len(p[1]))[0][0]
    step = max(1, MERGE_RANGE_ROWS * len(largest) // total)
    picked = largest[step::step]
    if not len(picked):
        return None
    keep = np.empty(len(picked), dtype=bool)
    keep[0] = True
    np.not_equal(picked[1:], picked[:-1], out=keep[1:])
    return picked[keep]


def _merge_all(parts: Sequence[Updates], since: Optional[int]) -> Updates:
    """:func:`merge_advance` at once: the parts concatenated (copies: advanced in place)."""
    width = len(parts[0][0])
    cols = [np.concatenate([p[0][c] for p in parts]) for c in range(width)]
    times = np.concatenate([p[1] for p in parts])
    diffs = np.concatenate([p[2] for p in parts])
    if since is not None:
        np.maximum(times, since, out=times)
    return sort_consolidate(cols, times, diffs)


def compact_sorted(cols: Columns, times: np.ndarray, diffs: np.ndarray, since: int) -> Updates:
    """Sorted, consolidated updates with their times advanced to ``since``, consolidated."""
    n = len(times)
    if not n or times.min() >= since:
        return list(cols), times, diffs
    times = np.maximum(times, since)
    change = _changes(list(cols) + [times], n)
    if change.all():
        return list(cols), times, diffs
    starts = np.flatnonzero(change)
    summed = np.add.reduceat(diffs, starts)
    keep = summed != 0
    rows = starts[keep]
    return [col[rows] for col in cols], times[rows], summed[keep]


def key_starts(key_cols: Columns, n: int) -> np.ndarray:
    """The index of the first update of each distinct key (the columns are sorted)."""
    return np.flatnonzero(_changes(key_cols, n))


def search_array(key_cols: Columns) -> np.ndarray:
    """One array ordered as the key columns are, for ``numpy.searchsorted``."""
    if len(key_cols) == 1:
        return key_cols[0]
    n = len(key_cols[0]) if key_cols else 0
    dtype = np.dtype([(f"f{i}", col.dtype) for i, col in enumerate(key_cols)])
    out = np.empty(n, dtype=dtype)
    for i, col in enumerate(key_cols):
        out[f"f{i}"] = col
    return out


def match_pairs(
    mine_keys: np.ndarray,
    mine_starts: np.ndarray,
    mine_count: int,
    theirs: np.ndarray,
) -> Tuple[np.ndarray, np.ndarray]:
    """Index pairs ``(i, j)`` of equal keys: ``mine_keys`` are the distinct keys of ``mine``
    (in a :func:`search_array`, one per start of ``mine_starts``; ``mine_count`` updates in
    all), ``theirs`` a sorted :func:`search_array` of the other side's updates."""
    lo = np.searchsorted(theirs, mine_keys, "left")
    hi = np.searchsorted(theirs, mine_keys, "right")
    ends = np.empty_like(mine_starts)
    ends[:-1] = mine_starts[1:]
    if len(ends):
        ends[-1] = mine_count
    n_theirs = hi - lo
    hit = n_theirs > 0
    starts, ends, lo, n_theirs = mine_starts[hit], ends[hit], lo[hit], n_theirs[hit]
    n_mine = ends - starts
    sizes = n_mine * n_theirs
    total = int(sizes.sum())
    if not total:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    group = np.repeat(np.arange(len(sizes)), sizes)
    offsets = np.cumsum(sizes) - sizes
    position = np.arange(total) - offsets[group]
    width = n_theirs[group]
    return starts[group] + position // width, lo[group] + position % width


def _objects(values: Sequence[object]) -> np.ndarray:
    return np.fromiter(values, object, len(values))


ARROW_CODING_FROM = 2048
"""Strings per column from which :func:`dictionary_encode` lets Arrow hash them (when the
program has imported pyarrow): in C, 1.2x (10^3 distinct strings per 10^6) to 3x (10^5
distinct) faster than a Python dictionary; below it the calls cost more than they save."""


def dictionary_encode(column: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(codes, dictionary)`` of an object column of strings of one type: the sorted distinct
    strings, and each row's index among them (``int32``)."""
    if len(column) >= ARROW_CODING_FROM:
        coded = _arrow_encode(column)
        if coded is not None:
            return coded
    values = column.tolist()
    distinct = list(dict.fromkeys(values))  # hashing in C; only the distinct strings are sorted
    distinct.sort()
    index = dict(zip(distinct, range(len(distinct))))
    codes = np.fromiter(map(index.__getitem__, values), np.int32, len(values))
    return codes, _objects(distinct)


def _arrow_encode(column: np.ndarray) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """:func:`dictionary_encode` hashed by Arrow, or None (pyarrow not imported by the
    program: importing it costs ~0.5 s and tens of MB once; or strings UTF-8 cannot hold:
    lone surrogates)."""
    pa = sys.modules.get("pyarrow")
    if pa is None:
        return None
    import pyarrow.compute as pc

    kind = pa.binary() if type(column[0]) is bytes else pa.string()
    try:
        encoded = pc.dictionary_encode(pa.array(column, kind))
    except (UnicodeEncodeError, pa.ArrowException):
        return None
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    return sorted_codes(encoded.dictionary.to_pylist(), indices)


def sorted_codes(words: List[object], indices: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(codes, dictionary)`` of rows given as ``indices`` into ``words`` (strings of one
    type, maybe some twice or unused): the sorted distinct words, and each row's code among
    them (``int32``).

    >>> codes, words = sorted_codes(["b", "a", "b"], np.array([0, 1, 2, 0]))
    >>> codes.tolist(), words.tolist()
    ([1, 0, 1, 1], ['a', 'b'])
    """
    distinct: List[object] = sorted(set(words))  # type: ignore[type-var]
    if distinct == words:
        return indices.astype(np.int32, copy=False), _objects(distinct)
    index = dict(zip(distinct, range(len(distinct))))
    remap = np.fromiter(map(index.__getitem__, words), np.int32, len(words))
    return remap[indices], _objects(distinct)


def translate_codes(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per string of the dictionary ``source``, its code in the dictionary ``target``, or -1
    where ``target`` lacks it (``int32``)."""
    if source is target:
        return np.arange(len(source), dtype=np.int32)
    if not len(target):
        return np.full(len(source), -1, np.int32)
    if len(source) * 8 > len(target):  # many strings: hashing beats ~log2(V) comparisons each
        index = dict(zip(target.tolist(), range(len(target))))
        return np.fromiter(map(index.get, source.tolist(), repeat(-1)), np.int32, len(source))
    at = np.searchsorted(target, source).astype(np.int32)
    np.minimum(at, len(target) - 1, out=at)
    found = target[at] == source
    if not isinstance(found, np.ndarray):  # (numpy compares empty object arrays to a scalar)
        found = np.zeros(len(source), dtype=bool)
    at[~found.astype(bool)] = -1
    return at


def unify_dictionaries(
    dictionaries: Sequence[np.ndarray],
) -> Tuple[np.ndarray, List[Optional[np.ndarray]]]:
    """The sorted union of ``dictionaries`` and, for each, the map of its codes into the union
    (``union_codes = map[codes]``; None where the codes stay as they are). The largest
    dictionary is the base: strings of the others that it lacks are inserted into it (a merge
    of sorted arrays), so merging a few updates into a large batch costs their strings'
    look-ups, not a sort of the union."""
    base = max(range(len(dictionaries)), key=lambda i: len(dictionaries[i]))
    union = dictionaries[base]
    maps: List[Optional[np.ndarray]] = [None] * len(dictionaries)
    positions = [translate_codes(d, union) for d in dictionaries]
    missing = set()
    for d, at in zip(dictionaries, positions):
        if (at < 0).any():
            missing.update(d[at < 0].tolist())
    if missing:
        extra = _objects(sorted(missing))
        insert_at = np.searchsorted(union, extra)
        union = np.insert(union, insert_at, extra)
        moved = np.arange(len(dictionaries[base]), dtype=np.int64)
        moved += np.searchsorted(insert_at, moved, "right")
        for i, d in enumerate(dictionaries):
            if i == base:
                maps[i] = moved.astype(np.int32)
            else:
                maps[i] = translate_codes(d, union)
        return union, maps
    for i, (d, at) in enumerate(zip(dictionaries, positions)):
        if d is not union and not (len(d) == len(union) and (at == np.arange(len(d))).all()):
            maps[i] = at
    return union, maps


def prune_dictionary(codes: np.ndarray, dictionary: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``codes`` and ``dictionary`` without the strings no code uses (the same arrays when
    every string is used)."""
    used = np.zeros(len(dictionary), dtype=bool)
    used[codes] = True
    if used.all():
        return codes, dictionary
    renumber = (np.cumsum(used) - 1).astype(np.int32)
    return renumber[codes], dictionary[used]


from timelypy.kernels import adopt  # noqa: E402  (last: a drop-in replaces the names above)

adopt(__name__, globals())
