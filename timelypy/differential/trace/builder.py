"""The spine's merged batches: built in place by its merges, changed by nobody else.

A merge of geometric sizes copies each update O(1) times only if the older batch is updated in
place; sealed :class:`~.batch.Batch` es never change, so the spine copies one into a
:class:`BatchBuilder` the first time it merges into it, and from then on merges into the
builder (with the kernels of :mod:`timelypy.differential.kernel.merge`). Readers see a builder
through the same :class:`~.batch.BatchReader` methods as a sealed batch; the spine changes a
builder only during its maintenance, only once every reader has acknowledged the batches
merged, and never while a reader has it pinned (:meth:`~.spine.Spine.pin`).
"""

from __future__ import annotations

from typing import Any, List, Optional, Set

from .batch import BatchData, BatchReader

__all__ = ["BatchBuilder"]


class BatchBuilder(BatchReader):
    """A merged batch the spine owns and updates in place.

    ``compacted`` is the since frontier every time of it was last advanced to (by the spine's
    full compaction pass; None after a merge, which advances only some keys). ``several`` (at
    partially ordered times, once a compaction pass found them): the keys with other than one
    update, the only ones a compaction pass has work for; None if unknown.
    """

    __slots__ = ("compacted", "several", "data")

    def __init__(self, batch: BatchReader):
        data = {k: list(v) for k, v in batch.items()}  # the lists, not the updates
        self._data = data
        self.get = data.get
        self.items = data.items
        self.lower = batch.lower
        self.upper = batch.upper
        self.since = batch.since
        self.seq = batch.seq
        self.count = batch.count
        self.compacted: Optional[List[Any]] = None
        self.several: Optional[Set[Any]] = None
        self.data: BatchData = data
        """The dictionary the spine's kernels change (the spine's, not a reader's)."""
