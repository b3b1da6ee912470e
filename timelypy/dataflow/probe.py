"""Probes: observe the frontier of a stream from outside the dataflow."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Tuple

from ..progress.change_batch import ChangeBatch
from ..progress.frontier import MutableAntichain
from ..progress.reachability import Location
from .channels import InputPort, OutputPort
from .operator import OperatorCore

if TYPE_CHECKING:
    from ..progress.subgraph import Subgraph
    from .scope import Scope

__all__ = ["ProbeHandle", "ProbeOperator", "ProbesOnly"]


class ProbeHandle:
    """The frontier of one or more probed streams (their meet).

    ``less_than(t)``: some time strictly before ``t`` may still appear; ``less_equal(t)``: ``t``
    itself may still appear; ``done()``: nothing more can appear. The usual driver loop is
    ``while probe.less_than(input.time): worker.step()``.

    Example: ``probe = stream.probe()`` in a dataflow;
    ``worker.step_while(lambda: probe.less_than(t))``.
    """

    __slots__ = ("_frontier", "_targets")

    def __init__(
        self, le: Optional[Callable[[Any, Any], bool]] = None, total: bool = False
    ) -> None:
        self._frontier = MutableAntichain(le, total)
        self._targets: List[Tuple[Any, Location]] = []

    def attach(self, subgraph: "Subgraph", target: Location) -> None:
        """Record that a probe operator at ``target`` of ``subgraph`` reports to this handle.

        Example: ``stream.probe_with(handle)`` calls it; programs do not."""
        self._targets.append((subgraph, target))

    def __getstate__(self) -> dict:
        # A handle returned from a worker travels without its operators (they stay behind).
        return {"_frontier": self._frontier}

    def __setstate__(self, state: dict) -> None:
        self._frontier = state["_frontier"]
        self._targets = []

    @property
    def targets(self) -> List[Tuple[Any, Location]]:
        """``(subgraph, input location)`` of every probe operator reporting to this handle.

        Example: one ``(subgraph, location)`` per ``probe_with``."""
        return list(self._targets)

    def less_than(self, t: Any) -> bool:
        """Some time strictly before ``t`` may still appear. O(len(frontier)).

        Example: ``worker.step_while(lambda: probe.less_than(3))`` runs until times 0 to 2 are
        complete."""
        return self._frontier.less_than(t)

    def less_equal(self, t: Any) -> bool:
        """``t`` itself (or a time before it) may still appear. O(len(frontier)).

        Example: ``probe.less_equal(3)`` is ``True`` while time 3 may still appear."""
        return self._frontier.less_equal(t)

    def done(self) -> bool:
        """The frontier is empty: nothing more can appear.

        Example: ``worker.step_while(lambda: not probe.done())``."""
        return self._frontier.is_empty()

    @property
    def frontier(self) -> List[Any]:
        """The current frontier, sorted.

        Example: ``[3]`` while times 3 and later may still appear; ``[]`` once done."""
        return sorted(self._frontier.frontier)

    def __repr__(self) -> str:
        return f"ProbeHandle(frontier={self.frontier!r})"


class _FrontierSink(ChangeBatch):
    """Frontier changes pushed by the scope go straight into the probe handle, so the handle is
    current even before the probe operator runs."""

    __slots__ = ("_handle",)

    def __init__(self, handle: ProbeHandle) -> None:
        super().__init__()
        self._handle = handle

    def extend(self, pairs: Iterable[Tuple[Any, int]]) -> None:
        """Apply frontier changes to the handle's frontier."""
        self._handle._frontier.update_iter(pairs)


class ProbeOperator(OperatorCore):
    """Consumes its input (discarding data) and reports the input frontier to a handle."""

    wake_on_frontier = False

    def __init__(self, scope: "Scope", handle: ProbeHandle, name: str = "Probe") -> None:
        super().__init__(scope, name, 1, 0, initial_capabilities=False)
        self.shared.frontiers[0] = _FrontierSink(handle)
        handle.attach(self.subgraph, Location(self.index, 0, False))
        self.input_ports[0].columns = True  # counts messages only: no need to decode columns
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]

    def schedule(self) -> bool:
        """Discard queued messages and report them consumed; returns False."""
        q = self._queue
        consumed = self._consumed.counts  # count-table contract, short form (progress.kernel)
        while q:
            time, data = q.popleft()
            consumed[time] = consumed.get(time, 0) + len(data)
        return False


class ProbesOnly:
    """Whether nothing but probes reads an output port: they only count a message's records,
    so an operator that inspects its outputs itself (a fused ``inspect``) may send a list of
    as many ``None`` instead of the records, and never keep them. Checked again when the
    number of consumers changes.

    Example: ``only = ProbesOnly(op.output_ports[0])``; ``only()`` is True when the port
    feeds probes and nothing else (or nothing).
    """

    __slots__ = ("_port", "_seen", "_only")

    def __init__(self, port: OutputPort) -> None:
        self._port = port
        self._seen = -1
        self._only = False

    def __call__(self) -> bool:
        pushers = self._port.pushers
        if len(pushers) != self._seen:
            self._only = all(
                type(p) is InputPort and isinstance(p.subgraph.children[p.node], ProbeOperator)
                for p in pushers
            )
            self._seen = len(pushers)
        return self._only
