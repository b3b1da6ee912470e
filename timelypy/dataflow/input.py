"""Input handles: how data from outside enters a dataflow."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Tuple

from ..errors import InputClosedError, TimeOrderError
from ..progress.kernel import move
from ..progress.reachability import Location
from .operator import OperatorCore
from .state import OperatorState

if TYPE_CHECKING:
    from .scope import Scope

__all__ = ["InputHandle", "InputOperator"]


class InputOperator(OperatorCore):
    """0 inputs, 1 output. Its handle writes produced counts and capability changes into the
    shared buffers directly, so they always travel together in one progress batch."""

    def __init__(self, scope: "Scope", name: str = "Input"):
        super().__init__(scope, name, 0, 1)

    def schedule(self) -> bool:
        """Nothing to do: the handle writes records and progress directly."""
        return False


class InputHandle:
    """Sends records into a dataflow at its current time and advances that time.

    >>> # inp, stream = scope.new_input(); inp.send(1); inp.advance_to(1); inp.close()

    Records are buffered and pushed on :meth:`advance_to`, :meth:`flush`, :meth:`close`, when
    the buffer is large, and at every ``worker.step()``.

    Example: ``handle, stream = scope.new_input()``; ``handle.send_batch([1, 2])``,
    ``handle.advance_to(1)``, ``handle.close()``.
    """

    BUFFER = 1024

    def __init__(self, op: InputOperator):
        self._op = op
        self._port = op.output_ports[0]
        self._internal = op.shared.internals[0]
        self._le = op.order.le
        self._now = op.order.minimum
        self._buffer: List[Any] = []
        self._early: List[Any] = []  # messages sent while the dataflow is being built
        self._closed = False
        self._fresh = 0  # records pushed at the current time since it became the time

    @property
    def time(self) -> Any:
        """The current time: records sent now carry it; earlier times are closed.

        Example: ``0`` at first; ``3`` after ``handle.advance_to(3)``."""
        return self._now

    @property
    def operator(self) -> InputOperator:
        """The input operator this handle feeds (its ``index`` names it in its scope)."""
        return self._op

    def discard_before(self, time: Any, record_time: Optional[Callable[[Any], Any]] = None) -> int:
        """Drop the records held (buffered, or held while the dataflow is being built) that
        belong before ``time``: the records of messages at earlier times, or, with
        ``record_time``, the records whose ``record_time(record)`` is not at or after ``time``
        (what a restore at ``time`` does with what the build sent). Returns how many."""
        le = self._le
        if record_time is None:

            def keep(t: Any, r: Any) -> bool:
                return bool(le(time, t))

        else:

            def keep(t: Any, r: Any) -> bool:
                return bool(le(time, record_time(r)))

        before = len(self._buffer) + sum(len(d) for _, d in self._early)
        self._buffer = [r for r in self._buffer if keep(self._now, r)]
        early = [(t, [r for r in d if keep(t, r)]) for t, d in self._early]
        self._early = [(t, d) for t, d in early if d]
        return before - len(self._buffer) - sum(len(d) for _, d in self._early)

    def snapshot_state(self) -> OperatorState:
        """The input's position: ``shared`` is ``{"time": ..., "closed": ...}``."""
        return OperatorState(shared={"time": self._now, "closed": self._closed})

    def restore_state(self, state: OperatorState) -> None:
        """Continue at the snapshot's time: drop what the build sent before it, advance."""
        time = (state.shared or {}).get("time", self._now)
        self.discard_before(time)
        if not self._closed and time != self._now:
            self.advance_to(time)

    @property
    def order(self) -> Any:
        """The :class:`~timelypy.order.TimeOrder` of the input's times.

        Example: ``handle.order.le(0, 1)`` is ``True``."""
        return self._op.order

    @property
    def name(self) -> str:
        """The input operator's name.

        Example: ``"Input"`` unless ``scope.new_input(name)`` said otherwise."""
        return self._op.name

    def capability(self) -> Optional[Tuple[Any, Location, Any]]:
        """``(subgraph, output location, time)`` of the capability this input holds, or None
        once it is closed (used to explain a wait that cannot finish).

        Example: ``(subgraph, location, 3)`` at time 3; ``None`` after ``close()``."""
        if self._closed:
            return None
        return self._op.subgraph, Location(self._op.index, 0, True), self._now

    def has_pending(self) -> bool:
        """Records are buffered, or held until the dataflow is built.

        Example: ``True`` after ``handle.send(x)``, ``False`` after ``handle.flush()``."""
        return bool(self._buffer or self._early)

    def unadvanced(self) -> Optional[Any]:
        """The current time if records were sent at it since it became the time: they are
        complete only once the input advances past it. None otherwise, and once closed.

        Example: ``0`` after ``handle.send("a")``; ``None`` after ``handle.advance_to(1)``."""
        if self._closed or not (self._fresh or self._buffer):
            return None
        return self._now

    def describe(self) -> str:
        """The input's name and time (for stall diagnostics).

        Example: ``"'Input' at 3"``."""
        return f"{self._op.name!r} at {self._now!r}" + (" (closed)" if self._closed else "")

    def send_updates(self, updates: Iterable[Tuple[Any, Any, int]]) -> None:
        """Send ``(record, time, count)`` triples: ``count`` copies of each record at its time
        (timely inputs carry no diffs, so ``count`` must be positive).

        Example: ``handle.send_updates([("a", 0, 2), ("b", 4, 1)])``."""
        for record, time, count in updates:
            if count < 1:
                raise ValueError(
                    f"input {self._op.name!r}: a timely input cannot retract {record!r} "
                    f"(count {count}); use a differential input (scope.new_collection)"
                )
            for _ in range(count):
                self.send(record, time)

    @property
    def closed(self) -> bool:
        """``close()`` was called: nothing more can be sent.

        Example: ``True`` after ``handle.close()``."""
        return self._closed

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise InputClosedError(f"input {self._op.name!r}: {what} after close()")

    def send(self, record: Any, time: Optional[Any] = None) -> None:
        """Send one record at the current time, or at ``time`` if given (at or after it).

        Example: ``handle.send("a")``; ``handle.send("b", time=5)``."""
        self._check_open("send")
        if time is None or time == self._now:
            self._buffer.append(record)
            if len(self._buffer) >= self.BUFFER:
                self.flush()
        else:
            self.send_batch([record], time)

    def send_batch(self, records: Iterable[Any], time: Optional[Any] = None) -> None:
        """Send many records at the current time (or at a later ``time``).

        Example: ``handle.send_batch(range(1000))``."""
        self._check_open("send_batch")
        if time is not None and time != self._now:
            if not self._le(self._now, time):
                raise TimeOrderError(
                    f"input {self._op.name!r}: cannot send at time {time!r}, before its current "
                    f"time {self._now!r}"
                )
            self.flush()
            data = list(records)
            if data:
                self._deliver(time, data)
            return
        self._buffer.extend(records)
        if len(self._buffer) >= self.BUFFER:
            self.flush()

    def send_message(self, data: Any) -> None:
        """Send ``data`` (a list of records, or a message holding them as columns) as one
        message at the current time, after the records buffered before it.

        Example: ``handle.send_message([1, 2, 3])``."""
        self._check_open("send_message")
        if not len(data):
            return
        self.flush()
        self._port.carry_columns()
        self._fresh += len(data)
        self._deliver(self._now, data)

    def _deliver(self, time: Any, data: List[Any]) -> None:
        # Until the dataflow is built, its consumers may not be connected yet: hold messages.
        if not self._op.subgraph.finalized:
            self._early.append((time, data))
            return
        if self._early:
            early, self._early = self._early, []
            for t, d in early:
                self._port.push(t, d)
        self._port.push(time, data)
        self._op.activate()

    def flush(self) -> None:
        """Push buffered records into the dataflow.

        Example: ``handle.flush()`` before ``worker.step()``, or let the step flush it."""
        if self._buffer:
            data, self._buffer = self._buffer, []
            self._fresh += len(data)
            self._deliver(self._now, data)
        elif self._early and self._op.subgraph.finalized:
            early, self._early = self._early, []
            for t, d in early:
                self._port.push(t, d)
            self._op.activate()

    def advance_to(self, time: Any) -> None:
        """Promise that no more records will be sent at times before ``time``.

        Example: ``handle.advance_to(1)``: time 0 can complete."""
        self._check_open("advance_to")
        now = self._now
        if time == now:
            return
        if not self._le(now, time):
            raise TimeOrderError(
                f"input {self._op.name!r}: cannot advance to {time!r}, before its current time "
                f"{now!r} (time only moves forward)"
            )
        self.flush()
        move(self._internal.counts, now, time)  # the capability moves from now to time
        self._now = time
        self._fresh = 0
        self._op.activate()

    def close(self) -> None:
        """Flush and release the input's capability: its consumers can complete. Idempotent.

        Example: ``handle.close()``, then ``worker.step_until_done()``."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._internal.update(self._now, -1)
        self._op.activate()
