"""The differential layer: collections, arrangements, join / reduce / iterate.

Layers, bottom up (as differential-dataflow's crate): trace data (:mod:`.trace`: batches,
cursors, the spine), the consolidation kernel (:mod:`.consolidation`) and the fusion grammar
(:mod:`.fusion`); trace agents (:mod:`.agent`); operators returning streams (:mod:`.arrange`,
:mod:`.join`, the :mod:`.reduce` package, :mod:`.consolidate`, :mod:`.iterate`); and
the facades on top (:mod:`.collection`, :mod:`.captured`, :mod:`.input`).
"""

from .agent import TraceAgent, TraceHandle
from .captured import CapturedCollection
from .collection import Arranged, Collection, Variable, concatenate
from .input import InputSession, new_collection, new_collection_from
from .trace import Batch, Cursor, Spine

__all__ = [
    "Arranged",
    "Batch",
    "CapturedCollection",
    "Collection",
    "Cursor",
    "InputSession",
    "Spine",
    "TraceAgent",
    "TraceHandle",
    "Variable",
    "concatenate",
    "new_collection",
    "new_collection_from",
]
