"""Batches: immutable sets of updates grouped by key, with a description of their times."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

__all__ = ["Batch", "BatchData"]

BatchData = Dict[Any, List[Tuple[Any, Any, int]]]
"""``key -> [(val, time, diff), ...]``."""


class Batch:
    """An immutable (once sent) set of updates grouped by key, with its description.

    ``data[key]`` is a list of ``(val, time, diff)``. As in differential-dataflow's
    ``Description``, ``lower`` and ``upper`` are the frontiers (lists) of the times the batch
    covers (before compaction every time ``t`` of it has ``lower <= t`` and not
    ``upper <= t``), and ``since`` is the frontier its times may have been advanced to:
    accumulations are exact at times at or beyond ``since`` (the spine gives fresh batches the
    minimum time; by default it is ``lower``, where advancing changes no time of a fresh
    batch). ``seq`` numbers the spine's batches; ``count`` is the number of updates.
    ``owned`` batches were made by a spine merge, were never sent as messages, and may be
    updated in place by later merges.
    """

    __slots__ = (
        "data",
        "lower",
        "upper",
        "since",
        "seq",
        "count",
        "owned",
        "compacted",
        "several",
        "_sorted",
        "_sorted_len",
    )

    def __init__(
        self,
        data: BatchData,
        lower: List[Any],
        upper: List[Any],
        seq: int = 0,
        count: Optional[int] = None,
        owned: bool = False,
        since: Optional[List[Any]] = None,
    ):
        self.data = data
        self.lower = lower
        self.upper = upper
        self.since = lower if since is None else since
        self.seq = seq
        self.count = sum(map(len, data.values())) if count is None else count
        self.owned = owned
        self.compacted: Optional[List[Any]] = None
        """The since frontier every time of the batch was last advanced to (by the spine's
        full compaction pass; None after a merge, which advances only some keys)."""
        self.several: Optional[set] = None
        """For an owned batch whose spine tracks them (partially ordered times): the keys with
        other than one update, the only ones a compaction pass has work for; None if
        unknown."""
        self._sorted: Optional[List[Any]] = None
        self._sorted_len = -1

    def owned_copy(self) -> "Batch":
        """A copy the spine may update in place (the lists are copied, not the updates)."""
        copy = Batch(
            {k: list(v) for k, v in self.data.items()},
            self.lower,
            self.upper,
            self.seq,
            self.count,
            owned=True,
            since=self.since,
        )
        copy.compacted = self.compacted
        if self.several is not None:
            copy.several = set(self.several)
        return copy

    def sorted_keys(self) -> List[Any]:
        """The keys in sorted order (cached; recomputed if an owned batch changed)."""
        if self._sorted is None or self._sorted_len != len(self.data) or self.owned:
            self._sorted = sorted(self.data)
            self._sorted_len = len(self.data)
        return self._sorted

    def updates(self) -> List[Tuple[Any, Any, Any, int]]:
        """Every ``(key, val, time, diff)``."""
        return [(k, v, t, r) for k, vals in self.data.items() for v, t, r in vals]

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return (
            f"Batch(seq={self.seq}, keys={len(self.data)}, updates={self.count}, "
            f"lower={self.lower}, upper={self.upper}, since={self.since})"
        )
