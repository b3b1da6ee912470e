"""Durable jobs: checkpoints at closed times, restore without recomputing, rescale.

The recovery layer sits above the differential operators and below launch (the workers and
sessions call it; no operator imports it). Operators declare their state through the
:class:`~timelypy.dataflow.state.Stateful` protocol; :mod:`.snapshot` collects a worker's states
at a closed time and restores them onto a dataflow built anew (any number of workers: keyed
pieces go to the worker that owns their key); :mod:`.store` writes them to a checkpoint store (a
local directory or an object store) in the format of :mod:`.format`, and publishes a manifest
(:mod:`.manifest`) that makes a checkpoint visible atomically; :mod:`.session` holds the
settings (:class:`Checkpoints`) and the worker side of a session's checkpoint and restore.
"""

from .manifest import Manifest, fingerprint_difference
from .session import Checkpoints
from .store import CheckpointStore

__all__ = ["CheckpointStore", "Checkpoints", "Manifest", "fingerprint_difference"]
