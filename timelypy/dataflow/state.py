"""The state seam: what an operator that keeps state between times hands to a checkpoint.

An operator that keeps state from one time to the next (an arrangement's trace, reduce's
histories, distinct's counts, a capture's contents) implements :class:`Stateful`. A checkpoint is
taken on a quiet worker at a *closed* time ``F``: every input has passed ``F`` and every frontier
has reached it, so no operator holds work at a time before ``F`` and nothing has arrived at or
after ``F``. The operator then returns its state as an :class:`OperatorState`, and a worker of a
dataflow built anew from the same program restores it before any update at or after ``F``.

Keyed state is what makes rescaling possible: each piece carries the routing hash of its key
(``stable_hash(key) % peers`` picks its worker, as the operator's exchange does), so a worker
restoring onto another number of workers keeps exactly the pieces it owns. State that is not
split by key (the same on every worker, or none) goes in ``shared``.

Operators are named by their stable identity: the unique name of their scope and their index
in it (:func:`operator_id`), the same in every run of the same program.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Protocol, Tuple, runtime_checkable

__all__ = ["OperatorState", "Stateful", "operator_id"]


@dataclass
class OperatorState:
    """One operator's state on one worker at a closed time.

    ``keyed``: ``[(routing_hash, piece), ...]``, where ``routing_hash`` is
    :func:`~timelypy.hashing.stable_hash` of the key the operator's input is exchanged by and
    ``piece`` is plain data (records, times, diffs in lists, tuples and dicts). ``shared``:
    state that is not split by key, or ``None``. ``version``: the operator's own format version,
    so that a restore can refuse a state it does not understand.
    """

    keyed: List[Tuple[int, Any]] = field(default_factory=list)
    shared: Optional[Any] = None
    version: int = 1


@runtime_checkable
class Stateful(Protocol):
    """An operator whose state survives a restart.

    ``snapshot_state()`` is called on a quiet worker at a closed time and must not change the
    operator. ``restore_state(state)`` is called once, on an operator of a freshly built
    dataflow before it has seen any update, with the pieces this worker owns (gathered from
    every worker of the checkpointed run: the ``keyed`` pieces whose routing hash modulo the
    new number of workers is this worker's index, and the ``shared`` part of one of them).
    """

    def snapshot_state(self) -> OperatorState: ...

    def restore_state(self, state: OperatorState) -> None: ...


def operator_id(scope_name: str, index: int) -> str:
    """The stable identity of the operator at ``index`` in the scope named ``scope_name``."""
    return f"{scope_name}/{index}"
