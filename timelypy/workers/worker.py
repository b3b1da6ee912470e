"""The worker: builds dataflows, steps their operators, and talks to its peers via a fabric."""

from __future__ import annotations

import contextlib
import logging
import threading
import time as _time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

from ..communication.fabric import CONTROL, DATA, PROGRESS, Fabric, progress_message
from ..dataflow.worker_interface import ChannelTarget, InputSource
from ..errors import PendingTimeWarning, StallError, TimelyError, WaitTimeoutError
from ..instrument import ChannelReceived, Instruments, LinkBytes
from ..order import INT_ORDER
from ..progress.broadcast import Progcaster
from ..progress.reachability import Location
from ..progress.subgraph import Subgraph
from .collector import maybe_collect, paused_collector
from .display import begin_wait, end_wait, progress_enabled

if TYPE_CHECKING:
    from ..dataflow.scope import Scope

__all__ = [
    "Worker",
    "Build",
    "StallError",
    "run_worker",
    "tuned_gc",
    "observe_dataflows",
    "pending_time_message",
]


def pending_time_message(who: str, input: str, time: Any) -> str:
    """The :class:`~timelypy.errors.PendingTimeWarning` message: ``who`` waits for ``time``,
    but ``input`` (its description) took updates at ``time`` and was not advanced past it."""
    later = repr(time + 1) if type(time) is int else "a later time"
    return (
        f"{who} waits for the times before {time!r}, but input {input} took updates at "
        f"{time!r} itself: the wait returns without them (a time is complete only once the "
        f"inputs advance past it). Call advance_to({later}) (and flush()) first, then wait "
        f"for {later}."
    )


T = TypeVar("T")

log = logging.getLogger(__name__)

_Observer = Tuple[Callable[["Worker", Any], None], Optional[Callable[["Worker", str], None]]]
_observers: Tuple[_Observer, ...] = ()
_observers_lock = threading.Lock()


@contextlib.contextmanager
def observe_dataflows(
    built: Callable[["Worker", Any], None],
    starting: Optional[Callable[["Worker", str], None]] = None,
) -> Iterator[None]:
    """While the block runs, call ``built(worker, scope)`` after every :meth:`Worker.dataflow`
    of this process has built its root ``scope`` (operators, edges and nested scopes complete),
    and ``starting(worker, name)`` just before it calls the build function (to add instrument
    sinks that must see the dataflow being built).

    Observers see only workers of this process (the inline backend); they are how ``timelypy
    graph`` draws the dataflows a program builds::

        scopes = []
        with observe_dataflows(lambda worker, scope: scopes.append(scope)):
            tp.execute(build)

    An observer that raises fails the build. Nesting is allowed (observers are called in the
    order they were entered).
    """
    global _observers
    entry: _Observer = (built, starting)
    with _observers_lock:
        _observers = _observers + (entry,)
    try:
        yield
    finally:
        with _observers_lock:
            _observers = tuple(o for o in _observers if o is not entry)


