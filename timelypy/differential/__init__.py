"""The differential layer: collections, arrangements, join / reduce / iterate."""

from .arrange import Arranged
from .collection import CapturedCollection, Collection, concatenate
from .input import InputSession, new_collection, new_collection_from
from .iterate import Variable
from .trace import Batch, Spine, TraceHandle

__all__ = [
    "Arranged",
    "Batch",
    "CapturedCollection",
    "Collection",
    "InputSession",
    "Spine",
    "TraceHandle",
    "Variable",
    "concatenate",
    "new_collection",
    "new_collection_from",
]
