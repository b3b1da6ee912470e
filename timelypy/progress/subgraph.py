"""Subgraph: a scope that schedules child operators and tracks their progress.

A subgraph is itself an operator of its parent (``local = False``): it summarises the paths from
its inputs to its outputs, reports its output capabilities (the frontier of everything inside that
can still produce output), and reports records consumed at its inputs and produced at its outputs.

Per schedule: accept input frontiers from the parent, harvest records
that entered, receive every worker's progress batches, propagate, schedule active children,
collect their progress, and broadcast this worker's progress batch.
"""

from __future__ import annotations

import logging
from collections import deque
from time import perf_counter
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..instrument import FrontierChanged, Instruments, OperatorFinished, OperatorScheduled
from ..order import PathSummary, TimeOrder
from .broadcast import Progcaster
from .change_batch import ChangeBatch
from .frontier import MutableAntichain
from .operate import Operate
from .reachability import Location, ReachabilityBuilder, ReachabilityTracker

__all__ = ["Subgraph"]

log = logging.getLogger(__name__)


def _identity(t: Any) -> Any:
    return t


_run: Callable[[Any], None] = deque(maxlen=0).extend  # an iterator to its end, keeping nothing


def _move(
    source: Dict[Any, int], locations: Tuple[Any, ...], sign: int, counts: Dict[Any, int]
) -> None:
    """Add ``sign *`` the ``{time: count}`` of ``source`` at each location to ``counts``
    (keyed ``(location, time)``; the count-table contract of :mod:`.kernel`)."""
    for loc in locations:
        for t, d in source.items():
            k = (loc, t)
            c = counts.get(k, 0) + sign * d
            if c:
                counts[k] = c
            else:
                del counts[k]


def _batch_reports(moves: Tuple[Any, ...], counts: Dict[Any, int]) -> None:
    """Move a child's reports (see ``Subgraph._report_moves``) into a progress batch's
    ``counts`` (keyed ``(location, time)``; the count-table contract of :mod:`.kernel`), to
    broadcast to every worker."""
    for source, inner, outer, sign in moves:
        if source:
            for loc in inner or outer:
                for t, d in source.items():
                    k = (loc, t)
                    c = counts.get(k, 0) + sign * d
                    if c:
                        counts[k] = c
                    else:
                        del counts[k]
            if inner and outer:
                _move(source, outer, sign, counts)
            source.clear()


class _Boundary(Operate):
    """Child 0 of every scope: its boundary seen from inside (scope inputs are its outputs,
    scope outputs its inputs). Never scheduled."""

    def schedule(self) -> bool:
        """Never called: the boundary is not scheduled."""
        raise RuntimeError(f"the boundary of scope {self.name!r} is not an operator")


