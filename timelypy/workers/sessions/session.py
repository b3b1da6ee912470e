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
:data:`~.service.MAX_BACKLOG` updates may wait so); ``wait`` is where the computation is awaited,
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
the command loop of :mod:`.service` and connects back to the driver over an authenticated
connection with a per-session key, as on ``processes`` and ``ray``; see :mod:`.remote`).
A session that is not closed is aborted when it is garbage-collected or the interpreter exits.
"""

from __future__ import annotations

import logging
import time as _time
import warnings
import weakref
from typing import Any, Dict, List, Literal, Optional, Sequence, Set, Tuple, Union

from ...errors import (
    InputClosedError,
    PendingTimeWarning,
    SessionCommandError,
    SessionInputError,
    TimelyError,
    short_repr,
)
from ...order import less_equal
from ...recovery.session import Checkpoints
from ...stats import Statistics
from ..display import begin_wait, end_wait
from ..launch.backends import get_backend
from ..launch.defaults import resolve_run
from ..worker import pending_time_message
from .batch import Batch, check_time, check_update, check_updates, rejected_error, route
from .client import Dataflow, WithStatistics, WorkerClient, abandoned, connect
from .durable import CheckpointingSession, Durability
from .handles import Changes, HandleDirectory, Input, Lookup, Probe
from .inprocess import InProcessClient
from .remote import RemoteClient
from .service import (
    ADVANCE,
    CHANGES,
    COMMIT,
    DISCARD,
    FLUSH,
    FRONTIER,
    LOOKUP,
    STAGE,
    STATS,
    WAIT,
    Command,
)

__all__ = ["open_session", "DataflowSession", "WorkerClient", "InProcessClient", "RemoteClient"]

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- the session
class DataflowSession(CheckpointingSession):
    """A running dataflow, driven from the caller's process. See :func:`open_session`."""

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
        self._ahead: Set[Any] = set()  # times after the session's of updates made (update_at)
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

    def update(self, input: str, data: Any, diff: int = 1, time: Any = None) -> None:
        """Change ``data`` by ``diff`` in the named input, at ``time`` (default: the input's
        time). Checked now: :class:`~timelypy.errors.SessionInputError` (or
        :class:`~timelypy.errors.UnknownHandleError`) and nothing buffered if it is wrong."""
        self._check_usable()
        self._handles.require(input, Input)
        now = self._input_times[input]
        self._batch.add(
            check_update(
                input,
                data,
                diff,
                now if time is None else time,
                now,
                self.workers,
                self._handles.retracts(input),
            )
        )
        if time is None or time == now:
            self._fresh_buffered.add(input)
        else:
            self._ahead.add(time)

    def update_many(
        self, input: str, records: Sequence[Any], diffs: Any = 1, times: Any = None
    ) -> None:
        """Change every one of ``records`` in the named input: by ``diffs`` (one int for all,
        or one per record) at ``times`` (None: the input's time; one time for all, or one per
        record). The bulk form of :meth:`update`, for loads: all are checked first, and if one
        is wrong :class:`~timelypy.errors.SessionInputError` names it and none is buffered.

        >>> import timelypy as tp
        >>> def dataflow(scope):
        ...     numbers_in, numbers = scope.new_collection()
        ...     return {"numbers": numbers_in, "probe": numbers.probe(), "out": numbers.capture()}
        >>> with tp.open_session(dataflow) as s:
        ...     s.update_many("numbers", [1, 2, 3], diffs=[1, 1, 2])
        ...     s.advance_to(1); s.wait("probe")
        ...     sorted(s.changes("out"))
        [(1, 0, 1), (2, 0, 1), (3, 0, 2)]
        """
        self._check_usable()
        self._handles.require(input, Input)
        now = self._input_times[input]
        self._batch.extend_columns(
            check_updates(
                input, records, diffs, times, now, self.workers, self._handles.retracts(input)
            )
        )
        if len(records) and _includes(times, now):
            self._fresh_buffered.add(input)
        if len(records) and times is not None and self._durable.checkpoints is not None:
            self._ahead |= _times_after(times, now)

    def insert(self, input: str, data: Any) -> None:
        """Add one copy of ``data`` to the named input at the input's current time.

        Buffered in the driver until the next :meth:`flush` (or :meth:`advance_to`); checked
        now (see :meth:`update`).

        >>> import timelypy as tp
        >>> def dataflow(scope):
        ...     words_in, words = scope.new_collection()
        ...     return {"words": words_in, "probe": words.probe(), "out": words.capture()}
        >>> with tp.open_session(dataflow) as s:
        ...     s.insert("words", "hello")
        ...     s.advance_to(1); s.wait("probe")
        ...     s.changes("out")
        [('hello', 0, 1)]
        """
        self.update(input, data, 1)

    def remove(self, input: str, data: Any) -> None:
        """Remove one copy of ``data`` from the named input at the input's current time (a
        differential input; a timely input takes no retractions).

        >>> import timelypy as tp
        >>> def dataflow(scope):
        ...     words_in, words = scope.new_collection()
        ...     return {"words": words_in, "probe": words.probe(), "out": words.capture()}
        >>> with tp.open_session(dataflow) as s:
        ...     s.insert("words", "hello"); s.advance_to(1)
        ...     s.remove("words", "hello"); s.advance_to(2); s.wait("probe")
        ...     sorted(s.changes("out"))
        [('hello', 0, 1), ('hello', 1, -1)]
        """
        self.update(input, data, -1)

    def update_at(self, input: str, data: Any, time: Any, diff: int) -> None:
        """Change ``data`` by ``diff`` at ``time``, which must be at or after the input's time
        (an update "in the future": it takes effect once the inputs advance past ``time``).

        >>> import timelypy as tp
        >>> def dataflow(scope):
        ...     nums_in, nums = scope.new_collection()
        ...     return {"nums": nums_in, "probe": nums.probe(), "out": nums.capture()}
        >>> with tp.open_session(dataflow) as s:
        ...     s.update_at("nums", 7, time=3, diff=2)
        ...     s.advance_to(4); s.wait("probe")
        ...     s.changes("out")
        [(7, 3, 2)]
        """
        self.update(input, data, diff, time)

    def discard(self) -> List[Tuple[str, Any, Any, int]]:
        """Drop the updates not sent yet; returns them as ``(input, data, time, diff)``."""
        self._fresh_buffered.clear()
        return [(u.input, u.data, u.time, u.diff) for u in self._batch.clear()]

    def flush(self) -> None:
        """Send the buffered updates to the workers that own them, atomically, and flush every
        input; returns once the workers hold them (see the module docstring). If any update
        is rejected, nothing is applied: the rejected ones are dropped and named in a
        :class:`~timelypy.errors.SessionInputError`, the others stay buffered."""
        self._flush(self.timeout)

    def _flush(self, timeout: float) -> None:
        self._check_usable()
        if not self._batch:
            self._client.request([(i, (FLUSH,)) for i in self._everyone], timeout)
            return
        parts = self._batch.parts(self.workers)
        self._check_sendable(parts)
        size = len(self._batch)
        watch = begin_wait(
            f"session: loading {size:,} updates", lambda: {"input": repr(self._time)}, self.progress
        )
        try:
            self._stage_and_commit(parts, timeout)
        finally:
            end_wait(watch)
        self._sent += size
        self._fresh_sent |= self._fresh_buffered
        self._fresh_buffered.clear()

    def _stage_and_commit(self, parts: Any, timeout: float) -> None:
        stage = [
            (
                i,
                (
                    STAGE,
                    [(name, records, times, diffs) for name, records, times, diffs, _ in parts[i]],
                ),
            )
            for i in self._everyone
        ]
        try:
            replies = self._client.request(stage, timeout)
        except BaseException:
            self._discard_staged(timeout)
            raise
        rejected: List[Tuple[int, str]] = []
        for i, reply in zip(self._everyone, replies):
            positions = {name: pos for name, _, _, _, pos in parts[i]}
            for name, position, reason in reply:
                chosen = positions.get(name, [])
                chosen = chosen if position < 0 else chosen[position : position + 1]
                rejected += [(p, f"on worker {i}: {reason}") for p in chosen]
        if rejected:
            self._discard_staged(timeout)
            self._reject(rejected)
        self._batch.drop()  # from here on the batch is the workers'
        try:
            self._client.request([(i, (COMMIT,)) for i in self._everyone], timeout)
        except SessionCommandError as exc:
            self._broken = TimelyError(
                f"session: a batch was applied in part only, the session cannot go on ({exc})"
            )
            raise self._broken from exc

    def _check_sendable(self, parts: Any) -> None:
        """Reject the records that cannot be sent (pickled, encoded) to and between workers."""
        rejected: List[Tuple[int, str]] = []
        for by_input in parts.values():
            for _, records, _, _, positions in by_input:
                if self._client.unsendable(records) is None:
                    continue
                for data, p in zip(records, positions):
                    reason = self._client.unsendable([data])
                    if reason is not None:
                        rejected.append((p, reason))
        if rejected:
            self._reject(rejected)

    def _reject(self, rejected: List[Tuple[int, str]]) -> None:
        reasons = dict(rejected)
        taken = self._batch.take_out(reasons)
        positions = sorted(reasons)
        raise rejected_error([(u, reasons[p]) for u, p in zip(taken, positions)], len(self._batch))

    def _discard_staged(self, timeout: float) -> None:
        if self._client.failure is not None:
            return
        try:
            self._client.request([(i, (DISCARD,)) for i in self._everyone], timeout)
        except TimelyError:  # the worker failed or is slow: a later STAGE replaces it anyway
            pass

    def advance_to(self, time: Any, input: Optional[str] = None) -> None:
        """Advance every input (or one) to ``time``, after flushing the buffered updates. The
        session's time moves only once every worker took the advance in (workers of other
        processes apply it, in order, between two steps; wait with :meth:`wait`)."""
        self._check_usable()
        if input is None:
            time = check_time(None, time, self._time, "advance_to")
            for name, now in self._input_times.items():
                check_time(name, time, now, "advance_to")
            names = list(self._input_times)
        else:
            self._handles.require(input, Input)
            time = check_time(input, time, self._input_times[input], "advance_to")
            names = [input]
        self.flush()
        self._call(self._everyone, (ADVANCE, input, time))
        if input is None:
            self._time = time
        for name in names:
            self._input_times[name] = time
            self._fresh_buffered.discard(name)
            self._fresh_sent.discard(name)
        if self._ahead:
            self._ahead = {t for t in self._ahead if t == time or not less_equal(t, time)}
        if input is None:
            self._checkpoint_if_due(time)

    def wait(self, probe: str, time: Any = None, timeout: Optional[float] = None) -> None:
        """Step until the named probe has passed every time before ``time`` (default: the
        session time) on every worker; :class:`WaitTimeoutError` after ``timeout`` seconds
        (default: the session's), also while operators work (on ``inline`` the wait is checked
        between operator activations: one activation cannot be interrupted; elsewhere the
        workers compute on, and a later wait takes up where this one stopped).
        :class:`~timelypy.errors.StallError` at once if an input holds the probe before
        ``time`` (nothing can advance it while the driver waits);
        :class:`~timelypy.errors.PendingTimeWarning` if an input took updates at ``time``
        itself (the wait returns without them: ``advance_to`` past it first).

        A wait longer than half a second shows the progress display when it is on (see
        ``progress`` of :func:`open_session`): the input time, the probe's frontier (in-process
        backends), the updates loaded since the previous wait and their rate."""
        self._check_usable()
        self._handles.require(probe, Probe)
        t = self._time if time is None else time
        self._warn_unadvanced(probe, t)
        loaded = self._sent - self._sent_before_wait
        peek = getattr(self._client, "peek_frontier", None)

        def status() -> Dict[str, Any]:
            return {
                "input": repr(self._time),
                "records": loaded,
                "output": repr(peek(probe)) if peek is not None else None,
            }

        watch = begin_wait(f"session: waiting for {probe!r} to pass {t!r}", status, self.progress)
        try:
            self._call(self._everyone, (WAIT, probe, t), timeout)
        finally:
            end_wait(watch)
        self._sent_before_wait = self._sent

    def _warn_unadvanced(self, probe: str, t: Any) -> None:
        """Warn if an input took updates at ``t`` itself, which a wait for ``t`` (the times
        before it) returns without."""
        for name in sorted(self._fresh_buffered | self._fresh_sent):
            if self._input_times[name] == t:
                warnings.warn(
                    pending_time_message(f"session: wait({probe!r})", f"{name!r} at {t!r}", t),
                    PendingTimeWarning,
                    stacklevel=3,
                )

    def stats(self) -> Statistics:
        """Every worker's operator statistics so far (records and batches in and out, runs, time
        spent, arrangement sizes), as a :class:`~timelypy.stats.Statistics`. The session must
        be opened with ``statistics=True``; on Ray the workers also export them as Ray metrics.

        >>> import timelypy as tp
        >>> def dataflow(scope):
        ...     nums_in, nums = scope.new_collection()
        ...     return {"nums": nums_in, "probe": nums.filter(lambda x: x > 2).probe()}
        >>> with tp.open_session(dataflow, statistics=True) as s:
        ...     for x in range(5):
        ...         s.insert("nums", x)
        ...     s.advance_to(1); s.wait("probe")
        ...     [op["records_out"] for op in s.stats().find("filter")]
        [2]
        """
        self._check_usable()
        return Statistics(self._call(self._everyone, (STATS,)))

    def changes(self, capture: str) -> List[Any]:
        """The updates a captured collection produced since the last call (all workers)."""
        self._check_usable()
        self._handles.require(capture, Changes)
        return [item for part in self._call(self._everyone, (CHANGES, capture)) for item in part]

    def lookup(self, arranged: str, key: Any) -> Dict[Any, int]:
        """The current values (with counts) of ``key`` in a named arrangement: asks the worker
        that owns the key."""
        self._check_usable()
        self._handles.require(arranged, Lookup)
        owner = route(key, self.workers, f"lookup in {arranged!r}: key")
        reason = self._client.unsendable([key])
        if reason is not None:
            raise SessionInputError(
                f"session: lookup in {arranged!r}, worker {owner}: key "
                f"{short_repr(key)} of type {type(key).__name__} cannot be used: "
                f"{reason}",
                worker=owner,
                value=key,
            )
        return self._call([owner], (LOOKUP, arranged, key))[0]

    def frontier(self, probe: str) -> List[Any]:
        """The named probe's frontier on worker 0."""
        self._check_usable()
        self._handles.require(probe, Probe)
        return self._call([0], (FRONTIER, probe))[0]

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


def _includes(times: Any, now: Any) -> bool:
    """``times`` (None: the input's time; one time; or one per record) includes ``now``."""
    if times is None:
        return True
    if isinstance(times, (list, tuple, range)):
        return now in times
    try:
        return any(t == now for t in times)
    except TypeError:  # one time for all
        return bool(times == now)


def _times_after(times: Any, now: Any) -> Set[Any]:
    """The distinct times of ``times`` (one time, or one per record) other than ``now``."""
    try:
        found = set(times) if isinstance(times, (list, tuple, range)) else {times}
    except TypeError:
        found = {times}
    found.discard(now)
    return found


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
    get_backend(backend)  # fail early and clearly on an unknown name
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
