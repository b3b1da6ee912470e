"""Operators of the timely layer: the generic operator core and lean built-in operators.

Every operator is an :class:`~timelypy.progress.operate.Operate`: it reports consumed and
produced counts and capability changes through its ``shared`` buffers. Built-ins (map, filter,
flat_map, inspect, concat, feedback) hold no capabilities: they send only in response to the
messages they consume in the same activation, which justifies the send to the progress layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Tuple

from ..errors import TimelyError, offending_record, user_error
from ..progress.change_batch import ChangeBatch
from ..progress.frontier import MutableAntichain
from ..progress.operate import Operate
from .capability import Capability, InputCapability
from .channels import InputPort, OutputPort

if TYPE_CHECKING:
    from .scope import Scope

__all__ = [
    "OperatorCore",
    "OperatorInput",
    "OperatorOutput",
    "OperatorInfo",
    "GenericOperator",
    "LinearOperator",
]


class OperatorCore(Operate):
    """Common state of an operator: ports, frontiers, default summaries and capabilities."""

    def __init__(
        self,
        scope: "Scope",
        name: str,
        inputs: int,
        outputs: int,
        *,
        initial_capabilities: bool = True,
        summary: Optional[List] = None,
    ):
        super().__init__(name, inputs, outputs)
        self.scope = scope
        self.order = scope.order
        self.worker_index = scope.worker.index
        self.peers = scope.worker.peers
        self.subgraph = scope.subgraph
        self._initial_caps = initial_capabilities
        self._summary = summary
        self.index = self.subgraph.add_child(self)
        self.input_ports: List[InputPort] = [
            InputPort(self.subgraph, self.index) for _ in range(inputs)
        ]
        self.output_ports: List[OutputPort] = [
            OutputPort(
                self.index, o, self.shared.produceds[o], instruments=scope.worker.instruments
            )
            for o in range(outputs)
        ]
        self.input_frontiers = [
            MutableAntichain(self.order.le, self.order.is_total) for _ in range(inputs)
        ]

    def get_internal_summary(self) -> Tuple[List[List[List[Any]]], List[ChangeBatch]]:
        """Identity summaries from every input to every output (unless given), and ``peers``
        initial capabilities at the minimum time per output (unless disabled)."""
        if self._summary is not None:
            summary = self._summary
        else:
            ident = self.order.identity
            summary = [[[ident] for _ in range(self.outputs)] for _ in range(self.inputs)]
        caps = [ChangeBatch() for _ in range(self.outputs)]
        if self._initial_caps:
            for c in caps:
                c.update(self.order.minimum, self.peers)
        return summary, caps

    def activate(self) -> None:
        """Schedule this operator again at the next step."""
        self.subgraph.activations[self.index] = True
        if self.subgraph.parent is not None:
            self.subgraph.wake()

    adopt_frontiers = True

    def waiting_messages(self) -> int:
        """How many messages wait in this operator's input queues."""
        return sum(len(port.queue) for port in self.input_ports)

    def _apply_frontiers(self) -> bool:
        """Bring the input frontiers up to date; True if one moved."""
        if self.frontier_moved:  # the scope maintains them in place (adopted)
            self.frontier_moved = False
            return True
        changed = False
        for i, fb in enumerate(self.shared.frontiers):
            if fb.counts:
                if self.input_frontiers[i].update_iter(fb.drain_unsorted()):
                    changed = True
        return changed

    def schedule(self) -> bool:
        """Run the operator; True while it has work its capabilities do not show."""
        raise NotImplementedError


class OperatorInput:
    """One input of a generic operator, as seen by user logic.

    Iterating yields ``(capability, data)`` for each waiting message and counts it consumed.
    ``frontier`` is the input's :class:`~timelypy.progress.frontier.MutableAntichain`.
    """

    __slots__ = ("_op", "_port", "_consumed", "frontier")

    def __init__(self, op: OperatorCore, index: int):
        self._op = op
        self._port = op.input_ports[index]
        self._consumed = op.shared.consumeds[index]
        self.frontier = op.input_frontiers[index]

    def __iter__(self):
        q = self._port.queue
        consumed = self._consumed
        op = self._op
        while q:
            time, data = q.popleft()
            consumed.update(time, len(data))
            yield InputCapability(time, op), data

    def next(self):
        """The next ``(capability, data)`` or None."""
        q = self._port.queue
        if not q:
            return None
        time, data = q.popleft()
        self._consumed.update(time, len(data))
        return InputCapability(time, self._op), data

    def pending(self) -> bool:
        """Messages are waiting on this input."""
        return bool(self._port.queue)


class _Session:
    __slots__ = ("_out", "_time", "_buffer")

    def __init__(self, out: "OperatorOutput", time: Any):
        self._out = out
        self._time = time
        self._buffer: List[Any] = []

    def give(self, record: Any) -> None:
        """Send ``record`` at the session's time (buffered until the session ends)."""
        self._buffer.append(record)

    def give_iterator(self, records: Iterable[Any]) -> None:
        """Send every record of ``records`` at the session's time (buffered likewise)."""
        self._buffer.extend(records)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.flush()
        return False

    def flush(self) -> None:
        if self._buffer:
            self._out._port.push(self._time, self._buffer)
            self._buffer = []


