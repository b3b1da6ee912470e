"""Trace agents: a reader's handle on a shared trace, and importing a trace into another dataflow.

As differential-dataflow's ``TraceAgent``: every reader of a :class:`~.trace.Spine` (a join, an
exported handle, an import) holds an agent. ``set_logical_compaction(frontier)`` promises to
read only at times at or beyond ``frontier``; the reader's acknowledged batch sequence number
plays the role of physical compaction (batches a reader has not yet seen are never merged away
from it). :func:`import_stream` replays a trace in another dataflow on the same worker.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..dataflow.capability import Capability
from ..dataflow.operator import OperatorCore
from ..dataflow.stream import Stream
from ..errors import TimelyError
from ..progress.frontier import Antichain
from .trace import Batch, BatchReader, Cursor, Spine

if TYPE_CHECKING:
    from ..dataflow.scope import Scope

__all__ = ["ImportOperator", "TraceAgent", "TraceHandle", "import_stream"]

log = logging.getLogger(__name__)

_INF = float("inf")

Importer = Callable[[Any, Stream, Spine], Any]
"""``importer(scope, stream, spine)``: wraps an imported trace's batch stream for its users."""


class TraceAgent:
    """One reader's hold on a :class:`~.trace.Spine`.

    ``set_logical_compaction(frontier)``: this reader will only read at times at or beyond
    ``frontier`` (it never moves backwards). ``set_physical_compaction(frontier)``: with ``[]``
    the reader no longer blocks merging. ``close()`` releases both holds. ``explicit`` agents
    (handed to users) make the spine compact at once when they advance. ``importer`` is how
    :meth:`import_` wraps the imported stream (an arrangement passes its own constructor).

    Example: ``trace = edges.arrange_by_key().trace`` returns one; ``trace.import_(scope)`` in a
    later dataflow, ``trace.close()`` when done.
    """

    def __init__(
        self,
        spine: Spine,
        since: Optional[Sequence[Any]] = None,
        through_seq: float = 0,
        explicit: bool = False,
        importer: Optional[Importer] = None,
    ):
        if spine.abandoned:
            raise TimelyError(
                f"trace {spine.name!r}: an operator's private arrangement whose "
                f"readers all finished is no longer maintained; arrange the "
                f"collection yourself (arrange_by_key) to share it"
            )
        if spine.dropped:
            raise TimelyError(
                f"trace {spine.name!r}: its dataflow completed and no handle held "
                f"the trace, so it was dropped; take the handle (Arranged.trace) "
                f"before the dataflow completes"
            )
        self.spine = spine
        self.since: List[Any] = list(spine.since if since is None else since)
        self.through_seq = through_seq
        self.closed = False
        self.explicit = explicit
        self.importer = importer
        spine.hold_since([(t, 1) for t in self.since])
        spine.add_reader(self)

    def set_logical_compaction(self, frontier: Sequence[Any]) -> None:
        """Allow compaction up to ``frontier`` (joined with the current one; never backwards).

        Example: ``trace.set_logical_compaction([t])`` once nothing will read the trace at times
        before ``t``."""
        if self.closed:
            return
        order = self.spine.order
        if order.is_total and len(frontier) == 1 and len(self.since) == 1:
            f, old = frontier[0], self.since[0]
            if f <= old:
                return
            self.since = [f]
            self.spine.hold_since(((f, 1), (old, -1)), self.explicit)
            return
        joined = Antichain(le=order.le)
        if frontier:
            for a in self.since:
                for b in frontier:
                    joined.insert(order.join(a, b))
            if not self.since:
                joined = Antichain(frontier, le=order.le)
        new = list(joined)
        if set(new) == set(self.since):
            return
        changes = [(t, 1) for t in new] + [(t, -1) for t in self.since]
        self.since = new
        self.spine.hold_since(changes, self.explicit)

    def set_physical_compaction(self, frontier: Sequence[Any]) -> None:
        """With an empty frontier, stop blocking merges of batches not yet acknowledged.

        Example: ``trace.set_physical_compaction([])``: merge batches freely."""
        if not frontier:
            self.through_seq = _INF
            self.spine.maintain()

    def acknowledge(self, seq: int) -> None:
        """This reader has seen every batch up to ``seq``.

        Example: an importing operator calls ``agent.acknowledge(seq)`` after reading the batch
        numbered ``seq``."""
        if seq > self.through_seq:
            self.through_seq = seq

    def import_(self, scope: "Scope", name: str = "Import") -> Any:
        """This trace as an arrangement in ``scope``, another dataflow on the same worker (the
        Differential Dataflow book's "sharing arrangements across dataflows").

        Example:
        ``worker.dataflow(lambda scope: trace.import_(scope).as_collection().capture())``."""
        if self.closed:
            raise TimelyError("import: the trace handle is closed")
        if self.importer is None:
            raise TimelyError(
                f"import: the trace handle on {self.spine.name!r} was not "
                f"exported by an arrangement (use Arranged.trace)"
            )
        log.debug("import of trace %r into scope %r", self.spine.name, name)
        return self.importer(scope, import_stream(self, scope, name), self.spine)

    def get(self, key: Any) -> List[Tuple[Any, Any, int]]:
        """Every ``(val, time, diff)`` of ``key`` in the trace.

        Example: ``trace.get(2)`` is ``[(3, 0, 1), (4, 0, 1)]`` for edges ``(2, 3)`` and
        ``(2, 4)`` inserted at time 0."""
        return self.spine.get(key)

    def cursor(self) -> Cursor:
        """Sequential access by key, then value, then time (see :class:`~.trace.Cursor`).

        Example: ``cursor = trace.cursor()`` walks the trace key by key, then value, then time."""
        return self.spine.cursor()

    def accumulate(self, key: Any, time: Any) -> Dict[Any, int]:
        """Values of ``key`` with their counts at ``time`` (must be at or beyond ``since``).

        Example: ``trace.accumulate(2, 0)`` is ``{3: 1, 4: 1}`` for edges ``(2, 3)`` and
        ``(2, 4)``."""
        return self.spine.accumulate(key, time)

    def close(self) -> None:
        """Release this reader's holds on compaction and merging. Idempotent.

        Example: ``trace.close()`` once the last dataflow that imports it is built."""
        if self.closed:
            return
        self.closed = True
        self.spine.hold_since([(t, -1) for t in self.since], self.explicit)
        self.since = []
        self.spine.remove_reader(self)
        self.spine.maintain()

    def __repr__(self) -> str:
        return f"TraceAgent({self.spine.name!r}, since={self.since})"


