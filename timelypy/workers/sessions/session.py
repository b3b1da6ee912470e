"""Driver sessions: a long-lived dataflow on any backend, driven from the caller's process.

``open_session(dataflow, workers=N, backend=...)`` builds ``dataflow(scope)`` on every worker and
keeps it running. ``dataflow`` returns a dict naming its handles: inputs (differential input
sessions or timely input handles), probes, captures and arrangements (the kinds of
:mod:`.handles`). From the driver (a script, a notebook, a Ray job):

>>> def dataflow(scope):
...     edges_in, edges = scope.new_collection()
...     degrees = edges.map(lambda e: e[0]).count()
...     return {"edges": edges_in, "degrees": degrees.capture(), "probe": degrees.probe(),
...             "by_node": degrees.arrange_by_key()}
>>> with open_session(dataflow) as s:
...     s.insert("edges", (1, 2)); s.insert("edges", (1, 3))
...     s.advance_to(1)
...     s.wait("probe")
...     s.lookup("by_node", 1)
{2: 1}

Updates are routed to a worker by the hash of the record (downstream operators exchange by key
anyway); ``advance_to`` and ``wait`` go to every worker. ``flush`` and ``advance_to`` return once
the workers hold the data (a worker busy computing takes it in between two steps; at most
:data:`~.serving.MAX_BACKLOG` updates may wait so); ``wait`` is where the computation is awaited,
and every wait honours its timeout, also while operators work. A wait for the time at which
updates were just made (``insert`` then ``wait`` without ``advance_to``) returns without them: it
warns with :class:`~timelypy.errors.PendingTimeWarning`.

Trust: each update is checked at the call (the record routable, the diff an integer, the time at
or after its input's; see :mod:`.batch`) and a bad one raises
:class:`~timelypy.errors.SessionInputError` without being buffered. A flush is atomic: every
worker first checks and stages its part, and only if none rejects anything do they all apply it.
If something is rejected then (or cannot be sent), the rejected updates are dropped and named in
the error, nothing of the batch is applied, the session's time does not move, and the other
updates stay buffered for the next flush (``pending`` counts them, ``discard()`` drops them).
Handle names and kinds are checked in the driver against the report every worker sends once at
start-up. A command that fails on a worker (:class:`~timelypy.errors.SessionCommandError`)
leaves the session usable; only a worker that fails, dies or hangs ends it (a worker that dies
is named by :class:`~timelypy.errors.WorkerDiedError`, not by its peers' reports of the death).
The session reaches its workers through a client: an :class:`InProcessClient` when the
backend's workers live in this process (the driver steps them itself, as on ``inline``; see
:mod:`.inprocess`), a :class:`RemoteClient` otherwise (each worker runs
the command loop of :mod:`.serving` and connects back to the driver over an authenticated
connection with a per-session key, as on ``processes`` and ``ray``; see :mod:`.remote`).
A session that is not closed is aborted when it is garbage-collected or the interpreter exits.
"""

from __future__ import annotations

import logging
import time as _time
import weakref
from typing import Any, Dict, List, Literal, Optional, Sequence, Union

from ...errors import InputClosedError, SessionInputError, TimelyError
from ...recovery.session import Checkpoints
from ..launch.backends import get_backend
from ..launch.defaults import resolve_run
from .batch import Batch
from .client import Dataflow, WithStatistics, WorkerClient, abandoned, connect
from .commands import Command
from .durable import CheckpointingSession, Durability
from .handles import HandleDirectory
from .inprocess import InProcessClient
from .inputs import SessionInputs
from .reads import SessionReads
from .remote import RemoteClient

