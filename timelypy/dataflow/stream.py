"""Streams of timestamped record batches, and the operators that build new streams from them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional

from ..errors import TimelyError
from .capture import Captured, CaptureOperator
from .channels import Exchange, OutputPort
from .feedback import LoopHandle
from .fusion import fuse_records
from .operator import GenericOperator, LinearOperator, OperatorCore
from .probe import ProbeHandle, ProbeOperator

if TYPE_CHECKING:
    from .scope import Scope

__all__ = ["Stream", "ConcatOperator"]


class ConcatOperator(OperatorCore):
    """Merges several streams into one (no capabilities; identity summaries)."""

    frontier_interest = False

    def __init__(self, scope: "Scope", inputs: int, name: str = "Concat"):
        super().__init__(scope, name, inputs, 1, initial_capabilities=False)
        self._out = self.output_ports[0]

    def schedule(self) -> bool:
        """Forward every waiting message of every input to the one output."""
        out = self._out
        for i, port in enumerate(self.input_ports):
            self.shared.frontiers[i].clear()
            q = port.queue
            consumed = self.shared.consumeds[i]
            while q:
                time, data = q.popleft()
                consumed.update(time, len(data))
                out.push(time, data)
        return False


class Stream:
    """A stream of ``(time, records)`` messages from one operator output in one scope.

    Methods add operators to the stream's scope and return their output streams. Chains of
    ``map`` / ``filter`` / ``flat_map`` are fused into one operator (one pass per batch, see
    :mod:`timelypy.dataflow.fusion`); it is built when the chain is first consumed.

    Example: ``handle, stream = scope.new_input()``, then ``stream.map(str.upper).capture()``.
    """

    __slots__ = ("scope", "_port", "_base", "_chain")

    def __init__(
        self,
        scope: "Scope",
        port: Optional[OutputPort] = None,
        *,
        base: Optional["Stream"] = None,
        chain: Optional[List] = None,
    ):
        self.scope = scope
        self._port = port
        self._base = base
        self._chain = chain or []

    @property
    def port(self) -> OutputPort:
        """The operator output this stream reads (building a pending fused chain).

        Example: ``stream.port`` is the output that ``stream.connect_to(op, 0)`` attaches to."""
        if self._port is None:
            names = ">".join(kind for kind, _, _ in self._chain)
            fn = fuse_records([(kind, f) for kind, f, _ in self._chain])
            label = self._chain[0][2] if len(self._chain) == 1 else f"Linear[{names}]"
            op = LinearOperator(self.scope, label, fn)
            assert self._base is not None, "a pending chain has a base stream"
            self._base.connect_to(op, 0)
            self._port = op.output_ports[0]
        return self._port

    def connect_to(self, op: OperatorCore, input_index: int, pact: Any = None) -> None:
        """Feed this stream into input ``input_index`` of ``op`` under ``pact`` (None:
        pipeline; an :class:`Exchange` routes records between workers).

        Example: ``stream.connect_to(op, 0, tp.Exchange(lambda r: r[0]))``."""
        self.scope.connect(self, op.index, input_index, op.input_ports[input_index], pact)

    def _linear(self, name: str, batch_fn: Callable, pact: Any = None) -> "Stream":
        op = LinearOperator(self.scope, name, batch_fn)
        self.connect_to(op, 0, pact)
        return Stream(self.scope, op.output_ports[0])

    def _then(self, kind: str, f: Callable, name: str) -> "Stream":
        if self._port is not None:
            return Stream(self.scope, base=self, chain=[(kind, f, name)])
        return Stream(self.scope, base=self._base, chain=self._chain + [(kind, f, name)])

    # ----------------------------------------------------------------- stateless
    def map(self, f: Callable[[Any], Any], name: str = "Map") -> "Stream":
        """Apply ``f`` to every record.

        Example: ``stream.map(str.upper)`` turns ``"a"`` into ``"A"``."""
        return self._then("map", f, name)

    def filter(self, predicate: Callable[[Any], bool], name: str = "Filter") -> "Stream":
        """Keep the records for which ``predicate`` is true.

        Example: ``stream.filter(lambda x: x > 2)`` drops 1 and 2."""
        return self._then("filter", predicate, name)

    def flat_map(self, f: Callable[[Any], Iterable[Any]], name: str = "FlatMap") -> "Stream":
        """Replace every record by the records of the iterable ``f(record)``.

        Example: ``lines.flat_map(str.split)`` turns ``"a rose"`` into ``"a"`` and ``"rose"``."""
        return self._then("flat_map", f, name)

    def map_batch(self, f: Callable[[List[Any]], List[Any]], name: str = "MapBatch") -> "Stream":
        """Apply ``f`` to each whole message's list of records (must not mutate it).

        Example: ``stream.map_batch(sorted)`` sorts each message's records."""
        return self._linear(name, f)

    def inspect(self, f: Callable[[Any], Any], name: str = "Inspect") -> "Stream":
        """Call ``f(record)`` for every record; pass records through unchanged.

        Example: ``stream.inspect(print)`` prints every record."""

        def batch(data):
            for r in data:
                f(r)
            return data

        return self._linear(name, batch)

    def inspect_batch(
        self, f: Callable[[Any, List[Any]], Any], name: str = "InspectBatch"
    ) -> "Stream":
        """Call ``f(time, records)`` for every message; pass it through.

        Example: ``stream.inspect_batch(lambda t, xs: print(t, len(xs)))``."""
        op = GenericOperator(self.scope, name, 1, 1, _inspect_batch_factory(f))
        self.connect_to(op, 0)
        return Stream(self.scope, op.output_ports[0])

    def exchange(self, key_fn: Callable[[Any], Any], name: str = "Exchange") -> "Stream":
        """Route every record to the worker that owns ``key_fn(record)``.

        Example: ``pairs.exchange(lambda kv: kv[0])`` sends each key's records to one worker."""
        return self._linear(name, _identity_batch, Exchange(key_fn))

    def concat(self, *others: "Stream", name: str = "Concat") -> "Stream":
        """Merge this stream with ``others`` (same scope).

        Example: ``a.concat(b, c)`` carries the messages of all three."""
        streams = (self,) + others
        for s in others:
            if s.scope.subgraph is not self.scope.subgraph:
                raise TimelyError("concat: streams belong to different scopes; use enter/leave")
        op = ConcatOperator(self.scope, len(streams), name)
        for i, s in enumerate(streams):
            s.connect_to(op, i)
        return Stream(self.scope, op.output_ports[0])

    # ----------------------------------------------------------------- observing
    def probe(self, name: str = "Probe") -> ProbeHandle:
        """A :class:`ProbeHandle` reporting this stream's frontier.

        Example: ``probe = stream.probe()``, then ``worker.step_until(probe, t)``."""
        handle = ProbeHandle(self.scope.order.le, self.scope.order.is_total)
        self.probe_with(handle, name)
        return handle

    def probe_with(self, handle: ProbeHandle, name: str = "Probe") -> "Stream":
        """Add this stream's frontier to an existing probe handle; returns this stream.

        Example: ``probe = tp.ProbeHandle()``, ``a.probe_with(probe)``, ``b.probe_with(probe)``."""
        op = ProbeOperator(self.scope, handle, name)
        self.connect_to(op, 0)
        return self

    def capture(self, name: str = "Capture") -> Captured:
        """Record every message and the frontier (see :class:`Captured`).

        Example: ``out = stream.capture()``; after running, ``out.records()`` is
        ``[(time, record), ...]``."""
        captured = Captured(self.scope.order.le)
        op = CaptureOperator(self.scope, captured, name)
        self.connect_to(op, 0)
        return captured

    # ----------------------------------------------------------------- generic operators
    def unary(self, factory: Callable, pact: Any = None, name: str = "Unary") -> "Stream":
        """A one-input one-output operator with user logic.

        ``factory(capability, info)`` returns ``logic(input, output)``. ``input`` yields
        ``(capability, records)`` and has ``frontier``; ``output.session(cap).give(record)``
        or ``output.send(cap, records)`` sends. The initial ``capability`` (at the minimum
        time) must be dropped or downgraded when no longer needed.

        Example: ``stream.unary(factory)`` where ``factory(capability, info)`` returns
        ``logic(input, output)``; ``examples/epoch_counts.py`` writes one with a notificator.
        """
        op = GenericOperator(
            self.scope,
            name,
            1,
            1,
            lambda caps, info: factory(caps[0], info),
            adapt=lambda logic, ins, outs: logic(ins[0], outs[0]),
        )
        self.connect_to(op, 0, pact)
        return Stream(self.scope, op.output_ports[0])

    def binary(
        self,
        other: "Stream",
        factory: Callable,
        pact1: Any = None,
        pact2: Any = None,
        name: str = "Binary",
    ) -> "Stream":
        """Two inputs, one output: ``factory(capability, info)`` returns
        ``logic(input1, input2, output)``.

        Example: ``a.binary(b, factory, tp.Exchange(key), tp.Exchange(key))`` for a join-like
        operator."""
        op = GenericOperator(
            self.scope,
            name,
            2,
            1,
            lambda caps, info: factory(caps[0], info),
            adapt=lambda logic, ins, outs: logic(ins[0], ins[1], outs[0]),
        )
        self.connect_to(op, 0, pact1)
        other.connect_to(op, 1, pact2)
        return Stream(self.scope, op.output_ports[0])

    def sink(self, factory: Callable, pact: Any = None, name: str = "Sink") -> None:
        """One input, no outputs: ``factory(info)`` returns ``logic(input)``.

        Example: ``stream.sink(lambda info: lambda input: ...)`` consumes the stream without
        output."""
        op = GenericOperator(
            self.scope,
            name,
            1,
            0,
            lambda caps, info: factory(info),
            adapt=lambda logic, ins, outs: logic(ins[0]),
        )
        self.connect_to(op, 0, pact)

    # ----------------------------------------------------------------- scopes and loops
    def enter(self, child: Any) -> "Stream":
        """This stream inside the nested scope ``child`` (times become ``Product(t, 0)``).

        Example: ``stream.enter(child)`` in ``scope.iterative(loop)``."""
        return child.enter_stream(self)

    def leave(self) -> "Stream":
        """This stream in the parent scope (times ``Product(t, i)`` become ``t``).

        Example: ``result.leave()`` as the last step of ``scope.iterative``'s function."""
        return self.scope.leave_stream(self)

    def connect_loop(self, handle: LoopHandle) -> None:
        """Feed this stream into a feedback operator created by ``scope.feedback``.

        Example: ``handle, looped = child.feedback()``, ..., ``result.connect_loop(handle)``."""
        op = handle.op
        if op.connected:
            raise TimelyError(f"feedback {op.name!r} is already connected")
        if op.subgraph is not self.scope.subgraph:
            raise TimelyError("connect_loop: the stream and the feedback are in different scopes")
        op.connected = True
        self.connect_to(op, 0)

    def __repr__(self) -> str:
        if self._port is None:
            return f"Stream({self.scope.subgraph.name}: pending {len(self._chain)} fused stages)"
        return f"Stream({self.scope.subgraph.name}:{self._port.node}.{self._port.port})"


def _identity_batch(data):
    return data


def _inspect_batch_factory(f):
    def factory(caps, info):
        caps[0].drop()

        def logic(inputs, outputs):
            for cap, data in inputs[0]:
                f(cap.time, data)
                outputs[0].send(cap, data)

        return logic

    return factory
