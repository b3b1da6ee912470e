"""The column path of count, distinct and threshold at totally ordered times.

:class:`~.total.CountTotal` and :class:`~.total.ThresholdTotal` sum each arriving update into a
dictionary per time (``pending[time][record] += diff``), then turn each time's sums into output
changes record by record. For a large message of fixed-width records (ints, floats, bools,
tuples of them, ``str`` and ``bytes``: a :class:`~timelypy.differential.trace.layout.Layout`,
detected from the first record) at ``int`` times, :class:`RecordColumns` instead encodes the
records, times and diffs into numpy columns and keeps them per time; when the time closes its
columns are sorted and summed at once (``sort_consolidate``; string columns are first coded
into one sorted dictionary per column, hashing each string once), the changed records decoded
once each, and
:mod:`~timelypy.differential.kernel.reduce_counts` turns them into output changes with C-level
loops. Records that do not fit, small messages (below :data:`COLUMNS_MIN_UPDATES`), messages
of a few updates at each of many times (below :data:`COLUMNS_PER_TIME` on average) and chains
of fused linear stages stay on the object path; a time with both is summed on the column path
when its object sums fit the layout, else on the object path. Both give the same output
(as a multiset per time) and leave the same state.

Example:

>>> cols = RecordColumns(enabled=True)
>>> pending = {}
>>> cols.absorb([(3, 0, 1), (1, 0, 1), (3, 0, 1)], pending)
True
>>> records, sums = cols.take(0, pending.pop(0))
>>> records, sums.tolist()
([1, 3], [1, 2])
"""

from __future__ import annotations

import marshal
from operator import itemgetter
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..column_message import ColumnMessage
from ..kernel.columns import diffs_fit, sort_consolidate
from ..trace.layout import Layout, code_strings, unify_strings
from ..trace.marshal_columns import marshal_encode

__all__ = ["COLUMNS_MIN_UPDATES", "COLUMNS_PER_TIME", "RecordColumns"]

COLUMNS_MIN_UPDATES = 1024
"""The fewest updates of a message the column path takes: below it the dictionary costs less
than numpy's calls per message. An input session sends 4,096 updates a message, which an
exchange between two workers splits in about halves (``benchmarks/columns.py``, workload
``counts``, measures both paths)."""

_MAX_MISSES = 3
"""Messages that did not fit the layout before the operator gives columns up."""

COLUMNS_PER_TIME = 64
"""The fewest updates per time, on average, of a message the column path takes (a message of
an open loop's changes, a few at each of many times, is cheaper on the object path; such
messages count as misses)."""

_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)
_INT = Layout("i")

Dicts = Optional[List[Optional[np.ndarray]]]
"""Per column, the dictionary of a string column's codes (None: string columns hold the
strings themselves)."""
Chunk = Tuple[List[np.ndarray], np.ndarray, Dicts]
"""Unsorted ``(record columns, diffs, dictionaries)`` at one time."""

_INT_ROW = np.dtype(
    {
        "names": ["tuple", "length", "i0", "record", "i1", "time", "i2", "diff"],
        "formats": ["u1", "<u4", "u1", "<i4", "u1", "<i4", "u1", "<i4"],
        "offsets": [0, 1, 5, 6, 10, 11, 15, 16],
        "itemsize": 20,
    }
)
"""An ``(int, int, int)`` update as :mod:`marshal` (format 2) writes it when each ``int`` fits
32 bits: ``(``, the length 3, then ``i`` and four little-endian bytes per ``int``."""
_ROW_CHECKS = (
    ("tuple", ord("(")),
    ("length", 3),
    ("i0", ord("i")),
    ("i1", ord("i")),
    ("i2", ord("i")),
)


