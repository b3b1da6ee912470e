"""A worker's side of a checkpoint: is a time closed, the states of its operators, their restore.

Every dataflow of a :class:`~timelypy.workers.worker.Worker` is walked, nested scopes too, and
each operator is named by :func:`~timelypy.dataflow.state.operator_id` (its scope's unique name
and its index there), the same in every run of the same program. An operator implementing
:class:`~timelypy.dataflow.state.Stateful` hands over its state; the inputs (timely input
handles, differential input sessions) hand over their position under their input operator's id.

Which operators keep state at a closed time, and which do not:

* stateful: the arrangement (its trace, compacted, and the updates its batcher holds at later
  times), every reduce (general, product, distinct on product times, count / distinct /
  threshold at total times: histories, counts, and the work pending at later times: a temporal
  filter's, a window's), consolidate (its updates at later times), the inputs (their time),
  ``capture`` (the captured messages not yet released to a poller);
* nothing at a closed time: map, filter, flat_map, concat, inspect, exchange, enter / leave,
  feedback (a loop's variables: inside a loop only its arrangements and reduces hold state,
  and they are walked with the nested scope), temporal_filter and freeze_at (linear: the
  updates they send ahead are held downstream), join (no batch waits at a closed time; its
  acknowledgements follow the restored traces, ``after_restore``), probe, an imported trace
  (its spine is the exporter's, restored there);
* not checkpointable: a timely operator written by the user (``unary`` / ``binary`` /
  ``operator`` with closures): its state lives in the closure, out of reach. A program whose
  closures keep state between times is not restored exactly.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Sequence, Tuple

from ..dataflow.state import OperatorState, Stateful, operator_id
from ..errors import RecoveryError
from ..progress.reachability import Location
from ..progress.subgraph import Subgraph

if TYPE_CHECKING:
    from ..progress.operate import Operate
    from ..workers.worker import Worker

__all__ = [
    "closed_at",
    "program_fingerprint",
    "restore_worker",
    "snapshot_worker",
    "state_holders",
]


def _walk(subgraph: Subgraph) -> Iterator[Tuple[str, Subgraph, int, "Operate"]]:
    """``(operator_id, scope, index, operator)`` for every operator of ``subgraph`` and the
    scopes nested in it (a nested scope is listed, then its operators)."""
    for index, child in enumerate(subgraph.children[1:], 1):
        yield operator_id(subgraph.name, index), subgraph, index, child
        if isinstance(child, Subgraph):
            yield from _walk(child)


def _operators(worker: "Worker") -> Iterator[Tuple[str, Subgraph, int, "Operate"]]:
    for root in worker.dataflows():
        yield from _walk(root)


def _sources(worker: "Worker") -> Dict[int, Any]:
    """The registered inputs by the identity of their input operator."""
    out: Dict[int, Any] = {}
    for source in worker.inputs():
        handle = getattr(source, "handle", source)
        op = getattr(handle, "operator", None)
        if op is not None:
            out[id(op)] = source
    return out


def _stateful(worker: "Worker") -> Iterator[Tuple[str, Any, Any]]:
    """``(operator_id, holder, operator)`` for every holder of state: stateful operators, and
    inputs under their input operator. The index in the id counts the holders of the scope
    only: fusing stateless stages into their consumer (which one worker does, several do not)
    changes the other operators' indices, not these."""
    sources = _sources(worker)
    counts: Dict[str, int] = {}
    for _, scope, _, op in _operators(worker):
        holder = sources.get(id(op))
        if holder is None and isinstance(op, Stateful):
            holder = op
        if holder is not None:
            k = counts[scope.name] = counts.get(scope.name, 0) + 1
            yield operator_id(scope.name, k), holder, op


def state_holders(worker: "Worker") -> List[Tuple[str, Any]]:
    """``(operator_id, holder)`` for every holder of state on the worker (stateful operators,
    and inputs), in the order :func:`snapshot_worker` visits them."""
    return [(oid, holder) for oid, holder, _ in _stateful(worker)]


