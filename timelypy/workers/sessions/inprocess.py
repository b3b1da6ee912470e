"""The session client for workers in the driver's process (the ``inline`` backend).

An :class:`InProcessClient` runs a session's commands as method calls on each worker's
:class:`~.service.HandleService` and waits by stepping the workers itself, round-robin. A wait
checks its deadline after every step and, inside a step, before every operator activation: it
overruns its timeout by at most one operator's activation, which cannot be interrupted.
"""

from __future__ import annotations

import os
import threading
import time as _time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ...errors import (
    SessionCommandError,
    WaitTimeoutError,
    WorkerError,
    describe_exception,
    format_exception_safely,
)
from ...instrument import OperatorScheduled
from ..collector import thaw
from ..worker import Worker, tuned_gc
from .handles import Dataflow, describe_handles
from .remote import Request
from .service import CLOSED_AT, WAIT, Command, HandleService

__all__ = ["InProcessClient"]


class InProcessClient:
    """Workers in the driver's process: commands are method calls, waiting is stepping."""

    def __init__(self, workers: List[Worker], dataflow: Dataflow) -> None:
        self._workers = workers
        self._services = [HandleService(w, dataflow) for w in workers]
        self._alarm = _DeadlineAlarm(workers)
        self.failure: Optional[BaseException] = None

    @property
    def handles(self) -> Dict[str, Any]:
        """The handles of worker 0, described."""
        return describe_handles(self._services[0].handles)

    @property
    def pids(self) -> List[int]:
        """This process, once per worker."""
        return [os.getpid()] * len(self._workers)

    def unsendable(self, values: Sequence[Any]) -> Optional[str]:
        """Nothing is serialised in process."""
        return None

    def request(self, commands: Request, timeout: float) -> List[Any]:
        """Run the commands one after the other; a ``WAIT`` steps every worker."""
        if self.failure is not None:
            raise self.failure
        deadline = _time.monotonic() + timeout
        results: List[Any] = []
        failed: Optional[Tuple[int, Command, Exception]] = None
        for i, command in commands:
            try:
                results.append(self._run(i, command, deadline, timeout))
            except (WaitTimeoutError, WorkerError):
                raise
            except Exception as exc:  # the command failed; the workers are intact
                results.append(None)
                failed = failed or (i, command, exc)
        if failed is not None:
            i, command, error = failed
            raise SessionCommandError(
                f"session: {command[0]!r} failed on worker {i}: "
                f"{type(error).__name__}: {describe_exception(error)}",
                worker=i,
                traceback_text=format_exception_safely(error),
            ) from error
        return results

    def _run(self, i: int, command: Command, deadline: float, timeout: float) -> Any:
        service = self._services[i]
        if command[0] == CLOSED_AT:
            self._step_until(
                lambda: service.closed_at(command[1]),
                deadline,
                f"worker {i} was not closed at {command[1]!r} within {timeout} s",
            )
            return None
        if command[0] != WAIT:
            return service.handle(command)
        _, probe, t = command
        service.probe_passed(probe, t)  # a bad time fails here, before any step
        service.check_wait(probe, t)
        self._step_until(
            lambda: service.probe_passed(probe, t),
            deadline,
            f"probe {probe!r} did not pass {t!r} within {timeout} s",
        )
        return None

    def _step_until(self, condition: Callable[[], bool], deadline: float, what: str) -> None:
        """Step every worker, round-robin, until ``condition()``; ``what`` says what timed out.
        A worker whose step raises fails the session. The collector is tuned meanwhile, as
        in every backend's workers (a process of its own gets it for its whole life).

        The deadline is checked after every step and, once it passed, before every operator
        activation (a :class:`_DeadlineAlarm` arms a :class:`_DeadlineSink` on each worker's
        instruments at the deadline): a wait overruns its timeout by at most one operator's
        activation. A step cut short this way leaves the dataflow intact; the next wait
        carries on."""
        if condition():
            return
        self._alarm.start(deadline)
        try:
            with tuned_gc(freeze=True):
                self._step_while_not(condition, deadline, what)
        finally:
            self._alarm.stop()

    def _step_while_not(self, condition: Callable[[], bool], deadline: float, what: str) -> None:
        while not condition():
            for w in self._workers:
                try:
                    w.step()
                except _DeadlinePassed:
                    raise WaitTimeoutError(
                        f"session: {what} (interrupted on worker "
                        f"{w.index} between two operator activations)"
                    ) from None
                except Exception as exc:
                    text = format_exception_safely(exc)
                    self.failure = WorkerError(
                        f"worker {w.index} failed: {type(exc).__name__}: "
                        f"{describe_exception(exc)}\n{text}",
                        worker=w.index,
                        traceback_text=text,
                    )
                    raise self.failure from exc
            if _time.monotonic() > deadline:
                raise WaitTimeoutError(f"session: {what}")

    def close(self, timeout: float) -> None:
        """Close every input and step until every dataflow completed."""
        try:
            if self.failure is not None:
                return
            for w in self._workers:
                w.close_inputs()
            self._step_until(
                lambda: not any(w.has_dataflows() for w in self._workers),
                _time.monotonic() + timeout,
                f"the dataflow did not complete within {timeout} s after close",
            )
        finally:
            self._alarm.shut_down()
            thaw()

    def abort(self) -> None:
        """Nothing runs on its own: dropping the workers stops them."""
        self._alarm.shut_down()
        thaw()

    def peek_frontier(self, probe: str) -> List[Any]:
        """The named probe's frontier on worker 0, read without a command (for the progress
        display, from another thread: may be a step old)."""
        return list(self._services[0].frontier(probe))


