"""A driver session's reads and waits: probes, captures, arrangements, statistics.

:class:`SessionReads` is the part of :class:`~.session.DataflowSession` that waits for probes
(bounded by a timeout, with the progress display of long waits) and reads what the workers
hold: captured changes, lookups in arrangements (at the worker that owns the key), frontiers
and operator statistics. See :mod:`.session` for the whole contract.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional

from ...errors import PendingTimeWarning, SessionInputError, short_repr
from ...stats import Statistics
from ..display import begin_wait, end_wait
from ..worker import pending_time_message
from .base import SessionCore
from .batch import route
from .commands import CHANGES, FRONTIER, LOOKUP, STATS, WAIT
from .handles import Changes, Lookup, Probe

__all__ = ["SessionReads"]


class SessionReads(SessionCore):
    """The read and wait methods of :class:`~.session.DataflowSession`."""

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
