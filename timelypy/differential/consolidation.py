"""Where operators import the consolidation kernel from.

The names of :mod:`timelypy.differential.kernel.consolidation` (as differential-dataflow's
``consolidation`` module: the one place that adds up the diffs of equal ``(data, time)`` pairs
and advances times to a compaction frontier), kept at this address for the operators of every
area.
"""

from __future__ import annotations

from .kernel.consolidation import (
    Update,
    accumulate,
    accumulate_at,
    accumulate_into,
    advance_and_consolidate,
    advance_time,
    consolidate,
)

__all__ = [
    "Update",
    "accumulate",
    "accumulate_at",
    "accumulate_into",
    "advance_and_consolidate",
    "advance_time",
    "consolidate",
]
