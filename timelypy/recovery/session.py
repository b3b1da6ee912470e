"""A session's checkpoints: where they go and how often, and each worker's part of one.

:class:`Checkpoints` says where a session's checkpoints live and when they are taken
(``open_session(..., checkpoint=Checkpoints(...))``). The functions below are the worker's side
of a checkpoint and of a restore: each runs *in the worker's process*, between two steps, so a
worker's state goes to the store directly and never passes through the driver.
:class:`CheckpointSchedule` is the driver's clock for the automatic checkpoints, and
:func:`fingerprint_difference` says how a checkpoint's program differs from the one restoring it.

A checkpoint is taken at a closed time ``F`` (see :mod:`timelypy.dataflow.state`): the session
advanced every input to ``F`` and the workers stepped until no operator can still receive or
hold work before ``F`` (:func:`~timelypy.recovery.snapshot.closed_at`). Every worker then writes
the states of its stateful operators (:func:`~timelypy.recovery.snapshot.snapshot_worker`) with
:meth:`~timelypy.recovery.store.CheckpointStore.write_part`, and the driver publishes the
manifest that makes the checkpoint visible.
"""

from __future__ import annotations

import logging
import os
import time as _time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Tuple

from .manifest import fingerprint_difference

if TYPE_CHECKING:
    from ..errors import CheckpointError
    from ..workers.worker import Worker
    from .store import CheckpointStore, Manifest

