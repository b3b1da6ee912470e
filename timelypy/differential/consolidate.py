"""The consolidate operator: sum updates per ``(data, time)``, emit each time once complete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from ..dataflow.capability import CapabilitySet
from ..dataflow.channels import Exchange
from ..dataflow.operator import OperatorCore
from ..dataflow.state import KeyedState, future_pieces
from ..dataflow.stream import Stream
from ..errors import unhashable_error
from ..progress.frontier import Antichain
from .consolidation import accumulate_into

if TYPE_CHECKING:
    from ..dataflow.scope import Scope

__all__ = ["ConsolidateOperator", "consolidate_stream"]


def _data_of(u: Tuple[Any, Any, int]) -> Any:
    return u[0]


class ConsolidateOperator(KeyedState, OperatorCore):
    """Buffers updates (exchanged by record) and, when the input frontier passes a held
    capability, emits the consolidated updates it covers at that capability.

    At a closed time it keeps only updates at future times (which a temporal filter sends
    ahead): its snapshot holds them per record, and refuses a time that is not closed."""

    def __init__(self, scope: "Scope", name: str):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        self._pending: Dict[Tuple[Any, Any], int] = {}
        self._caps = CapabilitySet(self.order.le)
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._out = self.output_ports[0]

    def future_state(self) -> List[Tuple[Any, str, Any]]:
        """The held updates per record, ``(record, "pending", [(time, diff), ...])``."""
        return future_pieces(
            self._state_owner(),
            "pending",
            ((d, t, r) for (d, t), r in self._pending.items() if r),
            self.input_frontiers[0].less_equal,
        )

    def restore_future(self, key: Any, name: str, entries: Any) -> bool:
        """Add a record's restored updates."""
        if name != "pending":
            return False
        pending = self._pending
        for t, r in entries:
            pending[(key, t)] = pending.get((key, t), 0) + r
        return True

    def hold_future(self) -> None:
        """Hold capabilities at the least times of the restored updates."""
        times = Antichain(le=self.order.le)
        for _, t in self._pending:
            times.insert(t)
        internal = self.shared.internals[0]
        for t in times:
            self._caps.retain(t, internal, 0, self.name)

    def schedule(self) -> bool:
        """Sum arrived updates; emit those at times the input frontier has passed."""
        changed = self._apply_frontiers()
        q = self._queue
        if q:
            pending = self._pending
            caps = self._caps
            internal = self.shared.internals[0]
            while q:
                time, data = q.popleft()
                self._consumed.update(time, len(data))
                caps.retain(time, internal, 0, self.name)
                try:
                    accumulate_into(pending, data)
                except TypeError as exc:
                    raise unhashable_error(self, (u[0] for u in data)) from exc
        if changed and self._caps:
            self._flush()
        return False

    def _flush(self) -> None:
        """Emit the updates at times the input frontier has passed, each at the first ready
        capability at or before its time."""
        le = self.order.le
        beyond = self.input_frontiers[0].less_equal  # t is at or beyond the input frontier
        caps = self._caps
        ready_caps = sorted((c for c in caps if not beyond(c.time)), key=lambda c: c.time)
        if not ready_caps:
            return
        buckets: Dict[Any, List[Tuple[Any, Any, int]]] = {}
        keep: Dict[Tuple[Any, Any], int] = {}
        for (d, t), r in self._pending.items():
            if not r:
                continue
            if beyond(t):
                keep[(d, t)] = r
                continue
            for c in ready_caps:
                if le(c.time, t):
                    buckets.setdefault(c.time, []).append((d, t, r))
                    break
        for c in ready_caps:
            data = buckets.get(c.time)
            if data:
                self._out.push(c.time, data)
        self._pending = keep
        remaining = Antichain(le=le)
        for _, t in keep:
            remaining.insert(t)
        caps.downgrade(list(remaining))


def consolidate_stream(updates: Stream, name: str = "Consolidate") -> Stream:
    """``updates`` (a stream of ``(data, time, diff)``) exchanged by record and consolidated:
    at most one update per ``(data, time)``, none that cancel, each emitted once its time is
    complete."""
    scope = updates.scope
    op = ConsolidateOperator(scope, name)
    updates.connect_to(op, 0, Exchange(_data_of))
    return Stream(scope, op.output_ports[0])