class OperatorOutput:
    """One output of a generic operator: send data at a capability's time."""

    __slots__ = ("_op", "_port", "index")

    def __init__(self, op: OperatorCore, index: int):
        self._op = op
        self._port = op.output_ports[index]
        self.index = index

    def _time_of(self, cap: Any) -> Any:
        if isinstance(cap, Capability):
            if not cap.valid:
                raise TimelyError(
                    f"operator {self._op.name!r}: send with a dropped capability at {cap.time!r}"
                )
            if cap.output != self.index:
                raise TimelyError(
                    f"operator {self._op.name!r}: capability for output "
                    f"{cap.output} used on output {self.index}"
                )
            return cap.time
        if isinstance(cap, InputCapability):
            return cap.time
        raise TypeError(f"operator {self._op.name!r}: expected a capability, got {cap!r}")

    def send(self, cap: Any, data: List[Any]) -> None:
        """Send a list of records at ``cap``'s time (the list is not copied)."""
        self._port.push(self._time_of(cap), data)

    def session(self, cap: Any) -> _Session:
        """A buffer of records to send at ``cap``'s time; flushed on ``with`` exit or flush()."""
        return _Session(self, self._time_of(cap))


class OperatorInfo:
    """What user logic may know about its operator."""

    __slots__ = ("_op",)

    def __init__(self, op: OperatorCore):
        self._op = op

    @property
    def name(self) -> str:
        """The operator's name."""
        return self._op.name

    @property
    def index(self) -> int:
        """The operator's index in its scope."""
        return self._op.index

    @property
    def worker_index(self) -> int:
        """The index of the worker running it."""
        return self._op.worker_index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self._op.peers

    def activate(self) -> None:
        """Ask to be scheduled again at the next step (for operators with buffered work)."""
        self._op.activate()


class GenericOperator(OperatorCore):
    """An operator whose behaviour is user logic over its inputs and outputs.

    ``factory(capabilities, info)`` is called once with one capability (at the minimum time)
    per output and returns ``logic(inputs, outputs)``, called on every activation. The logic
    must drop or downgrade the capabilities it does not need, or the dataflow cannot complete.
    """

    def __init__(
        self,
        scope: "Scope",
        name: str,
        inputs: int,
        outputs: int,
        factory: Callable,
        *,
        summary: Optional[List] = None,
        adapt: Optional[Callable] = None,
    ):
        super().__init__(scope, name, inputs, outputs, summary=summary)
        self._adapt = adapt
        self._inputs = [OperatorInput(self, i) for i in range(inputs)]
        self._outputs = [OperatorOutput(self, o) for o in range(outputs)]
        # The initial capabilities are already counted (peers at the minimum time): mint them
        # without recording, as timely's operator builder does.
        caps = [
            Capability(
                self.order.minimum,
                self.shared.internals[o],
                self.order.le,
                o,
                self.name,
                record=False,
            )
            for o in range(outputs)
        ]
        try:
            self._logic = factory(caps, OperatorInfo(self))
        except TimelyError:
            raise
        except Exception as exc:
            raise user_error(self, exc, "its construction") from exc

    def schedule(self) -> bool:
        """Apply frontier changes and run the user's logic on the inputs and outputs."""
        self._apply_frontiers()
        try:
            if self._adapt is not None:
                self._adapt(self._logic, self._inputs, self._outputs)
            else:
                self._logic(self._inputs, self._outputs)
        except TimelyError:
            raise
        except Exception as exc:
            raise user_error(self, exc) from exc
        return False


class LinearOperator(OperatorCore):
    """A stateless one-input one-output operator applying ``batch_fn(data) -> data`` per message.

    Holds no capabilities. ``batch_fn`` is a whole-batch function (e.g. ``list(map(f, data))``),
    so the per-record cost is one C-level iteration plus the user's function.
    """

    frontier_interest = False

    def __init__(self, scope: "Scope", name: str, batch_fn: Callable[[List[Any]], List[Any]]):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        self._batch_fn = batch_fn
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._out = self.output_ports[0]
        self._frontier_buf = self.shared.frontiers[0]

    def schedule(self) -> bool:
        """Apply the batch function to every waiting message, keeping its time."""
        self._frontier_buf.clear()
        q = self._queue
        if q:
            consumed = self._consumed.counts  # count-table contract, short form (progress.kernel)
            out = self._out
            fn = self._batch_fn
            while q:
                time, data = q.popleft()
                consumed[time] = consumed.get(time, 0) + len(data)
                try:
                    result = fn(data)
                except TimelyError:
                    raise
                except Exception as exc:
                    raise user_error(self, exc, **offending_record(fn, data, time)) from exc
                if result:
                    out.push(time, result)
        return False
