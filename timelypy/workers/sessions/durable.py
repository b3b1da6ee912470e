"""A driver session's checkpoints and restore: the driver's half of :mod:`timelypy.recovery`.

A :class:`Durability` belongs to one session. :meth:`Durability.checkpoint` takes a checkpoint
at the session's time ``F``: every worker steps until it is closed at ``F`` (``CLOSED_AT``),
writes its part to the store from its own process (``CHECKPOINT``), and the driver publishes the
manifest (with worker 0's program fingerprint) that makes the checkpoint visible at once.
:meth:`Durability.restore` reads the newest valid checkpoint's manifest, compares its program
with the new one (``FINGERPRINT``), lets every worker read the parts and keep what it owns
(``RESTORE``: any number of workers, so a restore rescales; if a file cannot be read, nothing is
restored and the checkpoint before is tried), steps them until closed at the checkpoint's time
and sets the captures' restored contents apart (``MARK_RESTORED``).
"""

from __future__ import annotations

import logging
import time as _time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Union

from ...errors import TimelyError, WaitTimeoutError
from ...recovery.session import (
    Checkpoints,
    CheckpointSchedule,
    fingerprint_difference,
    open_store,
    restore_candidates,
)
from ...recovery.store import Manifest
from .batch import Batch
from .handles import Changes, HandleDirectory
from .service import (
    CHECKPOINT,
    CLOSED_AT,
    FINGERPRINT,
    MARK_RESTORED,
    RESTORE,
    RESTORED,
    Command,
)

__all__ = ["Durability", "CheckpointingSession", "Call", "check_closed_inputs"]

log = logging.getLogger(__name__)

_RESERVED_EXTRA = frozenset({"backend", "inputs"})

Call = Callable[[Sequence[int], Command, Optional[float]], List[Any]]
"""The session's ``_call``: run a command on the given workers, with a timeout (None: the
session's)."""


class Durability:
    """A session's checkpoint settings, schedule and restore (see the module docstring)."""

    def __init__(self, checkpoints: Optional[Checkpoints], workers: int, timeout: float) -> None:
        self.checkpoints = checkpoints
        self.workers = workers
        self.timeout = timeout
        self.schedule = (
            CheckpointSchedule(checkpoints)
            if checkpoints is not None and checkpoints.automatic
            else None
        )
        self.restored_at: Any = None
        self.last: Optional["Manifest"] = None
        self.extras: Dict[str, Callable[[], Any]] = {}
        """Contributions to every checkpoint's manifest ``extra``: name -> function."""

    @property
    def everyone(self) -> List[int]:
        """Every worker's index."""
        return list(range(self.workers))

    def due(self) -> Optional[str]:
        """After an ``advance_to`` of every input: why an automatic checkpoint is due, or None."""
        return None if self.schedule is None else self.schedule.due()

    def settle(self, call: Call, time: Any, what: str) -> None:
        """Step every worker until it is closed at ``time``; :class:`WaitTimeoutError` naming
        the workers that are not, after the session's timeout."""
        try:
            call(self.everyone, (CLOSED_AT, time), self.timeout)
        except WaitTimeoutError as exc:
            raise WaitTimeoutError(
                f"session: {what} at {time!r}: the workers are not closed at {time!r} within "
                f"{self.timeout} s: operators still hold work before it ({exc})"
            ) from exc

    def checkpoint(self, call: Call, time: Any, extra: Any) -> "Manifest":
        """Take a checkpoint at the closed time ``time`` (the caller checked the inputs)."""
        from ...errors import CheckpointError

        if self.checkpoints is None:
            raise CheckpointError(
                "session: checkpoint() needs a location: open the session with "
                "open_session(..., checkpoint=timelypy.Checkpoints(location))"
            )
        started = _time.monotonic()
        self.settle(call, time, "checkpoint")
        store = open_store(self.checkpoints)
        checkpoint_id = store.new_checkpoint_id()
        parts = call(self.everyone, (CHECKPOINT, self.checkpoints, checkpoint_id, time), None)
        fingerprint = call([0], (FINGERPRINT,), None)[0]
        manifest = store.publish(checkpoint_id, time, self.workers, parts, fingerprint, extra)
        if self.schedule is not None:
            self.schedule.taken()
        self.last = manifest
        log.info(
            "session: checkpoint %s at time %r published to %s in %.3f s (%d worker part(s))",
            checkpoint_id,
            time,
            self.checkpoints.location,
            _time.monotonic() - started,
            self.workers,
        )
        return manifest

    def restore(self, call: Call, source: Union[str, Checkpoints]) -> "Manifest":
        """Restore every worker from the newest valid checkpoint at ``source``; returns its
        manifest (the session continues at ``manifest.time``). A checkpoint with a file the
        workers cannot read (missing, truncated, corrupt, badly signed) is skipped with a
        warning naming the file, and the one before it is tried; with none left,
        :class:`~timelypy.errors.CheckpointError` names the location and every file skipped."""
        from ...errors import CheckpointError, RecoveryError

        checkpoints = source if isinstance(source, Checkpoints) else Checkpoints(source)
        started = _time.monotonic()
        now = call([0], (FINGERPRINT,), None)[0]
        skipped: List[CheckpointError] = []
        for manifest in restore_candidates(checkpoints):  # newest first
            difference = fingerprint_difference(manifest.fingerprint, now)
            if difference:
                raise RecoveryError(
                    f"session: checkpoint {manifest.checkpoint_id} at {checkpoints.location!r} "
                    f"is of another program; its operators differ:\n  " + "\n  ".join(difference)
                )
            replies = call(self.everyone, (RESTORE, checkpoints, manifest), None)
            failed = {i: r for i, r in enumerate(replies) if r is not None}
            if not failed:
                break
            if len(failed) < self.workers:  # (every worker reads every file: not expected)
                raise RecoveryError(
                    f"session: checkpoint {manifest.checkpoint_id} at {checkpoints.location!r}: "
                    f"workers {sorted(failed)} could not read it ({next(iter(failed.values()))}) "
                    f"while the others restored it; open the session again"
                )
            error = next(iter(failed.values()))
            log.warning(
                "session: skipping checkpoint %s at %r: %s; trying the one before",
                manifest.checkpoint_id,
                checkpoints.location,
                error,
            )
            skipped.append(error)
        else:
            raise CheckpointError(
                f"session: no valid checkpoint to restore at {checkpoints.location!r}"
                + "".join(f"\n  skipped: {e}" for e in skipped),
                skipped[0].path if skipped else checkpoints.location,
                skipped[0].reason if skipped else "no valid checkpoint",
            )
        self.settle(call, manifest.time, "restore")
        call(self.everyone, (MARK_RESTORED,), None)
        self.restored_at = manifest.time
        self.last = manifest
        log.info(
            "session: restored checkpoint %s (time %r, %d worker(s)) from %s onto %d worker(s) "
            "in %.3f s",
            manifest.checkpoint_id,
            manifest.time,
            manifest.peers,
            checkpoints.location,
            self.workers,
            _time.monotonic() - started,
        )
        return manifest


