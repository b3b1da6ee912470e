"""Column batches: a batch of fixed-width updates kept as numpy columns.

A :class:`ColumnBatch` is a sealed batch (it never changes) whose updates are columns sorted by
``(key, val, time)`` and consolidated: ``key_cols`` and ``val_cols`` (one column per scalar of
the key's and the value's :class:`~.layout.Layout`), ``times`` and ``diffs`` (``int64``; times
totally ordered). Operators that know columns (the spine's merges and compaction, the join) read
the arrays; every other reader uses the :class:`~.batch.BatchReader` methods, for which the
batch decodes itself into the dictionary ``key -> [(val, time, diff), ...]`` once, when first
asked (both views hold the same updates); a look-up by key decodes only the segment of keys
it needs. A column batch costs 8 bytes per scalar, time and diff
(32 bytes per update of an ``(int, int)`` record), where the dictionary costs about 160.

Strings (``str``, ``bytes``) are ``int32`` codes into a dictionary per column and batch (the
sorted distinct strings, held by the batch's layouts; see :mod:`.layout`): 4 bytes per string
and update, and each distinct string once per batch. Merging batches of different dictionaries
first maps their codes into the union of the dictionaries (:func:`merge_columns`); the join
matches keys of two batches through :meth:`ColumnBatch.keys_against`.

Example:

>>> batch = ColumnBatch.from_updates([((1, 10), 0, 1), ((1, 10), 0, 1), ((0, 5), 1, 1)], [0], [2])
>>> batch.count, batch.get(1), batch.sorted_keys()
(2, [(10, 0, 2)], [0, 1])
"""

from __future__ import annotations

from bisect import bisect_left
from functools import partial
from operator import itemgetter
from typing import Any, Callable, ItemsView, KeysView, List, Optional, Sequence, Tuple

import numpy as np

from ..kernel.columns import (
    compact_sorted,
    diffs_fit,
    key_starts,
    merge_advance,
    search_array,
    sort_consolidate,
    translate_codes,
)
from .batch import BatchData, BatchReader, Vals
from .layout import Layout, code_strings, prune_strings, strings_pay, unify_strings
from .marshal_columns import marshal_encode
from .segments import SEGMENT_KEYS, SegmentDict, decode_range

__all__ = [
    "ColumnBatch",
    "as_column_run",
    "column_bytes",
    "distinct_keys",
    "compact_columns",
    "encode_updates",
    "merge_columns",
]

_INT = Layout("i")
_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)
_LOOKUPS_BEFORE_DECODING = 16
"""Look-ups by key a column batch answers from its columns by binary search (a few
microseconds each, nothing decoded) before it answers from decoded segments (a dictionary hit
once a key's segment is decoded): a batch probed key by key for long (the large batch behind a
closed loop's small ones) is read about as fast as on the object path."""


def encode_updates(
    updates: Sequence[Tuple[Tuple[Any, Any], Any, int]],
    key_layout: Optional[Layout] = None,
    val_layout: Optional[Layout] = None,
    marshal: bool = True,
) -> Optional[Tuple[Layout, Layout, List[np.ndarray], List[np.ndarray], np.ndarray, np.ndarray]]:
    """``((key, val), time, diff)`` updates as ``(key_layout, val_layout, key_cols, val_cols,
    times, diffs)`` (not yet sorted; strings as strings), or None when they are not all
    fixed-width (strings included where :func:`~.layout.strings_pay`), of one layout
    (the given ones, else the first update's), at ``int`` times, with diffs small enough to add
    and multiply in ``int64``. With given layouts, the one-pass encoding
    (:func:`~.marshal_columns.marshal_encode`) is tried first unless ``marshal`` is False (a
    caller whose updates it keeps refusing, e.g. times beyond 32 bits)."""
    n = len(updates)
    if not n:
        return None
    if marshal and key_layout is not None and val_layout is not None:  # (not for strings)
        fast = marshal_encode(updates, key_layout, val_layout)
        if fast is not None and diffs_fit(fast[3]):
            return (key_layout, val_layout, *fast)
    kvs = list(map(_FIRST, updates))
    times = list(map(_SECOND, updates))
    diffs = list(map(_THIRD, updates))
    if set(map(type, kvs)) - {tuple} or set(map(len, kvs)) - {2}:
        return None
    keys = list(map(_FIRST, kvs))
    vals = list(map(_SECOND, kvs))
    if key_layout is None:
        key_layout = Layout.of(keys[0])
    if val_layout is None:
        val_layout = Layout.of(vals[0])
    if key_layout is None or val_layout is None:
        return None
    key_cols = key_layout.encode(keys)  # (strings checked early: refusals cost less)
    fits = key_cols is not None and strings_pay(key_layout, key_cols)
    val_cols = val_layout.encode(vals) if fits else None
    fits = val_cols is not None and strings_pay(val_layout, val_cols)
    time_col = _INT.encode(times) if fits else None
    diff_col = _INT.encode(diffs) if time_col is not None else None
    if key_cols is None or val_cols is None or time_col is None or diff_col is None:
        return None
    if not diffs_fit(diff_col[0]):
        return None
    return key_layout, val_layout, key_cols, val_cols, time_col[0], diff_col[0]


