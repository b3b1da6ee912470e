"""Batches: sets of updates grouped by key, with a description of their times, read by key.

Operators read a batch only through :class:`BatchReader`'s methods (``get``, ``items``,
``keys``, ``sorted_keys``, ``updates``, ``len``); the dictionary behind them is the trace
layer's own. A :class:`Batch` never changes once made (sealed); the spine's merges build their
results in a :class:`~.builder.BatchBuilder`, which only the spine changes.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, ItemsView, KeysView, List, Optional, Tuple

__all__ = ["Batch", "BatchData", "BatchReader", "Vals"]

Vals = List[Tuple[Any, Any, int]]
"""A key's updates ``[(val, time, diff), ...]``."""
BatchData = Dict[Any, Vals]
"""``key -> [(val, time, diff), ...]``: what a batch is made of."""


class BatchReader:
    """What readers may do with a batch: look keys up and walk them, never change them.

    As in differential-dataflow's ``Description``, ``lower`` and ``upper`` are the frontiers
    (lists) of the times the batch covers (before compaction every time ``t`` of it has
    ``lower <= t`` and not ``upper <= t``), and ``since`` is the frontier its times may have been
    advanced to: accumulations are exact at times at or beyond ``since``. ``seq`` numbers the
    spine's batches; ``count`` is the number of updates.

    ``get(key)`` returns the key's ``[(val, time, diff), ...]`` or None, and ``items()`` every
    ``(key, [(val, time, diff), ...])``: they are the dictionary's own methods, so they cost
    what a dictionary look-up costs in a hot loop. The lists they return belong to the batch:
    read them, do not change them.
    """

    __slots__ = ("_data", "get", "items", "lower", "upper", "since", "seq", "count")

    _data: BatchData
    get: Callable[[Any], Optional[Vals]]
    items: Callable[[], ItemsView[Any, Vals]]
    lower: List[Any]
    upper: List[Any]
    since: List[Any]
    seq: int
    count: int

    def keys(self) -> KeysView[Any]:
        """Every key."""
        return self._data.keys()

    def key_count(self) -> int:
        """The number of keys."""
        return len(self._data)

    def __contains__(self, key: Any) -> bool:
        return key in self._data

    def sorted_keys(self) -> List[Any]:
        """The keys in sorted order (keys must be mutually comparable)."""
        return sorted(self._data)

    def updates(self) -> List[Tuple[Any, Any, Any, int]]:
        """Every ``(key, val, time, diff)``."""
        return [(k, v, t, r) for k, vals in self._data.items() for v, t, r in vals]

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(seq={self.seq}, keys={len(self._data)}, "
            f"updates={self.count}, lower={self.lower}, upper={self.upper}, since={self.since})"
        )


class Batch(BatchReader):
    """A sealed batch: made once (by the arrange operator's trace writer, or as a snapshot) and
    never changed; it may be sent as a message and read by any number of operators.

    ``data`` maps each key to its ``[(val, time, diff), ...]`` and is handed over (not copied):
    the maker must not change it afterwards. ``since`` defaults to ``lower``, where advancing
    changes no time of a fresh batch.
    """

    __slots__ = ("_sorted",)

    def __init__(
        self,
        data: BatchData,
        lower: List[Any],
        upper: List[Any],
        seq: int = 0,
        count: Optional[int] = None,
        since: Optional[List[Any]] = None,
    ):
        self._data = data
        self.get = data.get
        self.items = data.items
        self.lower = lower
        self.upper = upper
        self.since = lower if since is None else since
        self.seq = seq
        self.count = sum(map(len, data.values())) if count is None else count
        self._sorted: Optional[List[Any]] = None

    def sorted_keys(self) -> List[Any]:
        """The keys in sorted order (computed once: the batch does not change)."""
        if self._sorted is None:
            self._sorted = sorted(self._data)
        return self._sorted