def check_closed_inputs(input_times: dict, buffered: int, fresh: Sequence[str], time: Any) -> None:
    """Refuse a checkpoint at ``time`` unless every input is at ``time``, nothing is buffered
    and nothing was sent at ``time`` itself (:class:`TimelyError` saying what to do).

    Updates sent *ahead* (``update_at`` a later time, as an event-time input does for records
    ahead of its watermark) do not stop a checkpoint: once the workers are closed at ``time``
    the operators hold them as pending work at their times, and a checkpoint keeps that work
    as state."""
    behind = {name: t for name, t in input_times.items() if t != time}
    if behind:
        raise TimelyError(
            f"session: cannot checkpoint at {time!r}: inputs are at other times "
            f"({', '.join(f'{n!r} at {t!r}' for n, t in sorted(behind.items()))}); "
            f"advance every input to one time first"
        )
    if buffered:
        raise TimelyError(
            f"session: cannot checkpoint at {time!r}: {buffered} update(s) are buffered at or "
            f"after it; checkpoint before making them, or advance past them first"
        )
    if fresh:
        what = [f"{n!r} at {time!r}" for n in sorted(fresh)]
        raise TimelyError(
            f"session: cannot checkpoint at {time!r}: updates were sent at it "
            f"({', '.join(what)}); checkpoint before making them, or advance past them first"
        )