@contextmanager
def _no_gc() -> Iterator[None]:
    """Collect no garbage meanwhile: a snapshot or restore makes millions of containers and
    frees none, so the generational collector would only rescan them (several times the
    cost of the copy itself)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _outer(time: Any, depth: int) -> Any:
    for _ in range(depth):
        time = time[0]
    return time


def closed_at(worker: "Worker", time: Any) -> bool:
    """True when no operator of any dataflow on this worker can still receive or hold work at
    a time before ``time``: every operator input frontier (nested scopes included; for a
    loop's ``Product`` times, their outer coordinate) is at or beyond ``time``, and no message
    waits in an operator's queue. A snapshot then is the exact state at ``time``."""
    if not worker.quiet():
        return False
    for root in worker.dataflows():
        le = root.order.le
        stack: List[Tuple[Subgraph, int]] = [(root, 0)]
        while stack:
            sub, depth = stack.pop()
            tracker = sub.tracker
            if tracker is None:
                return False
            for index, child in enumerate(sub.children[1:], 1):
                if isinstance(child, Subgraph):
                    stack.append((child, depth + 1))
                elif getattr(child, "waiting_messages", lambda: 0)():
                    return False
                for port in range(child.inputs):
                    try:
                        frontier = tracker.frontier_at(Location(index, port, False))
                    except KeyError:
                        continue
                    if any(not le(time, _outer(t, depth)) for t in frontier):
                        return False
    return True


def snapshot_worker(worker: "Worker") -> Dict[str, OperatorState]:
    """Every stateful operator of every dataflow on the worker, by operator id; the inputs
    (differential input sessions, timely input handles) too: their position. Call it on a
    quiet worker at a closed time (see :func:`closed_at`); a reduce or arrangement still
    holding work at a time the frontier has passed raises
    :class:`~timelypy.errors.RecoveryError` naming it (work at later times is state)."""
    with _no_gc():
        return {oid: holder.snapshot_state() for oid, holder, _ in _stateful(worker)}


def _describe(op: Any) -> str:
    name = str(getattr(op, "name", "?")).rsplit(">", 1)[-1]  # without fused stages
    return f"{type(op).__name__}[{name}]"


def program_fingerprint(worker: "Worker") -> Dict[str, str]:
    """``operator_id -> "ClassName[name]"`` for every stateful operator and input of every
    dataflow on the worker (nested scopes too): the program's shape as far as its state goes,
    compared on restore. Stateless operators are left out: one worker fuses stateless stages
    into their consumer where several do not, and a restore onto another number of workers
    is the same program."""
    return {oid: _describe(op) for oid, _, op in _stateful(worker)}


def restore_worker(
    worker: "Worker", snapshots: Sequence[Dict[str, OperatorState]], time: Any
) -> None:
    """Restore a freshly built dataflow (same program, no update yet) from ``snapshots``, the
    states of every worker of the checkpointed run (any number of them): each stateful
    operator gets the keyed pieces whose routing hash modulo ``worker.peers`` is
    ``worker.index`` and the shared part of the first snapshot that has one; the inputs
    continue at ``time`` (what the build sent before it is dropped). Then the joins count the
    restored traces as joined.

    :class:`~timelypy.errors.RecoveryError` names the operator when the program's stateful
    operators differ from the snapshots' (one missing on either side, or another kind of
    state)."""
    holders = {oid: holder for oid, holder, _ in _stateful(worker)}
    ops = {oid: op for oid, _, op in _stateful(worker)}
    if snapshots:
        known = set().union(*(s.keys() for s in snapshots))
        extra = sorted(known - holders.keys())
        if extra:
            raise RecoveryError(
                f"worker {worker.index}: the checkpoint has state for operator {extra[0]!r}, "
                f"which this program does not have as a stateful operator ({len(extra)} such)"
            )
        missing = sorted(holders.keys() - known)
        if missing:
            oid = missing[0]
            raise RecoveryError(
                f"worker {worker.index}: operator {oid!r} ({_describe(ops[oid])}) has no "
                f"state in the checkpoint ({len(missing)} such): another program"
            )
    with _no_gc():
        _restore(worker, holders, ops, snapshots)
    for source in worker.inputs():
        advance = getattr(source, "advance_to", None)  # (every input of the engine has it)
        if advance is not None and not source.closed and getattr(source, "time", time) != time:
            advance(time)
            source.flush()
    for _, _, _, op in _operators(worker):
        after = getattr(op, "after_restore", None)
        if after is not None:
            after()


def _restore(
    worker: "Worker",
    holders: Dict[str, Any],
    ops: Dict[str, Any],
    snapshots: Sequence[Dict[str, OperatorState]],
) -> None:
    """Hand every holder the pieces this worker owns (see :func:`restore_worker`)."""
    peers, index = worker.peers, worker.index
    for oid, holder in holders.items():
        keyed: List[Tuple[int, Any]] = []
        shared = None
        version = None
        for snap in snapshots:
            state = snap.get(oid)
            if state is None:
                continue
            if version is None:
                version = state.version
            elif state.version != version:
                raise RecoveryError(
                    f"operator {oid!r}: states of versions {version} and {state.version}"
                )
            pieces = state.all_keyed()
            if peers == 1:
                keyed.extend(pieces)
            else:
                keyed.extend(p for p in pieces if p[0] % peers == index)
            if shared is None:
                shared = state.shared
        piece = OperatorState(keyed=keyed, shared=shared, version=version or 1)
        try:
            holder.restore_state(piece)
        except RecoveryError:
            raise
        except Exception as exc:
            raise RecoveryError(
                f"operator {oid!r} ({_describe(ops[oid])}): cannot restore its state: {exc}"
            ) from exc