class Worker:
    """One worker of a computation (SPMD: every worker builds the same dataflows).

    ``index`` and ``peers`` are this worker's number and the number of workers. Use
    :meth:`dataflow` to build, :meth:`step` to do work, and :meth:`step_until` /
    :meth:`step_while` to wait for probes. ``instruments`` is the worker's hub of event sinks
    (see :mod:`timelypy.instrument`). Implements the dataflow layer's
    :class:`~timelypy.dataflow.worker_interface.AsWorker`.
    """

    def __init__(self, index: int = 0, peers: int = 1, fabric: Optional[Fabric] = None):
        if peers > 1 and fabric is None:
            raise ValueError("a worker with peers > 1 needs a fabric")
        self.index = index
        self.peers = peers
        self.fabric = fabric
        self._next_id = 0
        self._dataflows: List[Subgraph] = []
        self._dataflow_count = 0
        self._inputs: List[InputSource] = []
        self._channels: Dict[int, ChannelTarget] = {}
        self._progcasters: Dict[int, Tuple[Progcaster, Subgraph]] = {}
        self._early: List[Tuple[int, Any]] = []  # see _hold_early
        self._building = False
        self.instruments = Instruments(index)
        self._link_totals: Dict[int, Tuple[int, int, int, int]] = {}
        self.control: List[Any] = []
        """Payloads of control messages (sent by a driver session), for its service loop."""
        self._retired: List[Subgraph] = []  # completed dataflows, released at the next step
        self._when_quiet: List[Callable[[], None]] = []  # see defer_until_quiet
        self._scope_names: Dict[str, int] = {}  # see scope_name
        self.steps = 0
        """How many times :meth:`step` ran (input sessions tell from it whether what they
        sent was taken in since)."""
        self.stepping = False
        """A :meth:`step` is under way (an operator's function is running)."""
        self.pace_inputs = True
        """Input pacing is on: :meth:`pace_input` may step this worker when a producer ran far
        ahead of it (see ``InputSession.max_pending``); a driver session, which steps it
        itself, turns this off."""

    # ----------------------------------------------------------------- identifiers
    def new_identifier(self) -> int:
        """A worker-wide counter: identical on every worker when construction is identical."""
        self._next_id += 1
        return self._next_id

    def register_channel(self, channel: int, target: ChannelTarget) -> None:
        """Deliver data messages arriving for ``channel`` to ``target``."""
        self._channels[channel] = target

    def new_progcaster(self, subgraph: Subgraph) -> Optional[Progcaster]:
        """The progress broadcaster of ``subgraph`` (None when this worker has no peers).

        The batch goes to the other workers through the fabric; this worker's own copy loops
        back at once (``loopback``), so the next round of the same step applies it."""
        if self.peers == 1:
            return None
        channel = self.new_identifier()
        fabric = self.fabric
        assert fabric is not None  # a worker with peers has one (see __init__)
        to_peers = getattr(fabric, "send_to_peers", None)
        if to_peers is None:
            others = [j for j in range(self.peers) if j != self.index]

            def to_peers(message: Any) -> None:
                for j in others:
                    fabric.send(j, message)

        def broadcast(batch: Any) -> None:
            to_peers(progress_message(channel, batch))

        progcaster = Progcaster(channel, broadcast, loopback=True)
        self._progcasters[channel] = (progcaster, subgraph)
        return progcaster

    def scope_name(self, name: str) -> str:
        """``name`` for a new scope (a dataflow or a nested scope), made unique on this worker:
        a repeated name gets ``#2``, ``#3``, ... Statistics and graph pictures key operators by
        scope name, so two scopes named alike would otherwise add up as one."""
        used = self._scope_names
        if name not in used:
            used[name] = 1
            return name
        k = used[name]
        while True:
            k += 1
            unique = f"{name}#{k}"
            if unique not in used:
                break
        used[name] = k
        used[unique] = 1
        return unique

    def register_input(self, source: InputSource) -> None:
        """Flush ``source`` at every step and close it in :meth:`close_inputs`."""
        self._inputs.append(source)

    def inputs(self) -> List[InputSource]:
        """The registered inputs (timely input handles and differential input sessions), in
        the order they were made."""
        return list(self._inputs)

    # ----------------------------------------------------------------- building
    def dataflow(self, fn: Callable[[Scope], T], name: Optional[str] = None) -> T:
        """Build a dataflow: calls ``fn(scope)`` on a new root scope and returns its result."""
        from ..dataflow.scope import Scope

        if self._building:
            raise TimelyError("worker.dataflow cannot be nested; use scope.iterative")
        if self._retired:
            self.release_completed()
        self._dataflow_count += 1
        name = self.scope_name(name or f"dataflow{self._dataflow_count}")
        root = Subgraph(name, INT_ORDER, peers=self.peers)
        root.instruments = self.instruments
        root.progcaster = self.new_progcaster(root)
        scope = Scope(self, root, INT_ORDER)
        observers = _observers
        for _, starting in observers:
            if starting is not None:
                starting(self, name)
        self._building = True
        try:
            result = fn(scope)
        finally:
            self._building = False
        root.finalize()
        self._dataflows.append(root)
        if self._early:  # what peers sent for it before it was built here (see _hold_early)
            early, self._early = self._early, []
            self._dispatch(early)  # in arrival order: each sender's progress stays in order
        for built, _ in observers:
            built(self, scope)
        log.debug(
            "worker %d/%d: built %s (%d operators)",
            self.index,
            self.peers,
            name,
            len(root.children) - 1,
        )
        return result

    def dataflows(self) -> List[Subgraph]:
        """The dataflows still running on this worker (their root subgraphs)."""
        return list(self._dataflows)

    @property
    def building(self) -> bool:
        """A dataflow is being built (its ``fn(scope)`` is running)."""
        return self._building

    def release_completed(self) -> None:
        """Release what completed dataflows held: each drops the traces no handle holds (see
        :meth:`Subgraph.retire`). Done at the next :meth:`step`, when another dataflow is
        built, and when the worker's ``build`` has returned; freeing millions of objects takes
        time, so not inside the step that completes the dataflow."""
        retired, self._retired = self._retired, []
        for df in retired:
            df.retire()
        if self._when_quiet and not self._dataflows:  # no dataflow left to wait for
            self._run_deferred()

    def defer_until_quiet(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` at the end of the next step that leaves the worker quiet, or
        once every dataflow has completed and been released, whichever comes first. For work
        that belongs to no update (freeing a trace nothing reads any more, say), done at a
        moment without any instead of inside the busy step that asked for it."""
        self._when_quiet.append(callback)

    def _run_deferred(self) -> None:
        deferred, self._when_quiet = self._when_quiet, []
        for callback in deferred:
            callback()

    pacing_steps = 1000
    """The most steps :meth:`pace_input` makes before it lets the producer go on."""

    def pace_input(self, source: InputSource) -> bool:
        """Input pacing, this worker's policy: ``source`` sent many updates into the dataflow
        since the worker last stepped and moves to a later time. Flushes ``source`` and steps
        until the worker is quiet (at most :attr:`pacing_steps` steps), so that the dataflow
        seals, joins and compacts them before more arrive; returns whether it did. Never from
        inside a step, while a dataflow is being built, or when :attr:`pace_inputs` is off
        (with peers a step may seal less: the frontier also waits for their inputs)."""
        if self.stepping or self._building or not self.pace_inputs:
            return False
        source.flush()
        for _ in range(self.pacing_steps):
            self.step()
            if self._quiet():
                break
        return True

    def has_dataflows(self) -> bool:
        """Some dataflow has not completed yet."""
        return bool(self._dataflows)

    # ----------------------------------------------------------------- running
    def _receive(self) -> int:
        fabric = self.fabric
        if fabric is None:
            return 0
        messages = fabric.recv_nowait()
        self._dispatch(messages)
        return len(messages)

    def _dispatch(self, messages: List[Tuple[int, Any]]) -> None:
        instruments = self.instruments
        for source, msg in messages:
            kind = msg[0]
            if kind == DATA:
                _, channel, time, data = msg
                target = self._channels.get(channel)
                if target is None:
                    self._hold_early(source, msg)
                    continue
                if instruments.enabled:
                    instruments.emit(ChannelReceived(self.index, channel, source, time, len(data)))
                target.push(time, list(data) if type(data) is tuple else data)
            elif kind == CONTROL:
                self.control.append(msg[1])
            elif kind == PROGRESS:
                _, channel, batch = msg
                entry = self._progcasters.get(channel)
                if entry is None:
                    self._hold_early(source, msg)
                    continue
                progcaster, subgraph = entry
                progcaster.deliver([((Location(*loc), t), d) for (loc, t), d in batch])
                subgraph.wake()
            else:  # pragma: no cover - defensive
                log.warning("worker %d: unknown message kind %r", self.index, kind)

    def _hold_early(self, source: int, msg: Any) -> None:
        """A message for a channel without a receiver here. A channel numbered past this
        worker's identifiers belongs to a dataflow a peer has built and this one not yet (the
        peer finished an earlier dataflow sooner): keep it until :meth:`dataflow` builds it, as
        timely buffers messages for channels not yet built; else it is stale progress."""
        channel = msg[1]
        if channel > self._next_id:
            self._early.append((source, msg))
        elif msg[0] == DATA:
            raise TimelyError(
                f"worker {self.index}: data from worker {source} for channel {channel}, "
                f"which has no receiver on this worker"
            )

    def step(self) -> bool:
        """Do some work on every dataflow; returns whether any dataflow is incomplete.

        One worker: each dataflow runs its rounds (:attr:`Subgraph.max_rounds`). With peers,
        a round schedules every dataflow once; then what arrived meanwhile is received and,
        while progress waits to be applied (this worker's own, which loops back at once, or a
        peer's) or messages arrived or operators are active, another round runs, up to
        :attr:`max_rounds`: frontiers move within the step, as on one worker, instead of one
        hop per step."""
        if self._retired:
            self.release_completed()
        self.steps += 1
        self.stepping = True
        try:
            incomplete = self._step()
        finally:
            self.stepping = False
        if self._when_quiet and self._dataflows and self._quiet():
            self._run_deferred()
        return incomplete

    def _step(self) -> bool:
        maybe_collect()
        for handle in self._inputs:
            handle.flush()
        received = 0 if self.fabric is None else self._receive()
        if self._dataflows:
            self._schedule_round()
            if self.fabric is not None:
                rounds = 1
                while rounds < self.max_rounds and self._dataflows:
                    arrived = self._receive()
                    received += arrived
                    if not (arrived or self._progress_pending()):
                        break
                    self._schedule_round()
                    rounds += 1
        if self.fabric is not None:
            if self.instruments.enabled:
                self._emit_link_bytes()
            self.fabric.flush()
            if not received and self._quiet():
                # Nothing to do until a peer sends something: block briefly instead of spinning.
                self.fabric.wait(self.idle_wait)
        return bool(self._dataflows)

    max_rounds = 8
    """Rounds of every dataflow per :meth:`step` on a worker with peers (see :meth:`step`)."""

    def _schedule_round(self) -> None:
        """Schedule every dataflow once; forget the completed ones."""
        done = []
        for df in self._dataflows:
            if not df.schedule():
                done.append(df)
        for df in done:
            self._dataflows.remove(df)
            self._retired.append(df)
            if df.progcaster is not None:
                self._progcasters.pop(df.progcaster.channel, None)
        if done:
            self._inputs = [h for h in self._inputs if not (h.closed and not h.has_pending())]

    def _progress_pending(self) -> bool:
        """Another round would do something: progress batches wait in a progress broadcaster,
        or some dataflow has active operators or unapplied progress."""
        for progcaster, _ in self._progcasters.values():
            if progcaster.pending():
                return True
        for df in self._dataflows:
            if df.has_work():
                return True
        return False

    idle_wait = 0.005
    """Seconds an idle worker with peers blocks waiting for a message at the end of a step."""

    def _emit_link_bytes(self) -> None:
        statistics = getattr(self.fabric, "link_statistics", None)
        if statistics is None:
            return
        for peer, totals in statistics().items():
            before = self._link_totals.get(peer, (0, 0, 0, 0))
            if totals != before:
                self._link_totals[peer] = totals
                self.instruments.emit(
                    LinkBytes(self.index, peer, *(a - b for a, b in zip(totals, before)))
                )

    def quiet(self) -> bool:
        """Nothing to do until more input arrives: no operator is active, no progress waits
        and no input holds records."""
        return self._quiet()

    def _quiet(self) -> bool:
        for df in self._dataflows:
            if df.has_work():
                return False
        for handle in self._inputs:
            if handle.has_pending():
                return False
        return True

    def _stall_hint(self) -> str:
        times = [h.describe() for h in self._inputs]
        return (
            f"inputs: {', '.join(times) or 'none'}; operators holding capabilities: "
            f"{self.capability_holders()}. Did you advance_to() and flush() the inputs?"
        )

    def step_while(
        self,
        condition: Callable[[], bool],
        timeout: Optional[float] = None,
        max_steps: Optional[int] = None,
    ) -> int:
        """Step while ``condition()`` holds; returns the number of steps.

        Raises :class:`~timelypy.errors.WaitTimeoutError` after ``timeout`` seconds or
        ``max_steps`` steps, and :class:`StallError` if all work is done and the condition
        still holds (it can never become false).
        """
        deadline = None if timeout is None else _time.monotonic() + timeout
        steps = 0
        quiet_steps = 0
        while condition():
            busy = self.step()
            steps += 1
            if not busy and condition() and self.fabric is None:
                raise StallError(
                    f"worker {self.index}: no dataflow has work left but the wait "
                    f"condition still holds"
                )
            if self.fabric is None:
                # One worker: a step after which nothing is scheduled or pending changes nothing,
                # so the condition can only stay true. Fail fast instead of spinning forever.
                quiet_steps = quiet_steps + 1 if self._quiet() else 0
                if quiet_steps >= 3 and condition():
                    raise StallError(
                        f"worker {self.index}: waiting, but nothing can change: "
                        f"{self._stall_hint()}"
                    )
            if max_steps is not None and steps >= max_steps:
                raise WaitTimeoutError(
                    f"worker {self.index}: condition still holds after {steps} steps"
                )
            if deadline is not None and _time.monotonic() > deadline:  # (a step costs more)
                raise WaitTimeoutError(
                    f"worker {self.index}: condition still holds after {timeout} s; operators "
                    f"holding capabilities: {self.capability_holders()}"
                )
        return steps

    def step_until(self, probe: Any, time: Any, timeout: Optional[float] = None) -> int:
        """Step until ``probe`` has passed every time before ``time``
        (``not probe.less_than(time)``).

        Raises :class:`StallError` at once when an open input of this worker holds the probe
        before ``time``: nothing can advance that input while this worker waits (the classic
        mistake of waiting without ``advance_to(time)`` and ``flush()``). Warns
        (:class:`~timelypy.errors.PendingTimeWarning`) when an input of this worker that feeds
        the probe took updates at ``time`` itself and was not advanced past it: the wait
        covers only the times before ``time``, so it returns without them.
        """
        self._warn_unadvanced(probe, time)
        if not probe.less_than(time):
            return 0
        watch = None
        if self.index == 0 and progress_enabled():  # a line on stderr for a long wait
            watch = begin_wait(
                f"worker 0: waiting for the probe to pass {time!r}",
                lambda: self._wait_status(probe),
                True,
            )
        try:
            return self._step_until(probe, time, timeout)
        finally:
            end_wait(watch)

    def _step_until(self, probe: Any, time: Any, timeout: Optional[float]) -> int:
        self.step()  # flushes the inputs (a session's advance_to takes effect here)
        if probe.less_than(time):
            holders = self.inputs_holding(probe, time)
            if holders:
                raise StallError(
                    f"worker {self.index}: waiting for the probe to pass {time!r}, but inputs of "
                    f"this worker hold it back: {', '.join(holders)}. Nothing advances them while "
                    f"the worker waits: call advance_to({time!r}) and flush() on them first."
                )
        return 1 + self.step_while(lambda: probe.less_than(time), timeout=timeout)

    def _warn_unadvanced(self, probe: Any, time: Any) -> None:
        """Warn if an input feeding ``probe`` holds updates at ``time`` that a wait for
        ``time`` does not cover (see :meth:`step_until`)."""
        subgraphs = [sg for sg, _ in getattr(probe, "targets", ())]
        for source in self._inputs:
            unadvanced = getattr(source, "unadvanced", None)
            at = unadvanced() if unadvanced is not None else None
            if at is None or at != time:
                continue
            capability = getattr(source, "capability", None)
            held = capability() if capability is not None else None
            if held is not None and not any(sg is held[0] for sg in subgraphs):
                continue  # an input of another dataflow
            message = pending_time_message(
                f"worker {self.index}: step_until", source.describe(), time
            )
            warnings.warn(message, PendingTimeWarning, stacklevel=3)

    def _wait_status(self, probe: Any) -> Dict[str, Any]:
        """What the progress display shows while :meth:`step_until` waits."""
        return {
            "input": ", ".join(h.describe() for h in self._inputs) or None,
            "output": repr(getattr(probe, "frontier", "?")),
        }

    def inputs_holding(self, probe: Any, time: Any) -> List[str]:
        """The open inputs of this worker whose capabilities keep ``probe`` before ``time``
        (their descriptions: name and time)."""
        out: List[str] = []
        targets = getattr(probe, "targets", ())
        for source in self._inputs:
            capability = getattr(source, "capability", None)
            held = capability() if capability is not None else None
            if held is None:
                continue
            subgraph, location, at = held
            if any(
                sg is subgraph and subgraph.holds_back(location, at, target, time)
                for sg, target in targets
            ):
                out.append(source.describe())
        return out

    def step_until_done(self, timeout: Optional[float] = None, stall_steps: int = 100_000) -> None:
        """Step until every dataflow completes (close your inputs first)."""
        deadline = None if timeout is None else _time.monotonic() + timeout
        steps = 0
        while self.step():
            steps += 1
            if deadline is not None and (steps & 63) == 0 and _time.monotonic() > deadline:
                raise WaitTimeoutError(
                    f"worker {self.index}: dataflows incomplete after {timeout} s; operators "
                    f"holding capabilities: {self.capability_holders()}"
                )
            if self.fabric is None and steps >= stall_steps and self._stalled():
                raise StallError(
                    f"worker {self.index}: dataflows cannot complete; operators holding "
                    f"capabilities: {self.capability_holders()}"
                )

    def _stalled(self) -> bool:
        return all(df.quiet() for df in self._dataflows)

    def close_inputs(self) -> None:
        """Close every input handle of this worker (done automatically by ``execute``)."""
        for source in self._inputs:
            source.close()

    def capability_holders(self) -> List[str]:
        """Which operators still hold capabilities, and at which times (for diagnostics)."""
        out: List[str] = []
        for df in self._dataflows:
            out.extend(f"{df.name}: {h}" for h in df.capability_holders())
        return out

    def __repr__(self) -> str:
        return f"Worker(index={self.index}, peers={self.peers})"


@contextlib.contextmanager
def tuned_gc(freeze: bool = False) -> Iterator[None]:
    """The collector policy while workers step (see :mod:`.collector`; paused by default;
    ``freeze``: see :func:`.collector.paused_collector`)."""
    with paused_collector(freeze):
        yield


Build = Callable[[Worker], Any]
"""A dataflow-building function: runs once per worker, its result is that worker's."""


def run_worker(
    worker: Worker, build: Callable[[Worker], Any], timeout: Optional[float] = None
) -> Any:
    """The body every backend runs on each worker: build, close inputs, step to completion."""
    log.debug("worker %d/%d: starting", worker.index, worker.peers)
    with tuned_gc():
        result = build(worker)
        worker.close_inputs()
        worker.step_until_done(timeout=timeout)
        worker.release_completed()
    log.debug("worker %d/%d: done", worker.index, worker.peers)
    return result
