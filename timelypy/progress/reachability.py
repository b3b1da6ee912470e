"""Reachability: path summaries between all ports of a scope, and the progress tracker.

Vocabulary (timely dataflow's progress tracking, as on the timely wiki): a *location* is an
operator port. A *source* is an operator output, a *target* an operator input. Node 0 is the
scope's boundary seen from inside: ``Source(0, i)`` is scope input ``i`` and ``Target(0, j)`` is
scope output ``j`` (:mod:`.location`; its names are found here too).

:class:`ReachabilityBuilder` collects each operator's internal summaries and the edges, rejects
cycles along which time does not strictly advance, and computes, for every location, the
antichain of path summaries to every target it can reach (the "all pairs" formulation: memory
quadratic in ports, which is small for dataflow graphs).

:class:`ReachabilityTracker` keeps pointstamp counts per location and the *implications* at
every target: the frontier of times that may still arrive there.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ..errors import CycleError
from ..order import PathSummary
from .change_batch import ChangeBatch
from .frontier import MutableAntichain
from .kernel import update
from .location import Location, Source, Target

__all__ = [
    "Location",
    "Source",
    "Target",
    "ReachabilityBuilder",
    "ReachabilityTracker",
]


def insert_summary(antichain: List[PathSummary], summary: PathSummary) -> bool:
    """Insert into a list kept as an antichain of summaries; False if already dominated.
    O(len(antichain))."""
    for s in antichain:
        if s.less_equal(summary):
            return False
    antichain[:] = [s for s in antichain if not summary.less_equal(s)]
    antichain.append(summary)
    return True


def _imply_through(
    others: Sequence[Tuple[int, Any, Dict[Any, int], Any]],
    frontier_changes: List[Tuple[Any, int]],
    touched: Dict[int, Any],
) -> None:
    """Add ``frontier_changes`` through the path summaries of ``others`` (reached targets:
    ``(key, summaries, implication counts, (target, implication))``) to their counts."""
    for key, sums, icounts, entry in others:
        for t, d in frontier_changes:
            for s in sums:
                u = s.results_in(t)
                if u is not None:
                    update(icounts, u, d)
        touched[key] = entry


def _imply_total(
    touched: Iterable[Tuple[Location, MutableAntichain]],
) -> Dict[Location, List[Tuple[Any, int]]]:
    """The frontier changes of totally ordered implications whose tables changed (their
    ``frontier`` still the one before): each frontier becomes the least time with a positive
    count (the count-table contract of :mod:`.kernel`)."""
    pushed: Dict[Location, List[Tuple[Any, int]]] = {}
    for tgt, imp in touched:
        elements = imp.frontier
        old = elements[0] if elements else None
        counts = imp.table  # (kernel.least_positive, written out to save a call per target)
        if counts:
            new = min(counts)
            if counts[new] <= 0:  # transiently negative counts (several workers): scan
                new = min((t for t, c in counts.items() if c > 0), default=None)
        else:
            new = None
        if new == old:
            continue
        if new is None:
            imp.frontier = []
            pushed[tgt] = [(old, -1)]
        else:
            imp.frontier = [new]
            pushed[tgt] = [(new, 1)] if old is None else [(old, -1), (new, 1)]
    return pushed


class _Node:
    __slots__ = ("index", "name", "inputs", "outputs", "summary")

    def __init__(self, index, name, inputs, outputs, summary):
        self.index = index
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.summary = summary


class ReachabilityBuilder:
    """Collects nodes and edges of one scope and computes all path summaries.

    ``summary[i][o]`` is the list (antichain) of path summaries from input ``i`` to output ``o``
    of a node; an empty list means output ``o`` does not depend on input ``i``.
    """

    def __init__(self, identity: PathSummary) -> None:
        self.identity = identity
        self.nodes: Dict[int, _Node] = {}
        self.edges: Dict[Location, List[Location]] = {}
        self._reverse: Dict[Location, Location] = {}

    def add_node(
        self,
        index: int,
        inputs: int,
        outputs: int,
        summary: Sequence[Sequence[Sequence[PathSummary]]],
        name: str = "",
    ) -> None:
        """Register node ``index`` with its ``inputs`` x ``outputs`` internal summaries (copied);
        ValueError if the shape does not match."""
        if len(summary) != inputs or any(len(row) != outputs for row in summary):
            raise ValueError(f"node {index} ({name}): summary must be {inputs} x {outputs}")
        self.nodes[index] = _Node(
            index,
            name or f"node{index}",
            inputs,
            outputs,
            [[list(cell) for cell in row] for row in summary],
        )

    def add_edge(self, source: Location, target: Location) -> None:
        """Connect ``source`` to ``target``; ValueError unless it goes from a source to a
        target that has no incoming edge yet."""
        if not source.is_source or target.is_source:
            raise ValueError(f"edges go from a source to a target, got {source} -> {target}")
        if target in self._reverse:
            raise ValueError(f"{target} already has an incoming edge (use concat to merge streams)")
        self._reverse[target] = source
        self.edges.setdefault(source, []).append(target)

    def name_of(self, node: int) -> str:
        """The name of node ``node`` (``node<index>`` if it is not registered)."""
        n = self.nodes.get(node)
        return n.name if n else f"node{node}"

    # ---------------------------------------------------------------- cycle check
    def check_acyclic(self) -> None:
        """Raise :class:`CycleError` naming the operators on a cycle that does not advance time.

        Kahn's algorithm over locations, with every edge and every internal link whose
        antichain contains the identity summary.
        """
        succ: Dict[Location, List[Location]] = {}
        indeg: Dict[Location, int] = {}

        def add(a: Location, b: Location) -> None:
            succ.setdefault(a, []).append(b)
            indeg[b] = indeg.get(b, 0) + 1
            indeg.setdefault(a, indeg.get(a, 0))

        for src, tgts in self.edges.items():
            for t in tgts:
                add(src, t)
        for node in self.nodes.values():
            for i, row in enumerate(node.summary):
                for o, cell in enumerate(row):
                    if any(s.is_identity() for s in cell):
                        add(Target(node.index, i), Source(node.index, o))
        ready = deque(loc for loc, d in indeg.items() if d == 0)
        remaining = dict(indeg)
        while ready:
            loc = ready.popleft()
            del remaining[loc]
            for nxt in succ.get(loc, ()):
                remaining[nxt] -= 1
                if remaining[nxt] == 0:
                    ready.append(nxt)
        if not remaining:
            return
        # Walk predecessors inside the remaining set until a location repeats: that is a cycle.
        pred: Dict[Location, Location] = {}
        for a, bs in succ.items():
            for b in bs:
                if a in remaining and b in remaining:
                    pred.setdefault(b, a)
        loc = next(iter(remaining))
        seen: Dict[Location, int] = {}
        path: List[Location] = []
        while loc not in seen:
            seen[loc] = len(path)
            path.append(loc)
            loc = pred[loc]
        cycle = list(reversed(path[seen[loc] :]))
        names: List[str] = []
        for step in cycle:
            nm = self.name_of(step.node) if step.node != 0 else "scope boundary"
            if not names or names[-1] != nm:
                names.append(nm)
        if len(names) > 1 and names[-1] == names[0]:
            names.pop()
        raise CycleError(
            "dataflow cycle along which time does not strictly advance (a loop needs a "
            "feedback operator with a summary that advances time): "
            + " -> ".join(names + names[:1])
        )

    # ---------------------------------------------------------------- summaries
    def summaries_from(self, start: Location) -> Dict[Location, List[PathSummary]]:
        """Antichains of path summaries from ``start`` to every target it reaches.

        A target reaches itself with the identity summary.
        """
        result: Dict[Location, List[PathSummary]] = {}
        work: deque = deque()
        if start.is_source:
            for t in self.edges.get(start, ()):
                if insert_summary(result.setdefault(t, []), self.identity):
                    work.append((t, self.identity))
        else:
            result[start] = [self.identity]
            work.append((start, self.identity))
        while work:
            tgt, s = work.popleft()
            if tgt.node == 0:
                continue  # a scope output: no path leads through the outside world
            node = self.nodes[tgt.node]
            for o, cell in enumerate(node.summary[tgt.port]):
                for s_op in cell:
                    c = s.followed_by(s_op)
                    if c is None:
                        continue
                    for t2 in self.edges.get(Source(tgt.node, o), ()):
                        if insert_summary(result.setdefault(t2, []), c):
                            work.append((t2, c))
        return result

    def locations(self) -> List[Location]:
        """Every port of every registered node: its targets (inputs), then its sources."""
        locs: List[Location] = []
        for node in self.nodes.values():
            locs.extend(Target(node.index, i) for i in range(node.inputs))
            locs.extend(Source(node.index, o) for o in range(node.outputs))
        return locs

    def scope_summary(self, inputs: int, outputs: int) -> List[List[List[PathSummary]]]:
        """Summaries from each scope input ``Source(0, i)`` to each scope output
        ``Target(0, j)``."""
        out: List[List[List[PathSummary]]] = []
        for i in range(inputs):
            reach = self.summaries_from(Source(0, i))
            out.append([list(reach.get(Target(0, j), [])) for j in range(outputs)])
        return out

    def build(
        self,
        le: Callable[[Any, Any], bool],
        total: bool = False,
        interested: Optional[Set[Location]] = None,
    ) -> "ReachabilityTracker":
        """Check cycles and make a tracker; ``interested`` limits the targets whose
        implications are maintained (default: all)."""
        self.check_acyclic()
        return ReachabilityTracker(self, le, total, interested)


class ReachabilityTracker:
    """Pointstamp counts per location and implications (frontiers) at every target.

    :meth:`update` stages a count change; :meth:`propagate_all` applies the staged changes and
    returns the implication frontier changes per target. Only *frontier changes* of each
    location's own counts travel along paths (as in timely), so transiently negative counts
    at one location can never cancel a positive count at another.

    ``output_changes[j]`` accumulates the implications at scope output ``j`` caused by
    locations other than node 0 (used by a nested scope to report its output capabilities).
    """

    def __init__(
        self,
        builder: ReachabilityBuilder,
        le: Callable[[Any, Any], bool],
        total: bool = False,
        interested: Optional[Set[Location]] = None,
    ) -> None:
        self._le = le
        self._total = total
        self.builder = builder
        self.reach: Dict[Location, List[Tuple[Location, Optional[List[PathSummary]]]]] = {}
        self.output_reach: Dict[Location, List[Tuple[int, List[PathSummary]]]] = {}
        locations = builder.locations()
        scope = builder.nodes.get(0)
        if scope is not None:
            locations.extend(Source(0, i) for i in range(scope.outputs))
        for loc in locations:
            if loc.node == 0 and not loc.is_source:
                continue
            sums = builder.summaries_from(loc)
            # ``None`` marks a path whose only summary is the identity (the common case).
            self.reach[loc] = [
                (t, None if len(s) == 1 and s[0].is_identity() else s)
                for t, s in sums.items()
                if t.node != 0 and (interested is None or t in interested)
            ]
            out = [(t.port, s) for t, s in sums.items() if t.node == 0]
            if loc.node != 0 and out:
                self.output_reach[loc] = out
        self.pointstamps: Dict[Location, MutableAntichain] = {}
        self.implications: Dict[Location, MutableAntichain] = {
            loc: MutableAntichain(le, total)
            for loc in locations
            if not loc.is_source and loc.node != 0 and (interested is None or loc in interested)
        }
        self.output_changes: Dict[int, ChangeBatch] = {}
        self.staged: Dict[Location, Dict[Any, int]] = {}
        """The count changes staged per location, ``{location: {time: delta}}``, applied by
        :meth:`propagate_all`. Writers (the scope's hot loops) may add to these tables in place
        as :meth:`update` does; zero deltas are allowed and ignored."""
        self._routes: Dict[Location, Any] = {}
        self._total_routes: Dict[Location, Any] = {}
        self._target_keys: Dict[Location, int] = {}
        self.total_counts = 0
        self.cap_counts: Dict[int, int] = {}

    def update(self, loc: Location, time: Any, delta: int) -> None:
        """Stage a pointstamp count change at ``loc``. O(1)."""
        if delta:
            staged = self.staged.get(loc)
            if staged is None:
                self.staged[loc] = {time: delta}
            else:
                staged[time] = staged.get(time, 0) + delta

    def stage(self, loc: Location) -> Dict[Any, int]:
        """The ``{time: delta}`` changes staged at ``loc``, for a caller that adds many
        (zero deltas are allowed and ignored). O(1)."""
        staged = self.staged.get(loc)
        if staged is None:
            staged = self.staged[loc] = {}
        return staged

    def update_source(self, node: int, port: int, time: Any, delta: int) -> None:
        """Stage a capability count change at output ``port`` of ``node``. O(1)."""
        self.update(Location(node, port, True), time, delta)

    def update_target(self, node: int, port: int, time: Any, delta: int) -> None:
        """Stage a count change of messages in flight to input ``port`` of ``node``. O(1)."""
        self.update(Location(node, port, False), time, delta)

    def has_staged(self) -> bool:
        """Some count change is staged and not yet propagated. O(1)."""
        return bool(self.staged)

    def propagate_all(self) -> Dict[Location, List[Tuple[Any, int]]]:
        """Apply staged changes; return implication frontier changes per target.

        Cost: each location's count changes, then each change of its frontier once per target
        it reaches and per path summary to that target.
        """
        if not self.staged:
            return {}
        if self._total:
            return self._propagate_total()
        staged, self.staged = self.staged, {}
        routes = self._routes
        cap_counts = self.cap_counts
        pending: Dict[int, Tuple[Location, MutableAntichain, List[Tuple[Any, int]]]] = {}
        for loc, changes in staged.items():
            if not any(changes.values()):  # produced and consumed within the same round
                continue
            route = routes.get(loc)
            if route is None:
                route = self._route(loc)
            ps, targets, node, outputs = route
            moved = sum(changes.values())
            if moved:
                self.total_counts += moved
                if node is not None:
                    cap_counts[node] = cap_counts.get(node, 0) + moved
            frontier_changes = ps.update_iter(changes.items())
            if not frontier_changes:
                continue
            for key, tgt, sums, imp in targets:
                entry = pending.get(key)
                if entry is None:
                    entry = pending[key] = (tgt, imp, [])
                if sums is None:
                    entry[2].extend(frontier_changes)
                    continue
                bucket = entry[2]
                for t, d in frontier_changes:
                    for s in sums:
                        u = s.results_in(t)
                        if u is not None:
                            bucket.append((u, d))
            if outputs:
                self._to_outputs(loc, frontier_changes)
        pushed: Dict[Location, List[Tuple[Any, int]]] = {}
        for tgt, imp, bucket in pending.values():
            fc = imp.update_iter(bucket)
            if fc:
                pushed[tgt] = fc
        return pushed

    def _propagate_total(self) -> Dict[Location, List[Tuple[Any, int]]]:
        """:meth:`propagate_all` for totally ordered times, where each frontier is the least
        time with a positive count: the kernels of :mod:`.kernel` update the count tables of
        the pointstamps and implications directly (no call per change; the hot path of a
        closed loop)."""
        staged, self.staged = self.staged, {}
        routes = self._total_routes
        cap_counts = self.cap_counts
        touched: Dict[int, Tuple[Location, MutableAntichain]] = {}
        total = 0
        for loc, changes in staged.items():
            route = routes.get(loc)
            if route is None:
                route = self._total_route(loc)
            ps, identity, others, node, outputs = route
            frontier = ps.frontier
            old = frontier[0] if frontier else None
            counts = ps.table  # (kernel.update_total, written out: the count-table contract)
            moved = 0
            lowered = False
            for t, d in changes.items():
                if d:
                    moved += d
                    c = counts.get(t, 0) + d
                    if c:
                        counts[t] = c
                    else:
                        del counts[t]
                    if old is None or t <= old:
                        lowered = True
            if moved:
                total += moved
                if node is not None:
                    cap_counts[node] = cap_counts.get(node, 0) + moved
            if not lowered:
                continue
            new = min(counts) if counts else None  # (kernel.least_positive, written out)
            if new is not None and counts[new] <= 0:  # transiently negative counts: scan
                new = min((t for t, c in counts.items() if c > 0), default=None)
            if new == old:
                continue
            ps.frontier = [] if new is None else [new]
            # The frontier moved from old to new: so do the counts of every implication it
            # reaches by the identity (their frontiers are brought up to date by _imply_total).
            # (kernel.move, written out: the count-table contract's full form)
            for key, icounts, entry in identity:
                if old is not None:
                    c = icounts.get(old, 0) - 1
                    if c:
                        icounts[old] = c
                    else:
                        del icounts[old]
                if new is not None:
                    c = icounts.get(new, 0) + 1
                    if c:
                        icounts[new] = c
                    else:
                        del icounts[new]
                touched[key] = entry
            if others or outputs:
                self._spread_total(loc, old, new, others, outputs, touched)
        self.total_counts += total
        return _imply_total(touched.values())

    def _spread_total(
        self,
        loc: Location,
        old: Any,
        new: Any,
        others: Sequence[Tuple[int, Any, Dict[Any, int], Any]],
        outputs: bool,
        touched: Dict[int, Any],
    ) -> None:
        """Carry the move of ``loc``'s frontier from ``old`` to ``new`` through the path
        summaries that are not the identity, and to the scope outputs it reaches."""
        frontier_changes = (
            [(old, -1)] if new is None else [(new, 1)] if old is None else [(old, -1), (new, 1)]
        )
        if others:
            _imply_through(others, frontier_changes, touched)
        if outputs:
            self._to_outputs(loc, frontier_changes)

    def _total_route(self, loc: Location) -> Tuple[Any, ...]:
        """:meth:`_route` for :meth:`_propagate_total`: the pointstamps, the targets reached by
        the identity (``(key, implication counts, (target, implication))``) and the others
        (with their path summaries), the node if a source, whether it reaches scope outputs."""
        ps, targets, node, outputs = self._route(loc)
        identity = tuple(
            (key, imp.table, (tgt, imp)) for key, tgt, sums, imp in targets if sums is None
        )
        others = tuple(
            (key, sums, imp.table, (tgt, imp))
            for key, tgt, sums, imp in targets
            if sums is not None
        )
        route = self._total_routes[loc] = (ps, identity, others, node, outputs)
        return route

    def _route(
        self, loc: Location
    ) -> Tuple[MutableAntichain, List[Tuple[int, Location, Any, Any]], Optional[int], bool]:
        """What :meth:`propagate_all` needs of ``loc``, looked up once: its pointstamps, the
        targets it reaches (a small int key each, cheaper to hash than a location; the path
        summaries; the implications), its node if it is a source, and whether it reaches scope
        outputs."""
        ps = self.pointstamps.get(loc)
        if ps is None:
            ps = self.pointstamps[loc] = MutableAntichain(self._le, self._total)
        keys = self._target_keys
        targets = [
            (keys.setdefault(tgt, len(keys)), tgt, sums, self.implications[tgt])
            for tgt, sums in self.reach.get(loc, ())
        ]
        route = (ps, targets, loc.node if loc.is_source else None, loc in self.output_reach)
        self._routes[loc] = route
        return route

    def _to_outputs(self, loc: Location, frontier_changes: List[Tuple[Any, int]]) -> None:
        """Add the frontier changes at ``loc`` to the implications at the scope outputs it
        reaches."""
        for j, sums in self.output_reach[loc]:
            oc = self.output_changes.get(j)
            if oc is None:
                oc = self.output_changes[j] = ChangeBatch()
            for t, d in frontier_changes:
                for s in sums:
                    u = s.results_in(t)
                    if u is not None:
                        oc.update(u, d)

    def adopt(self, target: Location, antichain: MutableAntichain) -> None:
        """Maintain the implications at ``target`` in ``antichain`` (an operator's own input
        frontier, empty like the implications it replaces): the operator then reads them
        without copies. ValueError unless both are empty."""
        if self.implications[target].frontier or antichain.frontier:
            raise ValueError(f"adopt {target}: frontiers must be empty")
        self.implications[target] = antichain
        self._routes.clear()
        self._total_routes.clear()

    def frontier_at(self, target: Location) -> List[Any]:
        """The implication frontier at ``target``: the times that may still arrive there (do not
        mutate). KeyError for a target whose implications are not maintained."""
        return self.implications[target].frontier

    def tracking_anything(self) -> bool:
        """Some change is staged or some pointstamp count is non-zero.

        Not ``total_counts > 0``: on several workers a consumed count can arrive before the
        produced count it cancels, and a transient -n elsewhere would hide a real +n.
        """
        if self.staged:
            return True
        for ps in self.pointstamps.values():
            if ps.table:
                return True
        return False

    def holds_capabilities(self, node: int) -> bool:
        """The counts at ``node``'s outputs sum to more than zero. O(1)."""
        return self.cap_counts.get(node, 0) > 0

    def _check(self) -> None:
        """Assert every implication equals the brute-force minimum over all pointstamps."""
        from .frontier import Antichain

        for tgt, imp in self.implications.items():
            expected = Antichain(le=self._le)
            for loc, ps in self.pointstamps.items():
                for src_tgt, sums in self.reach.get(loc, ()):
                    if src_tgt != tgt:
                        continue
                    if sums is None:
                        sums = [self.builder.identity]
                    for t, c in ps.counts().items():
                        if c > 0:
                            for s in sums:
                                u = s.results_in(t)
                                if u is not None:
                                    expected.insert(u)
            assert set(imp.frontier) == set(expected), (tgt, imp.frontier, expected)