class RecordColumns:
    """Records held as columns per time, until the time closes (see the module).

    ``enabled``: whether messages are tried at all (``TIMELYPY_COLUMNS`` and no fused stages);
    ``layout``: the records' layout, detected from the first message tried; ``chunks``: per
    time, the chunks of columns that arrived at it."""

    __slots__ = ("enabled", "layout", "chunks", "misses")

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.layout: Optional[Layout] = None
        self.chunks: Dict[Any, List[Chunk]] = {}
        self.misses = 0

    def absorb(self, data: Sequence[Any], pending: Dict[Any, Dict[Any, int]]) -> bool:
        """Hold the ``(record, time, diff)`` updates of a message as columns, each time also
        registered in ``pending`` (with no sums); False (nothing held) when they do not fit."""
        encoded = self._encode(data)
        if encoded is None:
            self._miss()
            return False
        return self._hold(*encoded, None, pending)

    def absorb_message(self, message: ColumnMessage, pending: Dict[Any, Dict[Any, int]]) -> bool:
        """:meth:`absorb` of a column message's updates, whose records are its ``(key, val)``
        pairs: its columns as they are (string columns as its codes and dictionaries); False
        (nothing held) when they do not fit the layout or the diffs could overflow."""
        key, val = message.key_layout, message.val_layout
        shape = (key.shape, val.shape)
        if self.layout is None:
            self.layout = Layout(shape)
        if self.layout.shape != shape or not diffs_fit(message.diffs):
            self._miss()
            return False
        dicts: Dicts = None
        if key.strings or val.strings:
            dicts = list(key.dicts or [None] * key.width) + list(val.dicts or [None] * val.width)
        cols = message.key_cols + message.val_cols
        return self._hold(cols, message.times, message.diffs, dicts, pending)

    def _hold(
        self,
        cols: List[np.ndarray],
        times: np.ndarray,
        diffs: np.ndarray,
        dicts: Dicts,
        pending: Dict[Any, Dict[Any, int]],
    ) -> bool:
        """Hold the columns per time (False, nothing held: a few updates at each of many
        times, which the object path takes)."""
        chunks = self.chunks
        low = int(times.min())
        if low == int(times.max()):
            parts: List[Tuple[int, Chunk]] = [(low, (cols, diffs, dicts))]
        else:
            order = np.argsort(times, kind="stable")
            sorted_times = times[order]
            starts = np.flatnonzero(np.r_[True, sorted_times[1:] != sorted_times[:-1]])
            if len(starts) * COLUMNS_PER_TIME > len(times):  # an open loop's: a few per time
                self._miss()
                return False
            bounds = np.append(starts, len(order)).tolist()
            parts = []
            for i, t in enumerate(sorted_times[starts].tolist()):
                rows = order[bounds[i] : bounds[i + 1]]
                parts.append((t, ([c[rows] for c in cols], diffs[rows], dicts)))
        for t, chunk in parts:
            held = chunks.get(t)
            if held is None:
                chunks[t] = [chunk]
            else:
                held.append(chunk)
            if t not in pending:
                pending[t] = {}
        return True

    def _miss(self) -> None:
        self.misses += 1
        if self.misses >= _MAX_MISSES or self.layout is None:
            self.enabled = False

    def _encode(self, data: Sequence[Any]) -> Optional[Tuple[List[np.ndarray], Any, Any]]:
        """The records, times and diffs of ``data`` as columns, or None."""
        n = len(data)
        if not n:
            return None
        if self.layout is None:
            layout = Layout.of(data[0][0])
            if layout is None:  # (no layout: columns given up at the miss)
                return None
            self.layout = layout
        fast = _one_pass(data, self.layout)
        if fast is not None:
            return fast
        records = list(map(_FIRST, data))
        cols = self.layout.encode(records)
        if cols is None:
            return None
        times = _INT.encode(list(map(_SECOND, data)))
        diffs = _INT.encode(list(map(_THIRD, data))) if times is not None else None
        if times is None or diffs is None or not diffs_fit(diffs[0]):
            return None
        return cols, times[0], diffs[0]

    def take(self, t: Any, sums: Dict[Any, int]) -> Optional[Tuple[List[Any], np.ndarray]]:
        """The distinct records changed at ``t`` (sorted) and their summed non-zero diffs, from
        the columns held at ``t`` and the object path's ``sums`` there; None when nothing is
        held at ``t``, or when ``sums`` does not fit the layout (the held columns are then
        added into ``sums``, for the object path)."""
        parts = self.chunks.pop(t, None)
        if parts is None:
            return None
        layout = self.layout
        assert layout is not None
        if sums:
            extra = self._encode_sums(sums)
            if extra is None:
                _add_into(sums, layout, parts)
                return None
            parts.append(extra)
        if layout.strings:  # codes into one dictionary per string column, for this time
            layout, parts = _coded(layout, parts)
        width = layout.width
        if len(parts) == 1:
            cols, diffs = parts[0][0], parts[0][1]
        else:
            cols = [np.concatenate([p[0][c] for p in parts]) for c in range(width)]
            diffs = np.concatenate([p[1] for p in parts])
        cols, summed = _consolidate(cols, diffs)
        return layout.decode(cols, len(summed)), summed

    def _encode_sums(self, sums: Dict[Any, int]) -> Optional[Chunk]:
        assert self.layout is not None
        cols = self.layout.encode(list(sums))
        diffs = _INT.encode(list(sums.values())) if cols is not None else None
        if cols is None or diffs is None or not diffs_fit(diffs[0]):
            return None
        return cols, diffs[0], None

    def unfold(self, pending: Dict[Any, Dict[Any, int]]) -> None:
        """Add every held column into ``pending`` (as the object path holds it), holding none."""
        if not self.chunks:
            return
        assert self.layout is not None
        for t, parts in self.chunks.items():
            sums = pending.get(t)
            if sums is None:
                pending[t] = sums = {}
            _add_into(sums, self.layout, parts)
        self.chunks = {}