class ColumnBatch(BatchReader):
    """A sealed batch of fixed-width updates as sorted, consolidated columns (see the module).

    ``key_layout`` and ``val_layout`` say how the columns decode; ``lower``, ``upper``,
    ``since``, ``seq`` and ``count`` are as for every :class:`~.batch.BatchReader`.
    """

    __slots__ = (
        "key_layout",
        "val_layout",
        "key_cols",
        "val_cols",
        "times",
        "diffs",
        "_starts",
        "_search",
        "_sorted",
        "_lookups",
        "_index",
        "_segments",
        "ready_get",
    )

    def __init__(
        self,
        key_layout: Layout,
        val_layout: Layout,
        key_cols: List[np.ndarray],
        val_cols: List[np.ndarray],
        times: np.ndarray,
        diffs: np.ndarray,
        lower: List[Any],
        upper: List[Any],
        seq: int = 0,
        since: Optional[List[Any]] = None,
    ):
        self.key_layout = key_layout
        self.val_layout = val_layout
        self.key_cols = key_cols
        self.val_cols = val_cols
        self.times = times
        self.diffs = diffs
        self.lower = lower
        self.upper = upper
        self.since = lower if since is None else since
        self.seq = seq
        self.count = len(times)
        self._data = None  # type: ignore[assignment]  # decoded when a reader first asks
        self._starts: Optional[np.ndarray] = None
        self._search: Optional[np.ndarray] = None
        self._sorted: Optional[List[Any]] = None
        self._lookups = 0
        self._index: Optional[Tuple[List[Any], List[int]]] = None
        self._segments: Optional[SegmentDict] = None
        self.ready_get: Optional[Callable[[Any], Optional[Vals]]] = None
        """The look-up :meth:`getter` gives once the batch is decoded (whole or in segments): a
        C-level call held here so a reader takes it without a Python call (None before)."""

    @classmethod
    def from_updates(
        cls,
        updates: Sequence[Tuple[Tuple[Any, Any], Any, int]],
        lower: List[Any],
        upper: List[Any],
        seq: int = 0,
    ) -> "ColumnBatch":
        """A batch of ``((key, val), time, diff)`` updates (consolidated here); ValueError if
        they do not fit columns (see :func:`encode_updates`)."""
        encoded = encode_updates(updates)
        if encoded is None:
            raise ValueError("ColumnBatch.from_updates: the updates are not fixed-width")
        key_layout, val_layout, key_cols, val_cols, times, diffs = encoded
        return cls.sorted_from(
            key_layout, val_layout, key_cols, val_cols, times, diffs, lower, upper, seq
        )

    @classmethod
    def sorted_from(
        cls,
        key_layout: Layout,
        val_layout: Layout,
        key_cols: List[np.ndarray],
        val_cols: List[np.ndarray],
        times: np.ndarray,
        diffs: np.ndarray,
        lower: List[Any],
        upper: List[Any],
        seq: int = 0,
        since: Optional[List[Any]] = None,
    ) -> "ColumnBatch":
        """A batch of unsorted columns: sorted and consolidated here (string columns given
        as strings are coded into dictionaries of their own)."""
        strings, n = key_layout.strings or val_layout.strings, len(times)
        if strings:
            key_layout, key_cols = code_strings(key_layout, key_cols)
            val_layout, val_cols = code_strings(val_layout, val_cols)
        cols, times, diffs = sort_consolidate(key_cols + val_cols, times, diffs)
        if strings and len(times) < n:
            key_layout, val_layout, cols = prune_strings(key_layout, val_layout, cols)
        return cls.joined(key_layout, val_layout, cols, times, diffs, lower, upper, seq, since)

    @classmethod
    def joined(
        cls,
        key_layout: Layout,
        val_layout: Layout,
        cols: List[np.ndarray],
        times: np.ndarray,
        diffs: np.ndarray,
        lower: List[Any],
        upper: List[Any],
        seq: int = 0,
        since: Optional[List[Any]] = None,
    ) -> "ColumnBatch":
        """A batch of sorted, consolidated ``cols`` (the key's columns, then the value's, as
        the column kernels take and give them)."""
        width = key_layout.width
        return cls(
            key_layout,
            val_layout,
            cols[:width],
            cols[width:],
            times,
            diffs,
            lower,
            upper,
            seq,
            since,
        )

    # ------------------------------------------------------------------ columns
    def columns(self) -> Tuple[List[np.ndarray], np.ndarray, np.ndarray]:
        """``(key_cols + val_cols, times, diffs)``: what the column kernels take."""
        return self.key_cols + self.val_cols, self.times, self.diffs

    def starts(self) -> np.ndarray:
        """The index of the first update of each distinct key."""
        if self._starts is None:
            self._starts = key_starts(self.key_cols, self.count)
        return self._starts

    def search_keys(self) -> np.ndarray:
        """The keys of every update as one sorted array, for ``numpy.searchsorted``."""
        if self._search is None:
            self._search = search_array(self.key_cols)
        return self._search

    def keys_against(self, other: "ColumnBatch", keys: np.ndarray) -> np.ndarray:
        """``keys`` (the :meth:`search_keys` of this batch's rows ``starts()``) as ``other``'s
        :meth:`search_keys` order them: ``keys`` itself unless the key holds strings, whose
        codes are mapped into ``other``'s dictionaries (-1 for strings ``other`` lacks)."""
        layout = self.key_layout
        if not layout.strings:
            return keys
        mine, theirs = layout.dicts, other.key_layout.dicts
        assert mine is not None and theirs is not None
        if all(mine[i] is theirs[i] for i in layout.strings):
            return keys
        starts = self.starts()
        cols = [c[starts] for c in self.key_cols]
        for i in layout.strings:
            source, target = mine[i], theirs[i]
            assert source is not None and target is not None
            cols[i] = translate_codes(source, target)[cols[i]]
        return search_array(cols)

    def decode_keys(self, rows: np.ndarray) -> List[Any]:
        """The keys of the updates at ``rows``, as Python objects."""
        return self.key_layout.decode([col[rows] for col in self.key_cols], len(rows))

    def decode_vals(self, rows: np.ndarray) -> List[Any]:
        """The values of the updates at ``rows``, as Python objects."""
        return self.val_layout.decode([col[rows] for col in self.val_cols], len(rows))

    def same_layout(self, other: BatchReader) -> bool:
        """``other`` is a column batch of the same key and value layouts."""
        return (
            type(other) is ColumnBatch
            and other.key_layout == self.key_layout
            and other.val_layout == self.val_layout
        )

    def encode_like(self, batch: BatchReader) -> "Optional[ColumnBatch]":
        """``batch`` (an object batch) as a column batch of this one's layouts, with its
        bounds, or None if its updates do not fit them."""
        updates = [((k, v), t, r) for k, vals in batch.items() for v, t, r in vals]
        if not updates:
            cols: List[np.ndarray] = [np.empty(0, d) for d in self.key_layout.dtypes]
            vals: List[np.ndarray] = [np.empty(0, d) for d in self.val_layout.dtypes]
            empty = np.empty(0, np.int64)
            return ColumnBatch(
                self.key_layout,
                self.val_layout,
                cols,
                vals,
                empty,
                empty.copy(),
                batch.lower,
                batch.upper,
                batch.seq,
                batch.since,
            )
        encoded = encode_updates(updates, self.key_layout, self.val_layout)
        if encoded is None:
            return None
        _, _, key_cols, val_cols, times, diffs = encoded
        return ColumnBatch.sorted_from(
            self.key_layout,
            self.val_layout,
            key_cols,
            val_cols,
            times,
            diffs,
            batch.lower,
            batch.upper,
            batch.seq,
            batch.since,
        )

    def nbytes(self) -> int:
        """The bytes the columns take (with their dictionaries' strings)."""
        arrays = self.key_cols + self.val_cols + [self.times, self.diffs]
        total = sum(a.nbytes for a in arrays)
        return total + self.key_layout.dictionary_bytes() + self.val_layout.dictionary_bytes()

    # ------------------------------------------------------------------ as a dictionary
    def _decoded(self) -> BatchData:
        data = self._data
        if data is None:
            segments = self._segments
            if segments is not None:  # decode the segments left into it
                for j in range(len(segments.firsts)):
                    segments._fill(j)
                data = self._data = segments
            else:
                data = self._data = self._decode()
            self.ready_get = data.get
        return data

    def _decode(self) -> BatchData:
        return self._range_decoder()(0, len(self.starts()))

    def _range_decoder(self) -> "partial[BatchData]":
        """``decode(first, end)``: the dictionary of the distinct keys ``first .. end - 1``
        (holding the columns, not the batch)."""
        return partial(
            decode_range,
            self.key_layout,
            self.val_layout,
            self.key_cols,
            self.val_cols,
            self.times,
            self.diffs,
            self.starts(),
        )

    def _segmented(self) -> "SegmentDict":
        segments = self._segments
        if segments is None:
            starts = self.starts()
            firsts = self.decode_keys(starts[::SEGMENT_KEYS])
            segments = self._segments = SegmentDict(firsts, self._range_decoder())
            self.ready_get = segments.__getitem__  # (the segments', not the batch's: no cycle)
        return segments

    def getter(self) -> Callable[[Any], Optional[Vals]]:
        """The fastest ``get`` for many look-ups now: the dictionary's own once the batch is
        decoded, or the segments' (a C-level hit once a key's segment is decoded), else
        :meth:`get` (a binary search while look-ups are few)."""
        ready = self.ready_get
        return self.get if ready is None else ready

    # ``get`` and ``items`` are methods here, not the dictionary's bound methods held in the
    # slots as a :class:`~.batch.Batch` holds them: a bound method of the batch itself in its
    # own slot would be a reference cycle, freed only by the cyclic collector, which the
    # workers pause while they step (so merged-away batches would stay in memory).
    def get(self, key: Any) -> Optional[Vals]:
        """One key's updates: found by numpy's binary search in the key columns while look-ups
        are few (a small batch joined against a large trace asks for a handful of keys); after
        :data:`_LOOKUPS_BEFORE_DECODING` of them, in the dictionary of decoded segments
        (:class:`SegmentDict`: a miss decodes the key's segment)."""
        data = self._data
        if data is not None:
            return data.get(key)
        segments = self._segments
        if segments is not None:
            return segments[key]
        self._lookups += 1
        if self._lookups > _LOOKUPS_BEFORE_DECODING or self._lookups > self.count // 8:
            return self._segmented()[key]
        flat = self.key_layout.flatten(key)
        if flat is None:
            # not of the layout: equal keys of other types are found in the dictionary
            return self._decoded().get(key)
        lo, hi = self._rows_of(key, flat)
        if lo == hi:
            return None
        vals = self.val_layout.decode([c[lo:hi] for c in self.val_cols], hi - lo)
        return list(zip(vals, self.times[lo:hi].tolist(), self.diffs[lo:hi].tolist()))

    def items(self) -> ItemsView[Any, Vals]:
        """Every ``(key, [(val, time, diff), ...])`` (the batch decodes itself once)."""
        return self._decoded().items()

    def _rows_of(self, key: Any, flat: List[Any]) -> Tuple[int, int]:
        """The rows ``[lo, hi)`` of ``key`` (of the key layout, ``flat`` its scalars): numpy's
        binary search in the key columns (:meth:`search_keys`), nothing decoded; a key with
        strings (or the empty tuple) by bisection in the distinct keys, decoded once (a key
        and a start per distinct key)."""
        if not self.key_layout.strings and flat:
            search = self.search_keys()
            try:
                probe = flat[0] if len(flat) == 1 else np.array(tuple(flat), dtype=search.dtype)
                lo = search.searchsorted(probe, "left")
                hi = search.searchsorted(probe, "right")
            except OverflowError:  # an int beyond int64 (numpy 1.x): not in the columns
                return 0, 0
            return int(lo), int(hi)
        index = self._index
        if index is None:
            index = self._index = (self.sorted_keys(), self.starts().tolist() + [self.count])
        keys, bounds = index
        i = bisect_left(keys, key)
        if i == len(keys) or keys[i] != key:
            return 0, 0
        return bounds[i], bounds[i + 1]

    def keys(self) -> KeysView[Any]:
        """Every key."""
        return self._decoded().keys()

    def key_count(self) -> int:
        """The number of keys."""
        return len(self.starts())

    def __contains__(self, key: Any) -> bool:
        return key in self._decoded()

    def sorted_keys(self) -> List[Any]:
        """The keys in sorted order (the columns' order is Python's)."""
        if self._sorted is None:
            self._sorted = self.decode_keys(self.starts())
        return self._sorted

    def updates(self) -> List[Tuple[Any, Any, Any, int]]:
        """Every ``(key, val, time, diff)``."""
        return [(k, v, t, r) for k, vals in self._decoded().items() for v, t, r in vals]

    def __repr__(self) -> str:
        return (
            f"ColumnBatch(seq={self.seq}, layout=({self.key_layout.shape!r}, "
            f"{self.val_layout.shape!r}), updates={self.count}, lower={self.lower}, "
            f"upper={self.upper}, since={self.since})"
        )