class _DeadlinePassed(WaitTimeoutError):
    """Raised inside a worker's step, before an operator activation, once a wait's deadline
    passed (internal to :class:`InProcessClient`, which raises a WaitTimeoutError instead)."""


class _DeadlineAlarm:
    """Arms a :class:`_DeadlineSink` on the workers once the deadline of the wait under way
    passed, from a thread of its own (started at the first wait, a daemon), so a wait pays two
    lock round trips for its bound instead of an instrument event per activation (a sink
    installed for the whole wait cost about 100 µs per wait of a one-record epoch).

    The stepping thread calls :meth:`start` and :meth:`stop` around a wait; the sink is added
    under the lock that ``stop`` takes, so it is always removed by the wait that it bounds."""

    def __init__(self, workers: List[Worker]) -> None:
        self._workers = workers
        self._changed = threading.Condition()
        self._deadline: Optional[float] = None
        self._armed: Optional[_DeadlineSink] = None
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    def start(self, deadline: float) -> None:
        """A wait with this ``deadline`` (``time.monotonic``) begins."""
        with self._changed:
            self._deadline = deadline
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, daemon=True, name="timelypy-session-deadline"
                )
                self._thread.start()
            self._changed.notify()

    def stop(self) -> None:
        """The wait ended (done, timed out or failed): disarm."""
        with self._changed:
            self._deadline = None
            if self._armed is not None:
                for w in self._workers:
                    w.instruments.remove(self._armed)
                self._armed = None

    def shut_down(self) -> None:
        """End the thread (the session closed or was abandoned)."""
        with self._changed:
            self._closed = True
            self._changed.notify()

    def _run(self) -> None:
        with self._changed:
            while not self._closed:
                if self._deadline is None or self._armed is not None:
                    self._changed.wait()
                    continue
                remaining = self._deadline - _time.monotonic()
                if remaining > 0:
                    self._changed.wait(remaining)
                    continue
                self._armed = _DeadlineSink(self._deadline)
                for w in self._workers:
                    w.instruments.add(self._armed)


class _DeadlineSink:
    """An instrument sink that stops a step before the next operator activation once
    ``deadline`` (``time.monotonic``) passed. The scope schedules a child inside a block that
    keeps the dataflow consistent when the child raises (its reports are moved and it stays
    scheduled), so the step can simply be taken up again later."""

    __slots__ = ("deadline",)

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, event: Any) -> None:
        if type(event) is OperatorScheduled and _time.monotonic() > self.deadline:
            raise _DeadlinePassed("the wait's deadline passed")
