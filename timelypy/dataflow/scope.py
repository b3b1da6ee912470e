"""Scopes: where operators are built. A dataflow is a root scope; loops are nested scopes."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..errors import TimelyError
from ..order import IntSummary, PathSummary, Product, ProductSummary, TimeOrder
from ..progress.reachability import Location
from ..progress.subgraph import Subgraph
from .channels import EgressPort, Exchange, ExchangePusher, IngressPort, InputPort, OutputPort
from .feedback import FeedbackOperator, LoopHandle
from .input import InputHandle, InputOperator
from .operator import GenericOperator
from .stream import Stream
from .worker_interface import AsWorker

if TYPE_CHECKING:  # the one upward reference (new_collection), for its signature only
    from ..differential.collection import Collection
    from ..differential.input import InputSession

__all__ = ["Scope", "enter_time", "leave_time"]

log = logging.getLogger(__name__)


def enter_time(t: Any) -> Product:
    """The time ``t`` of a scope as the time of an iterative scope nested in it:
    ``Product(t, 0)`` (what entering a loop does to a time)."""
    return Product(t, 0)


def leave_time(t: Product) -> Any:
    """The time of an iterative scope as the time of its parent: the outer coordinate (what
    leaving a loop does to a time)."""
    return t[0]


def _summarize(s: PathSummary) -> Optional[PathSummary]:
    return s.outer if isinstance(s, ProductSummary) else s


class Scope:
    """A place to build operators: the root scope of a dataflow, or a nested iterative scope.

    Times in a root scope are ints; an iterative scope nested in a scope with time ``T`` has
    time ``Product(T, int)``.

    Example: ``worker.dataflow(lambda scope: scope.new_collection())`` hands the root scope to
    the function; ``scope.iterative(loop)`` hands ``loop`` a nested one.
    """

    def __init__(
        self,
        worker: AsWorker,
        subgraph: Subgraph,
        order: TimeOrder,
        parent: Optional["Scope"] = None,
    ):
        self.worker = worker
        self.subgraph = subgraph
        self.order = order
        self.parent = parent
        self.edges: List[Tuple[Location, Location, str]] = []
        """Every edge built here, in order: ``(source, target, pact)`` with the pact's name,
        ``"Pipeline"`` or ``"Exchange"`` (what :mod:`timelypy.dataflow.graph` draws)."""
        self.nested: Dict[int, "Scope"] = {}
        """The nested scopes built here, by their operator index in this scope."""

    # ----------------------------------------------------------------- identity
    @property
    def index(self) -> int:
        """The worker's index (as in timely's ``scope.index()``).

        Example: ``range(scope.index, n, scope.peers)`` is this worker's share of ``n`` items."""
        return self.worker.index

    @property
    def peers(self) -> int:
        """The number of workers (as in timely's ``scope.peers()``).

        Example: ``range(scope.index, n, scope.peers)`` is this worker's share of ``n`` items."""
        return self.worker.peers

    @property
    def name(self) -> str:
        """The scope's name (the dataflow's name for a root scope).

        Example: ``"dataflow1"`` for the first root scope of a worker."""
        return self.subgraph.name

    def describe(self) -> str:
        """A text picture of this scope's operators and edges, one per line.

        The first line names the scope and counts its inputs and outputs; then each operator as
        ``[index] name`` (a nested scope as ``[index] subgraph:`` followed by its own picture,
        indented), then each edge as ``Source(node, port) -> Target(node, port)``. Node 0 is the
        scope's boundary: ``Source(0, i)`` is scope input ``i`` seen from inside, ``Target(0, j)``
        scope output ``j``. For a picture with pacts and clusters see
        :func:`timelypy.dataflow.graph.to_dot` and :func:`~timelypy.dataflow.graph.to_mermaid`.

        >>> import timelypy as tp
        >>> def build(worker):
        ...     def dataflow(scope):
        ...         handle, stream = scope.new_input()
        ...         stream.map(lambda x: x + 1).probe()
        ...         return scope.describe()
        ...     return worker.dataflow(dataflow)
        >>> print(tp.execute(build)[0].splitlines()[0])
        scope 'dataflow1' (0 in, 0 out)
        """
        return self.subgraph.describe()

    # ----------------------------------------------------------------- sources
    def new_input(self, name: str = "Input", register: bool = True) -> Tuple[InputHandle, Stream]:
        """A new input: returns ``(handle, stream)``. Only in scopes with int times.

        The worker flushes the handle at every step and closes it when ``build`` returns;
        ``register=False`` leaves that to a wrapper that registers itself instead (as the
        differential ``InputSession`` does).

        Example: ``handle, stream = scope.new_input()``; ``handle.send("a")``,
        ``handle.advance_to(1)``.
        """
        if not self.order.is_total:
            raise TimelyError("inputs can only be created in a root scope (totally ordered time)")
        op = InputOperator(self, name)
        handle = InputHandle(op)
        if register:
            self.worker.register_input(handle)
        return handle, Stream(self, op.output_ports[0])

    def input_from(self, records: Iterable[Any], name: str = "InputFrom") -> Stream:
        """A stream holding ``records`` at the minimum time (then complete).

        Example: ``scope.input_from(range(10)).map(lambda x: x * 2).capture()``."""
        handle, stream = self.new_input(name)
        handle.send_batch(list(records))
        handle.close()
        return stream

    def new_collection(
        self, name: str = "Input", schema: Any = None
    ) -> Tuple[InputSession, Collection]:
        """A new differential input: returns ``(InputSession, Collection)``; ``schema``
        (``int``, ``float``, ``bool`` or a tuple of them) declares the records fixed-width
        (checked as they are sent; see :func:`timelypy.differential.input.new_collection`).

        The one deliberate upward reference of the timely layer (as differential dataflow's
        ``Input`` trait extends a timely scope): the import is local, so the timely layer does
        not load the differential layer until this is called.

        Example: ``edges_in, edges = scope.new_collection("edges")``;
        ``edges_in.insert((1, 2))``.
        """
        from ..differential.input import new_collection

        return new_collection(self, name, schema)

    def new_collection_from(
        self, records: Iterable[Any], name: str = "Input"
    ) -> Tuple[InputSession, Collection]:
        """A new differential input holding ``records`` at the minimum time:
        returns ``(InputSession, Collection)``.

        Example: ``session, numbers = scope.new_collection_from(range(10))``."""
        from ..differential.input import new_collection_from

        return new_collection_from(self, records, name)

    def import_trace(self, trace: Any, name: str = "Import") -> Any:
        """Bring a trace handle exported from another dataflow into this one.

        Example: ``arranged = scope.import_trace(trace)`` is ``trace.import_(scope)``."""
        return trace.import_(self, name)

    def feedback(
        self,
        summary: Optional[PathSummary] = None,
        name: str = "Feedback",
        max_iterations: Optional[int] = None,
    ) -> Tuple[LoopHandle, Stream]:
        """A feedback operator: returns ``(handle, stream)``; later ``s.connect_loop(handle)``.

        ``summary`` defaults to advancing the innermost coordinate by one (the loop summary of
        an iterative scope).

        Example: in ``scope.iterative(loop)``: ``handle, stream = child.feedback()``, later
        ``result.connect_loop(handle)``.
        """
        if summary is None:
            if self.order.outer is None:
                raise TimelyError("feedback in a root scope needs an explicit summary")
            summary = ProductSummary(self.order.outer.identity, IntSummary(1))
        op = FeedbackOperator(self, summary, name, max_iterations)
        return LoopHandle(op), Stream(self, op.output_ports[0])

    def operator(
        self,
        inputs: Sequence[Tuple[Stream, Any]],
        outputs: int,
        factory: Callable,
        name: str = "Operator",
        summary: Optional[List] = None,
    ) -> List[Stream]:
        """A generic operator with several inputs and outputs.

        ``factory(capabilities, info)`` returns ``logic(inputs, outputs)``.

        Example: ``scope.operator([(a, None), (b, None)], 1, factory)`` (``Stream.unary`` and
        ``Stream.binary`` are the usual shapes).
        """
        op = GenericOperator(self, name, len(inputs), outputs, factory, summary=summary)
        for i, (stream, pact) in enumerate(inputs):
            stream.connect_to(op, i, pact)
        return [Stream(self, p) for p in op.output_ports]

    # ----------------------------------------------------------------- nesting
    def iterative(self, fn: Callable[["Scope"], Any], name: str = "Iterate") -> Any:
        """Build a nested scope with ``Product(outer, int)`` times; returns ``fn(child)``.
        ``name`` is made unique on the worker (a second ``Iterate`` is ``Iterate#2``).

        Example: ``scope.iterative(lambda child: body(roots.enter(child)).leave())``;
        ``Collection.iterate`` builds on it."""
        worker = self.worker
        name = worker.scope_name(name)
        log.debug("worker %d: building iterative scope %r", worker.index, name)
        sub = Subgraph(
            name,
            self.order.nested(),
            peers=worker.peers,
            to_inner=enter_time,
            to_outer=leave_time,
            summarize=_summarize,
        )
        sub.instruments = worker.instruments
        self.subgraph.add_child(sub)
        sub.progcaster = worker.new_progcaster(sub)
        child = Scope(worker, sub, sub.order, parent=self)
        self.nested[sub.index] = child
        result = fn(child)
        sub.finalize()
        return result

    def enter_stream(self, stream: Stream) -> Stream:
        """``stream`` of the parent scope, inside this nested scope (what :meth:`Stream.enter`
        does); TimelyError unless ``stream`` belongs to the parent.

        Example: ``child.enter_stream(stream)`` is ``stream.enter(child)``."""
        if self.parent is None or stream.scope.subgraph is not self.parent.subgraph:
            raise TimelyError("enter: the stream must belong to this scope's parent scope")
        sub = self.subgraph
        i = sub.new_input()
        inner_port = OutputPort(0, i, None, counted=False)
        ingress = IngressPort(sub, i, inner_port)
        stream.scope.connect(stream, sub.index, i, ingress, None)
        return Stream(self, inner_port)

    def leave_stream(self, stream: Stream) -> Stream:
        """``stream`` of this nested scope, in the parent scope (what :meth:`Stream.leave`
        does); TimelyError in a root scope.

        Example: ``child.leave_stream(result)`` is ``result.leave()``."""
        if self.parent is None:
            raise TimelyError("leave: the stream is in a root scope")
        sub = self.subgraph
        j = sub.new_output()
        outer_port = OutputPort(sub.index, j, None, counted=False)
        egress = EgressPort(sub, outer_port)
        self.connect(stream, 0, j, egress, None)
        return Stream(self.parent, outer_port)

    # ----------------------------------------------------------------- wiring
    def connect(self, stream: Stream, node: int, port: int, target: Any, pact: Any) -> None:
        """Connect ``stream`` to input ``port`` of child ``node``, whose messages go to
        ``target``, under ``pact`` (None: pipeline). Records the edge for progress tracking.

        Example: ``Stream.connect_to`` calls it; programs do not."""
        if stream.scope.subgraph is not self.subgraph:
            raise TimelyError(
                f"stream from scope {stream.scope.subgraph.name!r} used in scope "
                f"{self.subgraph.name!r}: use enter/leave to cross scopes"
            )
        worker = self.worker
        channel = worker.new_identifier()
        source, target_location = (
            Location(stream.port.node, stream.port.port, True),
            Location(node, port, False),
        )
        self.subgraph.add_edge(source, target_location)
        self.edges.append(
            (source, target_location, "Exchange" if isinstance(pact, Exchange) else "Pipeline")
        )
        if isinstance(pact, Exchange) and worker.peers > 1:
            if worker.fabric is None:
                raise TimelyError(f"worker {worker.index}: {worker.peers} workers and no fabric")
            pusher = ExchangePusher(
                target,
                pact.key_fn,
                worker.peers,
                worker.index,
                worker.fabric,
                channel,
                worker.instruments,
                name=self.subgraph.children[node].name if node else "output",
            )
            worker.register_channel(channel, target)
        else:
            pusher = target  # a pipeline delivers to the target itself (no pusher in between)
            if type(target) is InputPort and source.node != 0:
                self.subgraph.count_in_queue(target_location, target.queue)
        stream.port.pushers.append(pusher)
