"""``distinct`` and ``threshold`` at ``Product(int, int)`` times, without an arrangement.

:class:`ProductDistinct` is ``distinct`` on flat per-key states: an iterative reachability
evaluates tens of thousands of keys of a large state per round, mostly waiting for memory, so
each key has ONE flat list of ints, ``[size, mark, kind, outer, inner, diff, ...]`` (a *quad
list*, as the kernels of :mod:`~timelypy.differential.kernel.histories` read them, with one more
header element), not five dictionaries and a tuple per update. An arriving update is appended
to its key's list at once (the key's one look-up in the large state is then the ingest's: the
evaluation finds the list in a small table of the keys touched since their last evaluation);
the quads from ``mark`` on are the updates not yet evaluated, and their times are registered
per time only (no per-key look-up). ``threshold`` with a function is a
:class:`~.product.ProductReduceUpdates` that evaluates the declared threshold on counts
(:func:`threshold_product` picks).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union

from ...dataflow.channels import Exchange
from ...dataflow.state import OperatorState, future_pieces
from ...dataflow.stream import Stream
from ...errors import RecoveryError
from ...order import Product
from ..kernel.distinct import DistinctState, evaluate_distinct, ingest_distinct
from .common import Logic, Output, Time, beyond_test, check_product, place_new_times
from .logic import GroupLogic, distinct_logic, threshold_logic
from .product import ProductReduceUpdates

if TYPE_CHECKING:
    from ...dataflow.scope import Scope

__all__ = ["ProductDistinct", "threshold_product"]

_tuple_new = tuple.__new__


class ProductDistinct(ProductReduceUpdates):
    """``distinct`` of records at ``Product(int, int)`` times, on flat per-key states. Each key
    has one quad list in :attr:`state`: ``[size, mark, kind, outer, inner, diff, ...]``
    (``size``: its length after its last compaction; ``kind`` 0 input, 1 output); arriving
    updates are appended as input quads and wait, from index ``mark`` on, until their key is
    evaluated. Their times are registered in ``pending_times`` only; ``pending`` holds a key's
    other interesting times (joins) not yet evaluated: the ingest makes no look-up there. The
    steps are :func:`_evaluate_distinct`'s."""

    state_keyed = ProductReduceUpdates.state_keyed + ("state",)

    def __init__(self, scope: "Scope", logic: Union[Logic, GroupLogic], name: str) -> None:
        super().__init__(scope, logic, name, keyed=False)
        self.state: Dict[Any, List[int]] = {}
        self._fresh: Dict[Any, List[int]] = {}
        """The states of the keys that took updates since their last evaluation (``state``'s
        lists): a small table, so that the evaluation finds them without a look-up in the
        large one."""

    def snapshot_state(self) -> OperatorState:
        """The per-key states (format version 2: quad lists with a mark) and pending times."""
        state = super().snapshot_state()
        state.version = 2
        return state

    def restore_state(self, state: OperatorState) -> None:
        """Put the pieces back; version 1 (a quad list without a mark, and the updates not yet
        evaluated apart, in ``fresh``) is read as well."""
        if state.version == 1:
            state = OperatorState(
                keyed=[(h, _from_version_1(piece)) for h, piece in state.all_keyed()],
                shared=state.shared,
                version=2,
            )
        elif state.version != 2:
            raise RecoveryError(
                f"operator {self._state_owner()}: state version {state.version}; this "
                "timelypy reads versions 1 and 2"
            )
        self._fresh.clear()
        super().restore_state(state)

    def future_state(self) -> List[Tuple[Any, str, Any]]:
        """The pending times per key, ``(key, "pending", [((outer, inner), None), ...])``,
        from ``pending_times`` (the times of updates not yet evaluated are registered only
        there)."""
        at_or_beyond = self.input_frontiers[0].less_equal
        held = {(key, t) for t, keys in self.pending_times.items() for key in keys}
        return future_pieces(
            self._state_owner(),
            "pending",
            ((key, t, None) for key, t in held),
            lambda t: at_or_beyond(_tuple_new(Product, t)),
        )

    def _ingest(self, data: List[Any], keyed: bool) -> None:
        ingest_distinct(data, self.state, self._fresh, self.pending_times, self.add_pending_time)

    def _evaluate_keys(
        self, ready: Dict[Any, List[Time]], frontier: List[Time], output: Output
    ) -> None:
        evaluate_distinct(
            ready,
            frontier,
            output,
            beyond_test(frontier),
            DistinctState(
                self.state,
                self._fresh,
                self.pending,
                self.pending_times,
                self.add_pending_time,
                partial(place_new_times, self),
                Product,
            ),
        )

    def _drop_histories(self) -> None:
        self.state.clear()
        self._fresh.clear()


def threshold_product(
    updates: Stream, f: Optional[Callable[[Any, int], int]] = None, name: str = "Threshold"
) -> Stream:
    """``threshold`` (``f(record, count)``; ``None``: ``distinct``) of a stream of
    ``(record, time, diff)`` at ``Product(int, int)`` times without an arrangement; output
    ``(record, time, diff)``."""
    scope = updates.scope
    check_product(scope, name)
    if f is None:
        op: ProductReduceUpdates = ProductDistinct(scope, distinct_logic, name)
    else:
        op = ProductReduceUpdates(scope, threshold_logic(f), name, keyed=False)
    updates.connect_to(op, 0, Exchange(_record_of))
    return Stream(scope, op.output_ports[0])


def _record_of(u: Any) -> Any:
    return u[0]


def _from_version_1(piece: Any) -> Any:
    """A key's piece of a version 1 state in version 2: its quad list ``[size, quads...]``
    gets a mark after its quads, and its ``fresh`` updates ``[outer, inner, diff, ...]`` are
    appended after the mark as input quads."""
    key, parts = piece
    parts = dict(parts)
    old = parts.pop("state", None) or [0]
    h = [old[0] + 1, len(old) + 1] + list(old[1:])
    it = iter(parts.pop("fresh", None) or ())
    for a, b, r in zip(it, it, it):
        h += (0, a, b, r)
    if len(h) > 2:
        parts["state"] = h
    return key, parts