def merge_columns(run: Sequence[ColumnBatch], since: List[Any]) -> ColumnBatch:
    """One column batch of the consecutive column batches ``run`` (of one layout): from the
    first's lower to the last's upper, numbered as the last, its times advanced to ``since``
    (totally ordered; empty: left as they are) and consolidated. String codes are first mapped
    into the union of the batches' dictionaries; strings no update keeps are dropped."""
    first = run[0]
    parts = [b.columns() for b in run]
    key_layout, val_layout = first.key_layout, first.val_layout
    strings = key_layout.strings or val_layout.strings
    if strings:  # codes into the unions of the dictionaries
        at = key_layout.width
        key_layout = unify_strings([b.key_layout for b in run], [p[0] for p in parts], 0)
        val_layout = unify_strings([b.val_layout for b in run], [p[0] for p in parts], at)
    cols, times, diffs = merge_advance(parts, since[0] if since else None)
    if strings:
        key_layout, val_layout, cols = prune_strings(key_layout, val_layout, cols)
    return ColumnBatch.joined(
        key_layout,
        val_layout,
        cols,
        times,
        diffs,
        first.lower,
        run[-1].upper,
        run[-1].seq,
        list(since) if since else first.since,
    )


def compact_columns(batch: ColumnBatch, since: List[Any]) -> ColumnBatch:
    """``batch`` with its times advanced to ``since`` and consolidated (``batch`` itself when
    ``since`` is empty: nothing will be read any more)."""
    if not since:
        return batch
    cols, times, diffs = compact_sorted(*batch.columns(), since[0])
    key_layout, val_layout = batch.key_layout, batch.val_layout
    if len(times) < batch.count and (key_layout.strings or val_layout.strings):
        key_layout, val_layout, cols = prune_strings(key_layout, val_layout, cols)
    compacted = ColumnBatch.joined(
        key_layout,
        val_layout,
        cols,
        times,
        diffs,
        batch.lower,
        batch.upper,
        batch.seq,
        list(since),
    )
    if compacted.count == batch.count:  # the same rows: the key index still holds
        compacted._starts, compacted._search = batch._starts, batch._search
        compacted._sorted, compacted._index = batch._sorted, batch._index
    return compacted


