"""Trace data: batches with their descriptions, cursors, the spine and views of it.

Nothing here knows about operators, trace agents or collections (as differential-dataflow's
``trace`` module below its ``operators``).
"""

from .batch import Batch, BatchData, BatchReader, Vals
from .builder import BatchBuilder
from .cursor import Cursor
from .lifecycle import SpineState
from .spine import Spine
from .view import TraceView, wrap_items

__all__ = [
    "Batch",
    "BatchBuilder",
    "BatchData",
    "BatchReader",
    "Cursor",
    "Spine",
    "SpineState",
    "TraceView",
    "Vals",
    "wrap_items",
]