class CheckpointingSession:
    """The checkpoint and restore methods of :class:`~.session.DataflowSession`."""

    backend: str
    _time: Any
    _input_times: Dict[str, Any]
    _batch: Batch
    _fresh_buffered: Set[str]
    _fresh_sent: Set[str]
    _durable: Durability
    _handles: HandleDirectory

    def _call(
        self, targets: Sequence[int], command: Command, timeout: Optional[float] = None
    ) -> List[Any]:  # pragma: no cover - the session's
        raise NotImplementedError

    @property
    def _everyone(self) -> List[int]:  # pragma: no cover - the session's
        raise NotImplementedError

    def _check_usable(self) -> None:  # pragma: no cover - the session's
        raise NotImplementedError

    def abort(self) -> None:  # pragma: no cover - the session's
        raise NotImplementedError

    # -- checkpoints --------------------------------------------------------------------
    def checkpoint(self) -> "Manifest":
        """Take a checkpoint at the session's time ``F`` and return its manifest.

        Every input must be at ``F`` (``advance_to(F)``) with no update made at or after ``F``
        yet (else :class:`~timelypy.errors.TimelyError` says what to do). The workers step
        until no operator holds work before ``F`` (bounded by the session's timeout:
        :class:`~timelypy.errors.WaitTimeoutError`), each writes its operators' states to the
        store, then the driver publishes the manifest: the checkpoint is visible at once or
        not at all. Needs ``open_session(..., checkpoint=Checkpoints(location))``.
        See ``docs/recovery.md``.
        """
        self._check_usable()
        time = self._time
        fresh = sorted(self._fresh_buffered | self._fresh_sent)
        check_closed_inputs(self._input_times, len(self._batch), fresh, time)
        extra = {"backend": self.backend, "inputs": sorted(self._input_times)}
        for name, contribute in self._durable.extras.items():
            extra[name] = contribute()
        return self._durable.checkpoint(self._call, time, extra)

    def _checkpoint_if_due(self, time: Any) -> None:
        """After an ``advance_to`` of every input: the automatic checkpoint, if one is due. One
        that cannot be taken now (an input behind the others, updates buffered or sent at this
        time) is put off to the next advance, with a warning."""
        reason = self._durable.due()
        if reason is None:
            return
        fresh = sorted(self._fresh_buffered | self._fresh_sent)
        try:
            check_closed_inputs(self._input_times, len(self._batch), fresh, time)
        except TimelyError as exc:
            log.warning("session: automatic checkpoint at %r put off: %s", time, exc)
            return
        log.info("session: automatic checkpoint at %r (%s)", time, reason)
        self.checkpoint()

    def _restore(self, source: Union[str, Checkpoints]) -> None:
        try:
            manifest = self._durable.restore(self._call, source)
        except BaseException:
            self.abort()
            raise
        self._time = manifest.time
        self._input_times = {name: manifest.time for name in self._input_times}

    def add_checkpoint_extra(self, name: str, contribute: Callable[[], Any]) -> None:
        """Let ``contribute()`` add to every checkpoint this session takes: its value (plain
        data: None, bool, int, float, str, bytes, list, tuple, dict, ``Product``) is stored
        under ``name`` in the manifest's ``extra``, taken at the checkpoint's closed time. After
        a restore, ``session.last_checkpoint.extra[name]`` gives it back (absent when the
        checkpoint was taken before it was added). A source that feeds the session from outside
        records its position this way, in the same checkpoint as the state it produced (the
        :class:`~timelypy.connectors.spark.ForeachBatchSink` stores its last batch id). A second
        contribution under the same name replaces the first.
        """
        if not isinstance(name, str) or not name or name in _RESERVED_EXTRA:
            raise ValueError(
                f"session: add_checkpoint_extra: name {name!r} must be a non-empty str other "
                f"than {sorted(_RESERVED_EXTRA)}"
            )
        if not callable(contribute):
            raise TypeError(
                f"session: add_checkpoint_extra({name!r}, ...): contribute must be callable, "
                f"not {type(contribute).__name__}"
            )
        self._durable.extras[name] = contribute

    def remove_checkpoint_extra(self, name: str) -> None:
        """Stop the contribution ``name`` (no error when there is none)."""
        self._durable.extras.pop(name, None)

    @property
    def checkpoints(self) -> "Optional[Checkpoints]":
        """Where and when this session takes checkpoints (None: it takes none)."""
        return self._durable.checkpoints

    @property
    def restored_at(self) -> Any:
        """The time of the checkpoint the session was restored from (None: not restored).
        Captures held their state at that time once restored: :meth:`changes` returns only the
        changes after it, :meth:`restored` returns that state."""
        return self._durable.restored_at

    @property
    def last_checkpoint(self) -> "Optional[Manifest]":
        """The manifest of the last checkpoint this session took or restored (None: none)."""
        return self._durable.last

    def restored(self, capture: str) -> List[Any]:
        """What the named capture held when the session was restored: its contents at
        :attr:`restored_at`, delivered once as the state at that time (empty if the session
        was not restored). :meth:`changes` never returns these again."""
        self._check_usable()
        self._handles.require(capture, Changes)
        return [
            item for part in self._call(self._everyone, (RESTORED, capture), None) for item in part
        ]