def as_column_run(run: Sequence[BatchReader]) -> Optional[List[ColumnBatch]]:
    """The batches of ``run`` as column batches of one layout, when one of them is a column
    batch and the others are of its layout or object batches whose updates fit it (encoded
    here); None otherwise (the run merges on the object path)."""
    model = next((b for b in run if type(b) is ColumnBatch), None)
    if model is None:
        return None
    out: List[ColumnBatch] = []
    for b in run:
        if type(b) is ColumnBatch:
            if not model.same_layout(b):
                return None
            out.append(b)
            continue
        columns = model.encode_like(b)
        if columns is None:
            return None
        out.append(columns)
    return out


def distinct_keys(batches: Sequence[BatchReader]) -> Optional[int]:
    """The number of distinct keys of column batches of one layout (None if another batch is
    among them: the caller counts the decoded keys)."""
    if not batches or any(type(b) is not ColumnBatch for b in batches):
        return None if batches else 0
    first = batches[0]
    assert type(first) is ColumnBatch
    if len(batches) == 1:
        return first.key_count()
    if not all(first.same_layout(b) for b in batches[1:]):
        return None
    run = [b for b in batches if type(b) is ColumnBatch]
    if first.key_layout.strings:  # codes into the union of the dictionaries
        cols = [list(b.key_cols) for b in run]
        unify_strings([b.key_layout for b in run], cols, 0)
        keys = search_array([np.concatenate(column) for column in zip(*cols)])
        return int(len(np.unique(keys)))
    keys = np.concatenate([b.search_keys() for b in run])
    return int(len(np.unique(keys)))


def column_bytes(batches: Sequence[BatchReader]) -> Optional[int]:
    """The bytes of the batches' columns (None if one is an object batch)."""
    if any(type(b) is not ColumnBatch for b in batches):
        return None
    return sum(b.nbytes() for b in batches if type(b) is ColumnBatch)