__all__ = [
    "Checkpoints",
    "CheckpointSchedule",
    "open_store",
    "worker_closed_at",
    "write_worker_part",
    "worker_fingerprint",
    "restore_worker_from",
    "restore_candidates",
    "fingerprint_difference",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checkpoints:
    """Where a session's checkpoints live and when they are taken.

    ``location``: a local directory (a relative path is made absolute here, in the process
    that makes the ``Checkpoints``: workers elsewhere, such as Ray actors, run in other
    directories), or a URL of any file system fsspec or ``pyarrow.fs`` knows
    (``s3://bucket/job``, ``gs://...``, ``hdfs://...``); every worker writes its part there
    directly. ``every_seconds``: take one at the first ``advance_to`` at least this many seconds
    after the previous one (or after the start). ``every_times``: take one at every
    ``every_times``-th ``advance_to`` of all inputs. Both unset: only when
    :meth:`~timelypy.workers.sessions.session.DataflowSession.checkpoint` is called. ``keep``:
    how many checkpoints to keep (older files are deleted once a newer checkpoint is
    published). ``signing_key``: a key the user holds, with which the store signs every file
    and checks it on restore (advised when records need pickle: see ``docs/recovery.md``).

    >>> Checkpoints("/tmp/job", every_times=10)
    Checkpoints(location='/tmp/job', every_seconds=None, every_times=10, keep=3)
    """

    location: str
    every_seconds: Optional[float] = None
    every_times: Optional[int] = None
    keep: int = 3
    signing_key: Optional[bytes] = None

    def __post_init__(self) -> None:
        if not isinstance(self.location, str) or not self.location:
            raise ValueError(
                f"Checkpoints: location must be a non-empty str, got {self.location!r}"
            )
        if self.every_seconds is not None and not self.every_seconds > 0:
            raise ValueError(f"Checkpoints: every_seconds must be > 0, got {self.every_seconds!r}")
        if self.every_times is not None and (
            not isinstance(self.every_times, int) or self.every_times < 1
        ):
            raise ValueError(
                f"Checkpoints: every_times must be an int >= 1, got {self.every_times!r}"
            )
        if not isinstance(self.keep, int) or self.keep < 1:
            raise ValueError(f"Checkpoints: keep must be an int >= 1, got {self.keep!r}")
        if "://" not in self.location and not os.path.isabs(self.location):
            # the workers resolve the path in their own directories (a Ray actor's is Ray's):
            # a relative path means the one of the process that makes the Checkpoints
            object.__setattr__(self, "location", os.path.abspath(self.location))

    def __repr__(self) -> str:  # the signing key stays out of logs and tracebacks
        return (
            f"Checkpoints(location={self.location!r}, every_seconds={self.every_seconds!r}, "
            f"every_times={self.every_times!r}, keep={self.keep!r})"
        )

    @property
    def automatic(self) -> bool:
        """Checkpoints are taken without being asked for."""
        return self.every_seconds is not None or self.every_times is not None


class CheckpointSchedule:
    """The driver's clock for automatic checkpoints: :meth:`due` after each ``advance_to`` of
    every input, :meth:`taken` after each checkpoint (automatic or asked for)."""

    def __init__(self, checkpoints: Checkpoints) -> None:
        self.checkpoints = checkpoints
        self.advances = 0
        self.last = _time.monotonic()

    def due(self) -> Optional[str]:
        """Count one advance; the reason a checkpoint is due now, or None."""
        self.advances += 1
        every_times, every_seconds = self.checkpoints.every_times, self.checkpoints.every_seconds
        if every_times is not None and self.advances >= every_times:
            return f"{self.advances} advances since the last checkpoint"
        elapsed = _time.monotonic() - self.last
        if every_seconds is not None and elapsed >= every_seconds:
            return f"{elapsed:.1f} s since the last checkpoint"
        return None

    def taken(self) -> None:
        """A checkpoint was published: count from now."""
        self.advances = 0
        self.last = _time.monotonic()


_STORES: Dict[Tuple[str, int, Optional[bytes]], "CheckpointStore"] = {}


def open_store(checkpoints: Checkpoints) -> "CheckpointStore":
    """The store of ``checkpoints`` in this process (one per location, kept for reuse: it
    remembers what it wrote, which makes the next checkpoint incremental)."""
    from .store import CheckpointStore

    key = (checkpoints.location, checkpoints.keep, checkpoints.signing_key)
    store = _STORES.get(key)
    if store is None:
        store = _STORES[key] = CheckpointStore(
            checkpoints.location, keep=checkpoints.keep, signing_key=checkpoints.signing_key
        )
    return store


def worker_closed_at(worker: "Worker", time: Any) -> bool:
    """No operator of the worker can still receive or hold work before ``time``."""
    from .snapshot import closed_at

    return closed_at(worker, time)


def write_worker_part(
    worker: "Worker", checkpoints: Checkpoints, checkpoint_id: str, time: Any
) -> Dict[str, Any]:
    """Snapshot every stateful operator of the worker and write it as the worker's part of
    checkpoint ``checkpoint_id``; returns the part's description for the manifest. Refuses
    (:class:`~timelypy.errors.CheckpointError`) if the worker is not closed at ``time``."""
    from ..errors import CheckpointError
    from .snapshot import closed_at, snapshot_worker

    if not closed_at(worker, time):
        raise CheckpointError(
            f"checkpoint {checkpoint_id}: worker {worker.index} is not closed at {time!r}: "
            f"operators can still receive or hold work before it"
        )
    states = snapshot_worker(worker)
    return open_store(checkpoints).write_part(checkpoint_id, worker.index, states)


def worker_fingerprint(worker: "Worker") -> Dict[str, str]:
    """The program's shape on this worker: operator id -> description."""
    from .snapshot import program_fingerprint

    return program_fingerprint(worker)


def restore_candidates(checkpoints: Checkpoints) -> Iterator["Manifest"]:
    """The published checkpoints of ``checkpoints``' location, newest first, whose manifest
    reads and verifies; one that does not is skipped with a warning naming the file and why
    (its chunks are verified when the workers read them: :func:`restore_worker_from`)."""
    from ..errors import CheckpointError

    store = open_store(checkpoints)
    for checkpoint_id in store.checkpoints():
        try:
            manifest = store.manifest(checkpoint_id)
        except CheckpointError as exc:
            log.warning("checkpoint store %s: skipping %s: %s", checkpoints.location, exc.path, exc)
            continue
        yield manifest


def restore_worker_from(
    worker: "Worker", checkpoints: Checkpoints, manifest: "Manifest"
) -> "Optional[CheckpointError]":
    """Read the checkpoint ``manifest``'s chunks this worker needs from the store (each file
    verified: only the chunks holding its key groups, when the worker count divides the key
    groups) and restore this worker's operators from the pieces it owns; its inputs end at the
    checkpoint's time. Returns None once restored, or the
    :class:`~timelypy.errors.CheckpointError` naming the file that cannot be read: then
    nothing is restored, and the driver may try an older checkpoint."""
    from ..errors import CheckpointError
    from .snapshot import restore_worker

    try:
        states = open_store(checkpoints).read_states(
            manifest, peers=worker.peers, index=worker.index
        )
    except CheckpointError as exc:
        return exc
    restore_worker(worker, states, manifest.time)
    return None