__all__ = ["open_session", "DataflowSession", "WorkerClient", "InProcessClient", "RemoteClient"]

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- the session
class DataflowSession(CheckpointingSession, SessionInputs, SessionReads):
    """A running dataflow, driven from the caller's process. See :func:`open_session`.

    Its methods come in parts: the inputs (:mod:`.inputs`), the reads and waits
    (:mod:`.reads`) and the checkpoints (:mod:`.durable`).
    """

    def __init__(
        self,
        dataflow: Dataflow,
        workers: int,
        backend: str,
        timeout: float,
        options: Dict[str, Any],
        statistics: bool = False,
        progress: Optional[bool] = None,
        checkpoint: Optional[Checkpoints] = None,
        restore: Union[None, str, Checkpoints] = None,
    ) -> None:
        self.workers = workers
        self.backend = backend
        self.timeout = timeout
        self.statistics = statistics
        """The workers collect operator statistics (:meth:`stats`)."""
        self.progress = progress
        """Show the progress display during long waits (None: on a terminal only)."""
        self._sent = 0
        self._sent_before_wait = 0
        if statistics:
            dataflow = WithStatistics(dataflow)
        log.info("session: starting %d worker(s) on %s", workers, backend)
        self._batch = Batch()
        self._time: Any = 0
        self._closed = False
        self._broken: Optional[BaseException] = None
        self._client: WorkerClient = connect(backend, dataflow, workers, timeout, options)
        self._handles = HandleDirectory(self._client.handles)
        self._input_times: Dict[str, Any] = {name: 0 for name in self._handles.inputs()}
        # inputs with updates at their current time since it became their time: buffered
        # here, or sent to the workers (for the PendingTimeWarning of wait)
        self._fresh_buffered: set = set()
        self._fresh_sent: set = set()
        self._finalizer = weakref.finalize(self, abandoned, self._client)
        if checkpoint is None and isinstance(restore, Checkpoints):
            checkpoint = restore  # the restored job goes on checkpointing where it was
        self._durable = Durability(checkpoint, workers, timeout)
        if restore is not None:
            self._restore(restore)
        log.info(
            "session: %d worker(s) on %s ready (pids %s), handles %s",
            workers,
            backend,
            sorted(set(self._client.pids)),
            ", ".join(self.handle_names),
        )

    def _check_usable(self) -> None:
        if self._closed:
            raise InputClosedError("session: used after close()")
        if self._client.failure is not None:
            raise self._client.failure
        if self._broken is not None:
            raise self._broken

    def _call(
        self, targets: Sequence[int], command: Command, timeout: Optional[float] = None
    ) -> List[Any]:
        self._check_usable()
        return self._client.request([(i, command) for i in targets], timeout or self.timeout)

    @property
    def _everyone(self) -> List[int]:
        return list(range(self.workers))

    # -- public API -------------------------------------------------------------------
    @property
    def time(self) -> Any:
        """The time the inputs were last advanced to."""
        return self._time

    @property
    def pending(self) -> int:
        """The number of accepted updates not sent to the workers yet."""
        return len(self._batch)

    @property
    def worker_pids(self) -> List[int]:
        """The process id of every worker (this process's for in-process backends)."""
        return self._client.pids

    @property
    def handle_names(self) -> List[str]:
        """The names of the handles the dataflow returned."""
        return sorted(self._handles.report)

    def close(self, timeout: Optional[float] = None) -> None:
        """Flush, close the inputs, let the dataflow complete and stop the workers, within
        about ``timeout`` seconds (default: the session's): what has not stopped by then is
        killed. Idempotent. Rejected updates are still raised, after the workers stopped."""
        if self._closed:
            return
        timeout = timeout or self.timeout
        deadline = _time.monotonic() + timeout
        problem: Optional[BaseException] = None
        for _ in range(2):  # a rejection drops the bad updates: the rest goes on the second try
            if self._client.failure is not None or self._broken is not None:
                break
            try:
                self._flush(max(timeout / 2, 0.05))
                break
            except SessionInputError as exc:
                problem = problem or exc
            except TimelyError as exc:
                problem = exc
                break
        self._closed = True
        self._finalizer.detach()
        try:
            self._client.close(max(deadline - _time.monotonic(), 0.05))
        except TimelyError as exc:
            problem = problem or exc
        log.info(
            "session: closed (%d worker(s) on %s)%s",
            self.workers,
            self.backend,
            f" with {type(problem).__name__}" if problem is not None else "",
        )
        if problem is not None:
            raise problem

    def abort(self) -> None:
        """Stop the workers at once, without completing the dataflow. Idempotent."""
        if not self._closed:
            self._closed = True
            self._finalizer.detach()
            log.info("session: aborting %d worker(s) on %s", self.workers, self.backend)
            self._client.abort()

    def __enter__(self) -> "DataflowSession":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False


def open_session(
    dataflow: Dataflow,
    workers: Optional[int] = None,
    backend: Optional[str] = None,
    timeout: float = 60.0,
    statistics: bool = False,
    progress: Optional[bool] = None,
    checkpoint: Optional[Checkpoints] = None,
    restore: Union[None, str, Checkpoints] = None,
    **options: Any,
) -> DataflowSession:
    """Build ``dataflow`` on ``workers`` workers of ``backend`` and return a driver session.

    ``dataflow(scope)`` must return a dict naming its handles. ``timeout`` bounds every wait
    (start-up, commands, ``wait``, ``close``). Backend ``options`` are passed to the backend's
    ``run`` (e.g. ``address`` for Ray); ``driver_host`` sets the address remote workers connect
    back to (the default 127.0.0.1 suits one machine); ``heartbeat_timeout`` (processes, ray;
    default 30 s) is how long a worker may stay silent before it is declared hung and the
    session fails with :class:`~timelypy.errors.WorkerHungError`. An unknown backend name raises
    :class:`ValueError` listing the registered ones. ``workers`` and ``backend`` left unset come
    from the environment (:mod:`timelypy.workers.launch.defaults`), else 1 and ``"inline"``.
    ``statistics=True`` makes the workers collect operator statistics
    (:meth:`DataflowSession.stats`);
    ``progress`` forces the progress display of long waits on or off (default: on a terminal
    only, or as ``TIMELYPY_PROGRESS`` says; see :mod:`timelypy.workers.display`).

    ``checkpoint=Checkpoints(location, ...)`` lets the session take checkpoints
    (:meth:`DataflowSession.checkpoint`; automatically too if the
    :class:`~timelypy.recovery.session.Checkpoints` say so). ``restore=location`` (or a
    ``Checkpoints``, which then also serves as ``checkpoint``) restores the newest valid
    checkpoint there onto the new workers, any number of them: the session continues at the
    checkpoint's time (:attr:`DataflowSession.restored_at`). See ``docs/recovery.md``.
    """
    workers, backend, options = resolve_run(workers, backend, options)
    runner = get_backend(backend)  # fail early and clearly on an unknown name
    for where in (checkpoint, restore):
        location = where.location if isinstance(where, Checkpoints) else where
        if runner.local_workers is None and str(location).startswith("memory://"):
            raise ValueError(
                f"open_session: checkpoint location {location!r} is a memory file system of "
                f"this process, which the workers of the {backend!r} backend (other processes) "
                f"cannot reach: use a directory or an object store URL"
            )
    return DataflowSession(
        dataflow,
        workers,
        backend,
        timeout,
        dict(options),
        statistics=statistics,
        progress=progress,
        checkpoint=checkpoint,
        restore=restore,
    )
