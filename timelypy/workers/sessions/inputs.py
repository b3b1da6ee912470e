"""A driver session's inputs: updates checked at the call, atomic flushes, advances.

:class:`SessionInputs` is the part of :class:`~.session.DataflowSession` that takes updates
(each checked at the call, see :mod:`.batch`), sends them to the workers that own them in two
phases (``STAGE`` then ``COMMIT``, or ``DISCARD`` if anything is rejected: a flush is atomic)
and advances the inputs. See :mod:`.session` for the whole contract.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from ...differential.column_message import ColumnMessage, key_of_update
from ...errors import SessionCommandError, TimelyError
from ..display import begin_wait, end_wait
from .base import SessionCore
from .batch import check_columns, check_time, check_update, check_updates, rejected_error
from .commands import ADVANCE, COMMIT, DISCARD, FLUSH, STAGE
from .handles import Input

__all__ = ["SessionInputs"]


class SessionInputs(SessionCore):
    """The input methods of :class:`~.session.DataflowSession`."""

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

    def update_many(
        self,
        input: str,
        records: Sequence[Any],
        diffs: Any = 1,
        times: Any = None,
        *,
        routable: bool = False,
        owners: Optional[Sequence[int]] = None,
    ) -> None:
        """Change every one of ``records`` in the named input: by ``diffs`` (one int for all,
        or one per record) at ``times`` (None: the input's time; one time for all, or one per
        record). The bulk form of :meth:`update`, for loads: all are checked first, and if one
        is wrong :class:`~timelypy.errors.SessionInputError` names it and none is buffered.
        One diff and one time for all are checked once, not per record.

        ``routable=True``: the caller vouches that every record is routable and hashable
        (:func:`~timelypy.hashing.stable_hash` accepts it), as records built from checked
        columns of ints, floats, bools, strings and bytes are; they are then not hashed to
        check them, only (with more than one worker) to route them, unless ``owners`` gives
        the worker of each (``stable_hash(record) % workers``, e.g. hashed column-wise).

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
                input,
                records,
                diffs,
                times,
                now,
                self.workers,
                self._handles.retracts(input),
                routable,
                owners if routable else None,
            )
        )
        if len(records) and _includes(times, now):
            self._fresh_buffered.add(input)

    def update_columns(self, input: str, keys: Any, values: Any, diffs: Any = None) -> int:
        """Change the records ``(keys[i], values[i])`` of the named input by ``diffs[i]``
        (None: insert each once; one int: the same for all) at the input's time, given as
        columns: the key and the value each a 1-d numpy or Arrow array of ints, floats or
        bools (a scalar) or a list or tuple of them (a tuple). Checked now (as
        :meth:`update_many`); the updates travel to the worker owning their key as one
        column message each (no tuple per record), and an arrangement of the input keeps
        them as columns (see :meth:`~timelypy.differential.input.InputSession.update_columns`).
        Returns the number of updates buffered (zero diffs are dropped).

        >>> import numpy as np, timelypy as tp
        >>> def dataflow(scope):
        ...     pairs_in, pairs = scope.new_collection()
        ...     return {"pairs": pairs_in, "probe": pairs.probe(), "out": pairs.capture()}
        >>> with tp.open_session(dataflow) as s:
        ...     s.update_columns("pairs", np.array([1, 2]), np.array([10, 20]))
        ...     s.advance_to(1); s.wait("probe")
        ...     sorted(s.changes("out"))
        2
        [((1, 10), 0, 1), ((2, 20), 0, 1)]
        """
        self._check_usable()
        self._handles.require(input, Input)
        now = self._input_times[input]
        message = check_columns(input, keys, values, diffs, now, self._handles.retracts(input))
        if isinstance(message, list):  # columns the object path takes (a NaN, -0.0)
            data = [u[0] for u in message]
            self.update_many(input, data, [u[2] for u in message])
            return len(data)
        if not len(message):
            return 0
        self._batch.extend_message(input, message.route(key_of_update, self.workers) or [])
        self._fresh_buffered.add(input)
        return len(message)

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
                if isinstance(records, ColumnMessage) or self._client.unsendable(records) is None:
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
        if input is None:
            self._checkpoint_if_due(time)


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