def _one_pass(data: Sequence[Any], layout: Layout) -> Optional[Tuple[List[np.ndarray], Any, Any]]:
    """The one-pass encoding of ``(record, time, diff)`` updates through :mod:`marshal` (see
    :mod:`~timelypy.differential.trace.marshal_columns`) for ``int`` records and pairs, every
    ``int`` within 32 bits; None for anything else (the caller encodes per column)."""
    shape = layout.shape
    if isinstance(shape, tuple) and len(shape) == 2:
        pairs = marshal_encode(data, Layout(shape[0]), Layout(shape[1]))  # (k, v) is a record
        if pairs is None or not diffs_fit(pairs[3]):
            return None
        return pairs[0] + pairs[1], pairs[2], pairs[3]
    if shape != "i":
        return None
    n = len(data)
    try:
        raw = marshal.dumps(data if type(data) is list else list(data), 2)
    except ValueError:
        return None
    if len(raw) != 5 + 20 * n or raw[0] != ord("["):
        return None
    rows = np.frombuffer(raw, dtype=_INT_ROW, count=n, offset=5)
    for name, value in _ROW_CHECKS:
        if not (rows[name] == value).all():
            return None
    diffs = rows["diff"].astype(np.int64)
    if not diffs_fit(diffs):
        return None
    return [rows["record"].astype(np.int64)], rows["time"].astype(np.int64), diffs


def _coded(layout: Layout, parts: List[Chunk]) -> Tuple[Layout, List[Chunk]]:
    """``layout`` with one dictionary per string column and the chunks with their string
    columns as codes into it: chunks of strings are coded, and the dictionaries of chunks of
    codes (messages') unified, mapping their codes."""
    coded: List[Chunk] = []
    for cols, diffs, dicts in parts:
        if dicts is None:
            part_layout, cols = code_strings(layout, cols)
            dicts = list(part_layout.dicts or ())
        coded.append((list(cols), diffs, dicts))
    if len(coded) == 1:
        return layout.with_dicts(coded[0][2] or ()), coded
    layouts = [layout.with_dicts(dicts or ()) for _, _, dicts in coded]
    unified = unify_strings(layouts, [cols for cols, _, _ in coded], 0)
    return unified, coded


def _consolidate(cols: List[np.ndarray], diffs: np.ndarray) -> Tuple[List[np.ndarray], Any]:
    """The distinct records (sorted) and their summed diffs, zeros dropped."""
    if len(cols) != 1 or cols[0].dtype.kind != "i":
        cols, _, summed = sort_consolidate(cols, np.zeros(len(diffs), np.int64), diffs)
        return cols, summed
    order = np.argsort(cols[0])  # one int column: any sort will do, equal records are summed
    ordered = cols[0][order]
    change = np.empty(len(ordered), dtype=bool)
    change[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    summed = np.add.reduceat(diffs[order], starts) if len(starts) else diffs[:0]
    keep = summed != 0
    return [ordered[starts[keep]]], summed[keep]


def _add_into(sums: Dict[Any, int], layout: Layout, parts: List[Chunk]) -> None:
    """Add the chunks' records and diffs into ``sums``."""
    get = sums.get
    for cols, diffs, dicts in parts:
        coding = layout if dicts is None else layout.with_dicts(dicts)
        for d, r in zip(coding.decode(cols, len(diffs)), diffs.tolist()):
            sums[d] = get(d, 0) + r