class Subgraph(Operate):
    """A scope: children, edges, a reachability tracker and the progress protocol."""

    local = False

    def __init__(
        self,
        name: str,
        order: TimeOrder,
        *,
        peers: int = 1,
        to_inner: Callable = _identity,
        to_outer: Callable = _identity,
        summarize: Callable[[PathSummary], Optional[PathSummary]] = _identity,
        progcaster: Optional[Progcaster] = None,
    ) -> None:
        super().__init__(name, 0, 0)
        self.order = order
        self.peers = peers
        self.to_inner = to_inner
        self.to_outer = to_outer
        self.summarize = summarize
        self.progcaster = progcaster
        self.children: List[Operate] = [_Boundary(name, 0, 0)]  # index 0 is the boundary
        self.edges_from: Dict[Location, List[Location]] = {}
        self._edges: List[Tuple[Location, Location]] = []
        self.ingress_counts: List[ChangeBatch] = []
        self.local_progress = ChangeBatch()
        self.final_progress = ChangeBatch()
        self.tracker: Optional[ReachabilityTracker] = None
        self.output_capabilities: List[MutableAntichain] = []
        self._summary: List[List[List[PathSummary]]] = []
        self._initial: List[ChangeBatch] = []
        self.activations: List[bool] = [False]
        """One flag per child (index 0 is the boundary): run it at the next schedule. Ports and
        operators of this scope set their flag (timely's activations)."""
        self._moves: List[Any] = [None]
        self._queues: Dict[Location, Any] = {}
        self._queue_counts: List[Tuple[Location, Any, Any]] = []
        self._uncounted: Tuple[Dict[Any, int], ...] = ()
        self._counted_queues: Tuple[Any, ...] = ()
        self._waiting_counted = 0
        """How many counted queues had messages waiting at the last count."""
        self._adopted: List[bool] = [False]
        self._nested: List[bool] = [False]  # per child: a nested scope (runs while incomplete)
        self._incomplete: List[bool] = [False]
        self.finalized = False
        self.parent: Optional["Subgraph"] = None
        self.instruments: Optional[Instruments] = None
        """The worker's instrument hub (set by the dataflow layer); None: no events."""

    def wake(self) -> None:
        """Make sure this scope (and its ancestors) run at the next step."""
        child: Subgraph = self
        p = self.parent
        while p is not None:
            p.activations[child.index] = True
            child, p = p, p.parent

    # ------------------------------------------------------------------ building
    def add_child(self, op: Operate) -> int:
        """Add ``op`` as the next child, set its ``index`` and return it; it runs at the first
        step. RuntimeError once the scope is built."""
        if self.finalized:
            raise RuntimeError(f"scope {self.name!r} is already built; add operators inside it")
        op.index = len(self.children)
        self.children.append(op)
        self._nested.append(isinstance(op, Subgraph))
        if isinstance(op, Subgraph):
            op.parent = self
        self.activations.append(True)  # every operator runs once at start
        self._incomplete.append(True)
        return op.index

    def add_edge(self, source: Location, target: Location) -> None:
        """Connect ``source`` (a child output or ``Source(0, i)``, scope input ``i``) to
        ``target`` (a child input or ``Target(0, j)``, scope output ``j``)."""
        if self.finalized:
            raise RuntimeError(f"scope {self.name!r} is already built")
        self._edges.append((source, target))
        self.edges_from.setdefault(source, []).append(target)

    def count_in_queue(self, target: Location, queue: Any) -> None:
        """Every message to ``target`` (a child input) is appended to ``queue`` (a deque of
        ``(time, records)`` its operator pops), on this worker. On one worker the scope then
        counts the messages waiting there after each round of children, instead of moving
        the produced and consumed reports of that edge (the same counts at every propagation:
        records produced and consumed within a round never reach the tracker)."""
        if self.finalized:
            raise RuntimeError(f"scope {self.name!r} is already built")
        self._queues[target] = queue

    def new_input(self) -> int:
        """Add a scope input and return its index ``i`` (``Source(0, i)`` inside)."""
        if self.finalized:
            raise RuntimeError(f"scope {self.name!r} is already built; enter it from inside")
        self.inputs += 1
        self.ingress_counts.append(ChangeBatch())
        self.shared.grow(self.inputs, self.outputs)
        return self.inputs - 1

    def new_output(self) -> int:
        """Add a scope output and return its index ``j`` (``Target(0, j)`` inside)."""
        if self.finalized:
            raise RuntimeError(f"scope {self.name!r} is already built; leave it from inside")
        self.outputs += 1
        self.shared.grow(self.inputs, self.outputs)
        return self.outputs - 1

    def activate(self, index: int) -> None:
        """Schedule child ``index`` at the next step (and this scope within its parents)."""
        self.activations[index] = True
        if self.parent is not None:
            self.wake()

    def quiet(self) -> bool:
        """No child is scheduled and no progress is pending here (nested scopes aside)."""
        return not (
            any(self.activations[1:])
            or self.final_progress.counts
            or self.local_progress.counts
            or (self.tracker is not None and self.tracker.has_staged())
        )

    def finalize(self) -> None:
        """Build reachability, reject cycles that do not advance time, seed initial capabilities."""
        if self.finalized:
            return
        builder = ReachabilityBuilder(self.order.identity)
        builder.add_node(
            0,
            self.outputs,
            self.inputs,
            [[] for _ in range(self.outputs)]
            if self.inputs == 0
            else [[[] for _ in range(self.inputs)] for _ in range(self.outputs)],
            name=self.name,
        )
        initial: List[Tuple[Location, Any, int]] = []
        for op in self.children[1:]:
            if isinstance(op, Subgraph):
                op.finalize()
            summary, caps = op.get_internal_summary()
            builder.add_node(op.index, op.inputs, op.outputs, summary, name=op.name)
            for o, batch in enumerate(caps):
                for t, c in batch.items():
                    initial.append((Location(op.index, o, True), t, c))
        for s, t in self._edges:
            builder.add_edge(s, t)
        if self.progcaster is None:
            self._queue_counts = [(loc, q, deque()) for loc, q in self._queues.items()]
            self._counted_queues = tuple(q for _, q, _ in self._queue_counts)
        accounted = {loc for loc, _, _ in self._queue_counts}
        moves = [self._report_moves(op, accounted) for op in self.children[1:]]
        # The reports of counted queues' edges are not moved, only cleared after each round
        # (an observed schedule's event reads them first).
        self._uncounted = tuple(m[0] for ms in moves for m in ms if not (m[1] or m[2]))
        self._moves = [None] + [tuple(m for m in ms if m[1] or m[2]) for ms in moves]
        interested = {
            Location(op.index, i, False)
            for op in self.children[1:]
            if op.frontier_interest
            for i in range(op.inputs)
        }
        self.tracker = builder.build(self.order.le, self.order.is_total, interested)
        self._adopted = [False] + [self._adopt(op) for op in self.children[1:]]
        log.debug(
            "scope %r: reachability over %d operators and %d edges",
            self.name,
            len(self.children) - 1,
            len(self._edges),
        )
        # Summaries of this scope for its parent, mapped to outer time.
        summary = builder.scope_summary(self.inputs, self.outputs)
        self._summary = [
            [[m for m in (self.summarize(s) for s in cell) if m is not None] for cell in row]
            for row in summary
        ]
        self.output_capabilities = [MutableAntichain() for _ in range(self.outputs)]  # outer times
        for loc, t, c in initial:
            self.tracker.update(loc, t, c)
        self.finalized = True
        self._propagate()
        for child in self.children[1:]:
            if isinstance(child, Subgraph):
                child._accept_frontier()
                child._propagate()
        self._initial = [ChangeBatch() for _ in range(self.outputs)]
        for j in range(self.outputs):
            self.shared.internals[j].drain_into(self._initial[j])

    def get_internal_summary(self) -> Tuple[List[List[List[PathSummary]]], List[ChangeBatch]]:
        """The input-to-output summaries in outer time and the initial output capabilities,
        both computed by :meth:`finalize`."""
        return self._summary, self._initial

    # ------------------------------------------------------------------ running
    def _tracker(self) -> ReachabilityTracker:
        """The tracker; RuntimeError before :meth:`finalize` built it."""
        tracker = self.tracker
        if tracker is None:
            raise RuntimeError(f"scope {self.name!r} is not built yet")
        return tracker

    def _propagate(self) -> None:
        tracker = self.tracker
        assert tracker is not None, "propagate before finalize"
        final = self.final_progress
        if final.counts:
            to_outer = self.to_outer
            shared = self.shared
            for (loc, t), d in final.drain_unsorted():
                if loc[0] == 0:
                    if loc[2]:
                        shared.consumeds[loc[1]].update(to_outer(t), -d)
                    else:
                        shared.produceds[loc[1]].update(to_outer(t), d)
                else:
                    tracker.update(loc if type(loc) is Location else Location(*loc), t, d)
        if not tracker.staged:
            return
        pushed = tracker.propagate_all()
        children = self.children
        active = self.activations
        instruments = self.instruments
        listening = instruments is not None and instruments.enabled
        adopted = self._adopted
        for tgt, changes in pushed.items():
            node = tgt.node
            child = children[node]
            if adopted[node]:  # the child's input frontier is the implication: flag the move
                child.frontier_moved = True
            else:
                child.shared.frontiers[tgt.port].extend(changes)
            if child.wake_on_frontier:
                active[node] = True
            if listening and instruments is not None:
                instruments.emit(
                    FrontierChanged(
                        instruments.worker, self.name, tgt.node, tgt.port, tuple(changes)
                    )
                )
        if tracker.output_changes:
            to_outer = self.to_outer
            for j, oc in tracker.output_changes.items():
                if oc.counts:
                    changes = [(to_outer(t), d) for t, d in oc.drain_unsorted()]
                    fc = self.output_capabilities[j].update_iter(changes)
                    if fc:
                        self.shared.internals[j].extend(fc)

    def _accept_frontier(self) -> None:
        tracker = self.tracker
        to_inner = self.to_inner
        assert tracker is not None, "accept a frontier before finalize"
        for i, fb in enumerate(self.shared.frontiers):
            if fb.counts:
                for t, d in fb.drain_unsorted():
                    tracker.update(Location(0, i, True), to_inner(t), d)

    def schedule(self) -> bool:
        """One step of the progress protocol around the active children; True while anything
        inside is incomplete."""
        local = self.local_progress
        final = self.final_progress
        if self.inputs:
            self._accept_frontier()  # 1. The parent's frontier at our inputs.
            for i, ic in enumerate(self.ingress_counts):  # 2. Records that entered.
                if ic.counts:
                    src = Location(0, i, True)
                    targets = self.edges_from.get(src, ())
                    for t, n in ic.drain_unsorted():
                        local.update((src, t), -n)
                        for tgt in targets:
                            local.update((tgt, t), n)
        if self.progcaster is not None:  # 3. Every worker's progress batches.
            for batch in self.progcaster.recv():
                final.extend(batch)
        if local.counts:  # (each call below is skipped when it has nothing to do)
            self._send_progress()
        tracker = self._tracker()  # 4. Propagate and push frontiers.
        if final.counts or tracker.staged:
            self._propagate()
        # 5-7. Run active children, share progress, propagate; on one worker repeat while
        # the new frontiers activated children (bounded, so a step stays short).
        rounds = 1 if self.progcaster is not None else self.max_rounds
        for _ in range(rounds):
            self._run_children(local)
            if self._queue_counts:
                self._count_queues()
            if local.counts:
                self._send_progress()
            if final.counts or tracker.staged:
                self._propagate()
            if not any(self.activations):
                break
        return self.incomplete()

    max_rounds = 8
    """Rounds of children per :meth:`schedule` on a single worker (with several, one round)."""

    def _report_moves(
        self, op: Operate, accounted: Any = frozenset()
    ) -> Tuple[Tuple[Dict[Any, int], Tuple[Location, ...], Tuple[Location, ...], int], ...]:
        """Where a child's reports go: ``(counts of one report buffer, locations inside the
        scope, locations on its boundary, sign)`` for each consumed (at its input, negated),
        internal (at its output) and produced (at every target of its output) buffer. The
        ``accounted`` targets are counted in their queues: their reports are only cleared."""
        sp = op.shared
        moves: List[Tuple[Dict[Any, int], Tuple[Location, ...], int]] = [
            (b.counts, (Location(op.index, i, False),), -1) for i, b in enumerate(sp.consumeds)
        ]
        moves += [(b.counts, (Location(op.index, o, True),), 1) for o, b in enumerate(sp.internals)]
        moves += [
            (b.counts, tuple(self.edges_from.get(Location(op.index, o, True), ())), 1)
            for o, b in enumerate(sp.produceds)
        ]
        return tuple(
            (
                counts,
                tuple(loc for loc in locs if loc.node != 0 and loc not in accounted),
                tuple(loc for loc in locs if loc.node == 0),
                sign,
            )
            for counts, locs, sign in moves
        )

    def _adopt(self, op: Operate) -> bool:
        """Let the tracker maintain ``op``'s input frontiers in place (their implications), so
        the scope only flags a move instead of sending changes the operator re-applies. Only
        for operators that ask (``adopt_frontiers``) and read plain frontier buffers."""
        if not (getattr(op, "adopt_frontiers", False) and op.inputs and op.frontier_interest):
            return False
        tracker = self._tracker()
        implications = tracker.implications
        locs = [Location(op.index, i, False) for i in range(op.inputs)]
        if any(
            type(op.shared.frontiers[i]) is not ChangeBatch
            or locs[i] not in implications
            or implications[locs[i]].frontier
            or op.input_frontiers[i].frontier
            for i in range(op.inputs)
        ):
            return False
        for i, loc in enumerate(locs):
            tracker.adopt(loc, op.input_frontiers[i])
        return True

    def _run_children(self, local: ChangeBatch) -> None:
        children = self.children
        active = self.activations
        incomplete = self._incomplete
        final = self.final_progress.counts
        all_moves = self._moves
        listening = self.instruments is not None and self.instruments.enabled
        direct = self.progcaster is None
        staged = self._tracker().staged
        nested = self._nested
        for idx in range(1, len(children)):
            if not active[idx]:
                if not (incomplete[idx] and nested[idx]):
                    continue
            active[idx] = False
            child = children[idx]
            failure = None
            try:
                if listening:
                    incomplete[idx] = self._schedule_observed(idx, child)
                else:
                    incomplete[idx] = child.schedule()
            except BaseException as exc:
                # Keep the operator scheduled so messages queued behind the failing one are
                # still delivered if the caller carries on; report what it consumed first.
                active[idx] = True
                failure = exc
            # Move the child's reports (the hottest loop of progress: the count-table contract
            # of progress.kernel): on one worker into the tracker's staged counts (boundary
            # locations through the final batch), else into the batch to broadcast.
            if direct:
                for source, inner, outer, sign in all_moves[idx]:
                    if source:
                        for loc in inner:
                            st = staged.get(loc)
                            if st is None:
                                staged[loc] = (
                                    source.copy()
                                    if sign > 0
                                    else {t: -d for t, d in source.items()}
                                )
                            elif sign > 0:
                                for t, d in source.items():
                                    st[t] = st.get(t, 0) + d
                            else:
                                # Records produced and consumed in one round cancel here, so
                                # the propagation does not visit their location at all.
                                for t, d in source.items():
                                    c = st.get(t, 0) - d
                                    if c:
                                        st[t] = c
                                    else:
                                        del st[t]
                                if not st:
                                    del staged[loc]
                        if outer:
                            _move(source, outer, sign, final)
                        source.clear()
            else:
                _batch_reports(all_moves[idx], local.counts if child.local else final)
            if failure is not None:
                if self._queue_counts:
                    self._count_queues()
                self._send_progress()
                raise failure

    def _count_queues(self) -> None:
        """Stage the change of the records waiting in each counted queue since the last
        count (see :meth:`count_in_queue`). O(queues + messages that came or went), and one
        C-level test when every queue was and is empty."""
        _run(map(dict.clear, self._uncounted))  # the reports of these edges, in C
        if not self._waiting_counted and not any(self._counted_queues):
            return  # (the common case: every queue was and is empty, tested in C)
        tracker = self._tracker()
        for loc, queue, counted in self._queue_counts:
            if not (queue or counted):
                continue
            # ``counted`` holds the messages counted last time (the same objects): the queue
            # is what remains of them (operators pop the oldest first) followed by new ones.
            if len(counted) == len(queue) and counted[0] is queue[0]:
                continue  # (nothing came or went)
            had = bool(counted)
            staged = tracker.stage(loc)  # (the count-table contract of progress.kernel)
            while counted and (not queue or counted[0] is not queue[0]):
                t, data = counted.popleft()
                staged[t] = staged.get(t, 0) - len(data)
            for i in range(len(counted), len(queue)):
                message = queue[i]
                counted.append(message)
                t = message[0]
                staged[t] = staged.get(t, 0) + len(message[1])
            self._waiting_counted += bool(counted) - had

    def _schedule_observed(self, idx: int, child: Operate) -> bool:
        """``child.schedule()`` between an :class:`OperatorScheduled` and an
        :class:`OperatorFinished` event."""
        instruments = self.instruments
        assert instruments is not None, "an observed schedule without instruments"
        instruments.emit(OperatorScheduled(instruments.worker, self.name, idx, child.name))
        waiting = child.waiting_messages()
        started = perf_counter()
        result = child.schedule()
        elapsed = perf_counter() - started
        shared = child.shared
        consumed = sum(sum(b.counts.values()) for b in shared.consumeds)
        produced = sum(sum(b.counts.values()) for b in shared.produceds)
        instruments.emit(
            OperatorFinished(
                instruments.worker,
                self.name,
                idx,
                child.name,
                elapsed,
                consumed,
                produced,
                waiting - child.waiting_messages(),
            )
        )
        return result

    def _send_progress(self) -> None:
        local = self.local_progress
        if not local.counts:
            return
        if self.progcaster is None:
            local.drain_into(self.final_progress)
        else:
            self.progcaster.send(local.drain_unsorted())

    def has_work(self) -> bool:
        """Something is scheduled or pending here or in a nested scope (the next step would do
        something)."""
        if any(self.activations) or self.final_progress.counts or self.local_progress.counts:
            return True
        if self.tracker is not None and self.tracker.has_staged():
            return True
        for child in self.children[1:]:
            if isinstance(child, Subgraph) and child.has_work():
                return True
            if isinstance(child, Subgraph) and any(child.ingress_counts):
                return True
        return False

    def incomplete(self) -> bool:
        """Some child is incomplete or scheduled, or some pointstamp or progress is pending."""
        return (
            any(self._incomplete)
            or any(self.activations)
            or self._tracker().tracking_anything()
            or bool(self.final_progress.counts)
            or bool(self.local_progress.counts)
        )

    def retire(self) -> None:
        """The dataflow completed: every child drops the state nothing will read again (the
        traces no handle holds), at once rather than when the collector finds the cycles."""
        for op in self.children[1:]:
            op.retire()

    # ------------------------------------------------------------------ introspection
    def holds_back(self, source: Location, time: Any, target: Location, bound: Any) -> bool:
        """A capability at ``source`` with ``time`` implies a time strictly before ``bound`` at
        ``target`` (both in this scope): while it is held, the frontier at ``target`` cannot
        pass ``bound``. O(path summaries between them)."""
        le = self.order.le
        for summary in self._tracker().builder.summaries_from(source).get(target, ()):
            reached = summary.results_in(time)
            if reached is not None and reached != bound and le(reached, bound):
                return True
        return False

    def capability_holders(self) -> List[str]:
        """Names of children that still hold capabilities (for stall diagnostics)."""
        out: List[str] = []
        tracker = self.tracker
        if tracker is None:
            return out
        for loc, ps in tracker.pointstamps.items():
            if loc.node != 0 and ps.frontier:
                kind = "output" if loc.is_source else "input"
                out.append(
                    f"{self.children[loc.node].name!r} {kind} {loc.port} at {sorted(ps.frontier)}"
                )
        for child in self.children[1:]:
            if isinstance(child, Subgraph):
                out.extend(f"{self.name}/{h}" for h in child.capability_holders())
        return out

    def describe(self, indent: int = 0) -> str:
        """A text picture of the scope's operators and edges."""
        pad = "  " * indent
        lines = [f"{pad}scope {self.name!r} ({self.inputs} in, {self.outputs} out)"]
        for child in self.children[1:]:
            if isinstance(child, Subgraph):
                lines.append(f"{pad}  [{child.index}] subgraph:")
                lines.append(child.describe(indent + 2))
            else:
                lines.append(f"{pad}  [{child.index}] {child.name}")
        for s, t in self._edges:
            lines.append(f"{pad}  {s} -> {t}")
        return "\n".join(lines)
