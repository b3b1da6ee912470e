"""The arrange operator's column path: which batches it seals as columns, and how it waits.

An arrangement at totally ordered ``int`` times seals a :class:`~.trace.column_batch.ColumnBatch`
when the updates it takes all fit one layout (detected from the first update, see
:class:`~.trace.layout.Layout`). While updates wait for the frontier (a bulk load at one time
waits until the time closes), every :data:`ENCODE_CHUNK` of them are encoded into columns
right away: the batcher then holds ~32 bytes per ``(int, int)`` update instead of a Python
tuple of ~120, and the seal sorts columns it already has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import numpy as np

from .column_message import ColumnMessage
from .kernel import columns as column_kernel
from .kernel.columns import Updates, diffs_fit, merge_advance, sort_consolidate
from .trace.column_batch import ColumnBatch, encode_updates
from .trace.layout import Layout, code_strings, unify_strings
from .trace.marshal_columns import marshal_encode

if TYPE_CHECKING:
    from .arrange import Batcher

__all__ = ["COLUMNS_MIN_UPDATES", "ENCODE_CHUNK", "ColumnChoice"]

COLUMNS_MIN_UPDATES = 256
"""Fewer pending updates than this are sealed on the object path: numpy's cost per call
outweighs its speed per update on a handful (a closed loop's batches), and the spine turns them
into columns when they merge with a column batch."""

ENCODE_CHUNK = 1 << 16
"""Pending updates encoded into columns at a time while they wait for the frontier."""

_Chunk = Tuple[List[np.ndarray], List[np.ndarray], np.ndarray, np.ndarray]
"""``(key_cols, val_cols, times, diffs)``, not necessarily sorted."""


class ColumnChoice:
    """The arrange operator's choice of path, batch by batch: a batch is sealed as columns
    (:class:`~.trace.column_batch.ColumnBatch`) when every update it takes fits the layouts of
    the first columns batch (detected from its first update) at ``int`` times, else on the
    object path. An arrangement whose first update does not fit stays on the object path; one
    whose batches stop fitting three times gives up columns (mixed streams pay the detection
    only a few times). Small batches (:data:`COLUMNS_MIN_UPDATES`) stay objects.
    ``sealed_columns`` and ``sealed_objects`` count the batches.

    Waiting updates are encoded :data:`ENCODE_CHUNK` at a time (:meth:`absorb`) into
    ``chunks``; :meth:`release` turns them back into the batcher's tuples (a checkpoint, or
    updates that stopped fitting).

    Example: ``ColumnChoice(enabled=True)`` starts with no layout; the first batch it seals
    detects one.
    """

    __slots__ = (
        "enabled",
        "key_layout",
        "val_layout",
        "misses",
        "sealed_columns",
        "sealed_objects",
        "chunks",
        "held",
        "coded",
        "absorbing",
        "marshal_misses",
    )

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.key_layout: Optional[Layout] = None
        self.val_layout: Optional[Layout] = None
        self.misses = 0
        self.sealed_columns = 0
        self.sealed_objects = 0
        self.chunks: List[_Chunk] = []
        self.held = 0
        """Updates in ``chunks``."""
        self.coded: List[Optional[List[Any]]] = []
        """Per chunk, the dictionaries of its string columns (the key's, then the value's)
        when they hold codes (a column message's); None: strings as strings (or none)."""
        self.absorbing = enabled
        """Whether :meth:`absorb` encodes (off after a chunk did not fit, until the seal)."""
        self.marshal_misses = 0
        """Encodings the one-pass path refused: after two, only the general path is tried
        (updates with ints beyond 32 bits, e.g. millisecond times, would pay both)."""

    def absorb(self, batcher: "Batcher") -> None:
        """Encode the batcher's pending updates into a chunk of columns (when they fit)."""
        pending = batcher.pending
        if not self._detect(pending):
            self.absorbing = False
            return
        encoded = self._encode(pending)
        if encoded is None:
            self.absorbing = False  # the seal decides (and counts the miss)
            return
        self.chunks.append(encoded[2:])
        self.coded.append(None)
        self.held += len(pending)
        batcher.pending = []

    def keeps_columns(self) -> bool:
        """Whether batches may still be sealed as columns (not given up)."""
        return self.enabled

    def take_message(self, batcher: "Batcher", message: ColumnMessage) -> None:
        """Hold the updates of a column message: its columns as a chunk when they fit (the
        layouts of the columns held, or the first layouts; diffs that :func:`diffs_fit`),
        else its tuples in the batcher (decoded once)."""
        if not len(message):
            return
        if self.enabled and diffs_fit(message.diffs):
            if self.key_layout is None and not batcher.pending:
                self.key_layout = Layout(message.key_layout.shape)
                self.val_layout = Layout(message.val_layout.shape)
            if message.key_layout == self.key_layout and message.val_layout == self.val_layout:
                self.chunks.append(
                    (message.key_cols, message.val_cols, message.times, message.diffs)
                )
                self.coded.append(_dictionaries(message.key_layout, message.val_layout))
                self.held += len(message)
                return
        batcher.push(message.records())

    def release(self, batcher: "Batcher") -> None:
        """Move the updates held as columns back into the batcher, as tuples."""
        if not self.chunks:
            return
        key_layout, val_layout = self.key_layout, self.val_layout
        assert key_layout is not None and val_layout is not None
        updates: List[Any] = []
        for (key_cols, val_cols, times, diffs), dicts in zip(self.chunks, self.coded):
            n = len(times)
            key, val = _with_dictionaries(key_layout, val_layout, dicts)
            keys, vals = key.decode(key_cols, n), val.decode(val_cols, n)
            updates += zip(zip(keys, vals), times.tolist(), diffs.tolist())
        self.chunks, self.coded, self.held = [], [], 0
        batcher.pending = updates + batcher.pending

    def least_time(self) -> Optional[int]:
        """The least time of the updates held as columns (None: none held)."""
        if not self.chunks:
            return None
        return min(int(chunk[2].min()) for chunk in self.chunks)

    def seal(
        self, batcher: "Batcher", bound: Optional[Any]
    ) -> Optional[Tuple[ColumnBatch, Optional[int]]]:
        """The waiting updates at times ``< bound`` (all if None) as an unnumbered column
        batch, and the least time of those that wait on (None: none), which stay in
        ``chunks``; None (nothing taken, everything back in the batcher as tuples) when they
        do not fit."""
        pending = batcher.pending
        self.absorbing = self.enabled
        if not self.enabled or len(pending) + self.held < COLUMNS_MIN_UPDATES:
            self.release(batcher)
            self.sealed_objects += 1
            return None
        parts, coded = self.chunks, self.coded
        if pending:
            if not self._detect(pending):
                self._refuse(batcher, give_up=True)
                return None
            encoded = self._encode(pending)
            if encoded is None:
                self._refuse(batcher, give_up=self.misses >= 2)
                return None
            parts, coded = parts + [encoded[2:]], coded + [None]
        assert self.key_layout is not None and self.val_layout is not None
        key_layout, val_layout = self.key_layout, self.val_layout
        if len(parts) > 1 and not key_layout.strings and not val_layout.strings:
            self.chunks, self.coded, self.held = [], [], 0
            batcher.pending = []
            return self._seal_sorted(parts, bound)
        unified = any(d is not None for d in coded)
        if unified:  # codes of several dictionaries: into their union
            key_layout, val_layout, parts = _unified(key_layout, val_layout, parts, coded)
        (key_cols, val_cols, times, diffs), rest = _split_at(_concatenate(parts), bound)
        self.chunks, self.coded, self.held = [], [], 0
        batcher.pending = []
        waiting: Optional[int] = None
        if rest is not None:
            self.chunks = [rest]
            self.held = len(rest[2])
            self.coded = [_dictionaries(key_layout, val_layout) if unified else None]
            waiting = int(rest[2].min())
        self.sealed_columns += 1
        batch = ColumnBatch.sorted_from(
            key_layout, val_layout, key_cols, val_cols, times, diffs, [], []
        )
        return batch, waiting

    def _seal_sorted(
        self, parts: List[_Chunk], bound: Optional[Any]
    ) -> Tuple[ColumnBatch, Optional[int]]:
        """:meth:`seal` of several chunks without strings: each sorted and consolidated on
        its own (small ones together, up to a merge's range of
        :data:`~.kernel.columns.MERGE_RANGE_ROWS` updates; the unsorted columns dropped as it
        goes), then merged range by range
        (:func:`~.kernel.columns.merge_advance`): the seal of a bulk load holds its chunks and
        its output, not also their concatenation and the sort's temporaries over all of it.
        The updates at times ``>= bound`` wait on as sorted chunks."""
        key_layout, val_layout = self.key_layout, self.val_layout
        assert key_layout is not None and val_layout is not None
        width = key_layout.width
        taken: List[Updates] = []
        least = column_kernel.MERGE_RANGE_ROWS  # (small chunks, e.g. messages, go together)
        while parts:
            group = [parts.pop()]
            rows = len(group[0][2])
            while parts and rows < least:
                group.append(parts.pop())
                rows += len(group[-1][2])
            key_cols, val_cols, times, diffs = _concatenate(group)
            del group
            cols, times, diffs = sort_consolidate(key_cols + val_cols, times, diffs)
            now, later = _split_at((cols[:width], cols[width:], times, diffs), bound)
            if later is not None:
                self.chunks.append(later)
                self.coded.append(None)
                self.held += len(later[2])
            taken.append((now[0] + now[1], now[2], now[3]))
        waiting = min(int(c[2].min()) for c in self.chunks) if self.chunks else None
        cols, times, diffs = merge_advance(taken, None)
        self.sealed_columns += 1
        batch = ColumnBatch.joined(key_layout, val_layout, cols, times, diffs, [], [])
        return batch, waiting

    def _encode(self, pending: List[Any]) -> Optional[Tuple[Any, ...]]:
        """``encode_updates`` of ``pending`` in the detected layouts, the one-pass encoding
        first while it has not been refused twice."""
        key_layout, val_layout = self.key_layout, self.val_layout
        assert key_layout is not None and val_layout is not None
        if self.marshal_misses < 2:
            fast = marshal_encode(pending, key_layout, val_layout)
            if fast is not None and diffs_fit(fast[3]):
                return (key_layout, val_layout, *fast)
            self.marshal_misses += 1
        return encode_updates(pending, key_layout, val_layout, marshal=False)

    def _detect(self, pending: List[Any]) -> bool:
        """Whether the layouts are known (detected from the first pending update if not)."""
        if self.key_layout is not None:
            return True
        if not pending:
            return False
        first = pending[0][0]
        if type(first) is not tuple or len(first) != 2:
            return False
        self.key_layout, self.val_layout = Layout.of(first[0]), Layout.of(first[1])
        if self.key_layout is None or self.val_layout is None:
            self.key_layout = self.val_layout = None
            return False
        return True

    def _refuse(self, batcher: "Batcher", give_up: bool) -> None:
        self.release(batcher)
        self.misses += 1
        self.sealed_objects += 1
        if give_up or self.key_layout is None:
            self.enabled = self.absorbing = False


def _dictionaries(key: Layout, val: Layout) -> Optional[List[Any]]:
    """The dictionaries of the string columns of a key and a value holding codes (None:
    neither has strings)."""
    if not key.strings and not val.strings:
        return None
    return list(key.dicts or [None] * key.width) + list(val.dicts or [None] * val.width)


def _with_dictionaries(
    key: Layout, val: Layout, dicts: Optional[List[Any]]
) -> Tuple[Layout, Layout]:
    if dicts is None:
        return key, val
    return key.with_dicts(dicts[: key.width]), val.with_dicts(dicts[key.width :])


def _unified(
    key: Layout, val: Layout, parts: List[_Chunk], coded: List[Optional[List[Any]]]
) -> Tuple[Layout, Layout, List[_Chunk]]:
    """The layouts with the union of the chunks' dictionaries, and the chunks with their
    string columns as codes into it (chunks of strings are coded first): a message's codes
    are mapped, not its strings hashed again."""
    keys, vals, out = [], [], []
    for (key_cols, val_cols, times, diffs), dicts in zip(parts, coded):
        k, v = _with_dictionaries(key, val, dicts)
        k, key_cols = code_strings(k, key_cols)
        v, val_cols = code_strings(v, val_cols)
        keys.append(k)
        vals.append(v)
        out.append((list(key_cols), list(val_cols), times, diffs))
    key = unify_strings(keys, [p[0] for p in out], 0)
    val = unify_strings(vals, [p[1] for p in out], 0)
    return key, val, out


def _split_at(chunk: _Chunk, bound: Optional[Any]) -> Tuple[_Chunk, Optional[_Chunk]]:
    """``chunk``'s updates at times before ``bound`` (None: all), and those at or after it
    (None when there are none), each in the order it had."""
    key_cols, val_cols, times, diffs = chunk
    if bound is None or not len(times) or times.max() < bound:
        return chunk, None
    now = times < bound
    later = ~now

    def rows(mask: np.ndarray) -> _Chunk:
        return [c[mask] for c in key_cols], [c[mask] for c in val_cols], times[mask], diffs[mask]

    return rows(now), rows(later)


def _concatenate(parts: List[_Chunk]) -> _Chunk:
    if len(parts) == 1:
        return parts[0]
    width_k, width_v = len(parts[0][0]), len(parts[0][1])
    return (
        [np.concatenate([p[0][c] for p in parts]) for c in range(width_k)],
        [np.concatenate([p[1][c] for p in parts]) for c in range(width_v)],
        np.concatenate([p[2] for p in parts]),
        np.concatenate([p[3] for p in parts]),
    )