TraceHandle = TraceAgent
"""The older name of :class:`TraceAgent` (both are exported by ``timelypy``)."""


class _ImportListener:
    """Forwards a spine's new batches and sealed frontiers to an :class:`ImportOperator`."""

    def __init__(self, op: "ImportOperator"):
        self.op = op

    def notify(self, batch: BatchReader) -> None:
        """A new batch (and the upper frontier it reaches)."""
        self.op.queue.append(("batch", batch))
        self.op.queue.append(("upper", list(batch.upper)))
        self.op.wake()

    def notify_upper(self, upper: List[Any]) -> None:
        """A new upper frontier, over a region without updates."""
        self.op.queue.append(("upper", list(upper)))
        self.op.wake()


class ImportOperator(OperatorCore):
    """Replays a trace from another dataflow: a snapshot of its current contents, then every
    new batch, downgrading its capability as the trace's upper frontier advances."""

    def __init__(self, scope: "Scope", agent: TraceAgent, name: str):
        super().__init__(scope, name, 0, 1)
        self.agent = agent
        spine = agent.spine
        self.queue: List[Tuple[str, Any]] = []
        self.cap = Capability(
            self.order.minimum, self.shared.internals[0], self.order.le, 0, name, record=False
        )
        snapshot: Dict[Any, List[Tuple[Any, Any, int]]] = {}
        for b in spine.batches:
            for k, vals in b.items():
                snapshot.setdefault(k, []).extend(vals)
        if snapshot:
            self.queue.append(
                ("batch", Batch(snapshot, [self.order.minimum], list(spine.upper), spine.seq))
            )
        self.queue.append(("upper", list(spine.upper)))
        self.listener = _ImportListener(self)
        spine.add_listener(self.listener)

    def wake(self) -> None:
        """Schedule this operator (and its enclosing subgraph) soon."""
        self.activate()
        if self.subgraph.parent is not None:
            self.subgraph.wake()

    def schedule(self) -> bool:
        """Replay the queued batches and frontier advances of the trace."""
        cap = self.cap
        out = self.output_ports[0]
        order = self.order
        for kind, item in self.queue:
            if not cap.valid:
                break
            if kind == "batch":
                if item.count:
                    out.push(cap.time, [item])
            elif not item:
                cap.drop()
            else:
                t = item[0]
                for u in item[1:]:
                    t = order.meet(t, u)
                if order.le(cap.time, t):
                    cap.downgrade(t)
        self.queue = []
        if not cap.valid:
            self.agent.spine.remove_listener(self.listener)
        return False


def import_stream(agent: TraceAgent, scope: "Scope", name: str = "Import") -> Stream:
    """The stream of ``agent``'s trace's batches in ``scope`` (another dataflow on the same
    worker): a snapshot of the trace, then every new batch.

    Example: ``stream = import_stream(trace, scope)``; ``trace.import_(scope)`` wraps it as an
    arrangement."""
    if agent.closed:
        raise TimelyError("import: the trace handle is closed")
    op = ImportOperator(scope, agent, name)
    return Stream(scope, op.output_ports[0])
