"""The state seam: what an operator that keeps state between times hands to a checkpoint.

An operator that keeps state from one time to the next (an arrangement's trace, reduce's
histories, distinct's counts, a capture's contents) implements :class:`Stateful`. A checkpoint is
taken on a quiet worker at a *closed* time ``F``: every input has passed ``F`` and every frontier
has reached it, so no operator holds work at a time before ``F`` and nothing has arrived at or
after ``F``. The operator then returns its state as an :class:`OperatorState`, and a worker of a
dataflow built anew from the same program restores it before any update at or after ``F``.

At a closed time an operator may still hold work at *later* times: a temporal filter (and a
window built on it) sends updates at a future time at once, and the arrangement's batcher, the
reduces' pending times and sums and consolidate's buffer keep them, with capabilities, until the
frontier passes. That work is state too (:func:`future_pieces`), keyed like the rest; a restore
puts it back and holds capabilities at its times, which are at or after the closed time the
restored dataflow starts at. Work at a time the input frontier has passed means the time is not
closed, and the snapshot refuses it naming the operator.

Keyed state is what makes rescaling possible: each piece carries the routing hash of its key
(``stable_hash(key) % peers`` picks its worker, as the operator's exchange does), so a worker
restoring onto another number of workers keeps exactly the pieces it owns. State that is not
split by key (the same on every worker, or none) goes in ``shared``.

Which operators implement it: the arrangement (its trace compacted to the closed time), every
reduce (general, on product times, distinct on product times, count / distinct / threshold at
total times: per-key histories and counts), consolidate, the
inputs (differential ``InputSession`` and timely ``InputHandle``: their time) and ``capture``
(the captured messages). The others keep nothing at a closed time: map, filter, flat_map,
concat, inspect, exchange, enter / leave, feedback and the loop variables built on it (inside a
loop only its arrangements and reduces hold state, walked with the nested scope), join (no batch
waits; it acknowledges the restored traces in ``after_restore``), probe and an imported trace
(its spine is the exporter's). A timely operator written by the user (``unary``, ``binary``,
``sink``, ``scope.operator`` with closures) cannot be checkpointed: its state lives in its
closures, out of reach; a program whose closures keep state between times is not restored
exactly.

Operators are named by their stable identity: the unique name of their scope and their index
among the scope's holders of state (:func:`operator_id`; the inputs count as holders), the same
in every run of the same program on any number of workers (the index among all the scope's
operators is not: one worker fuses stateless stages into their consumer, several do not).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Protocol,
    Tuple,
    runtime_checkable,
)

from ..errors import RecoveryError
from ..hashing import stable_hash

__all__ = [
    "OperatorState",
    "Sealed",
    "KeyedState",
    "Stateful",
    "copy_piece",
    "future_pieces",
    "keyed_restore",
    "keyed_snapshot",
    "operator_id",
]


@dataclass(frozen=True)
class Sealed:
    """Keyed pieces of a part of an operator's state that never changes once made (a sealed
    trace batch), named by the identity of that part.

    ``token``: the object itself (kept alive, so its identity stays its own); ``version``:
    for an object changed in place by its owner only, a value that differs after every change
    that matters (None for an object that never changes); ``pieces``: makes its
    ``[(routing_hash, piece), ...]`` when called. A checkpoint store that wrote the pieces of
    ``token`` at ``version`` once references what it wrote, and neither calls ``pieces`` nor
    encodes them again: a checkpoint's cost follows what changed since the last one.
    """

    token: Any
    pieces: Callable[[], List[Tuple[int, Any]]]
    version: Any = None


@dataclass
class OperatorState:
    """One operator's state on one worker at a closed time.

    ``keyed``: ``[(routing_hash, piece), ...]``, where ``routing_hash`` is
    :func:`~timelypy.hashing.stable_hash` of the key the operator's input is exchanged by and
    ``piece`` is plain data (records, times, diffs in lists, tuples and dicts). ``sealed``:
    more keyed pieces, in immutable parts (:class:`Sealed`), which a store writes once and
    references afterwards; a restore receives them in ``keyed``, where a key may then have
    several pieces (one per part). ``shared``: state that is not split by key, or ``None``.
    ``version``: the operator's own format version, so that a restore can refuse a state it
    does not understand.
    """

    keyed: List[Tuple[int, Any]] = field(default_factory=list)
    shared: Optional[Any] = None
    version: int = 1
    sealed: List[Sealed] = field(default_factory=list)

    def all_keyed(self) -> List[Tuple[int, Any]]:
        """``keyed`` and the pieces of every sealed part, in one list."""
        if not self.sealed:
            return self.keyed
        out = list(self.keyed)
        for part in self.sealed:
            out.extend(part.pieces())
        return out


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
    """The stable identity of the ``index``-th holder of state (counted from 1, in the order
    the operators were built) in the scope named ``scope_name``."""
    return f"{scope_name}/{index}"


def copy_piece(value: Any) -> Any:
    """A copy of a piece of state deep enough that the operator's later changes do not reach
    it: lists, sets and dicts are copied one level (their items are tuples and numbers)."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, set):
        return set(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def keyed_snapshot(
    owner: str,
    stores: Dict[str, Dict[Any, Any]],
    empty: Dict[str, Any],
    pending: Iterable[Tuple[Any, str, Any]] = (),
) -> OperatorState:
    """The state of an operator made of per-key dictionaries (``stores``, by attribute name):
    one piece ``(key, {name: value})`` per key, routed by ``stable_hash(key)``.

    ``empty``: containers that must be empty at a closed time (pending work); a non-empty one
    means the time is not closed, and :class:`~timelypy.errors.RecoveryError` names ``owner``.
    ``pending``: ``(key, name, value)`` for work held at future times (see
    :func:`future_pieces`), added to the key's piece under ``name``.
    """
    for name, container in empty.items():
        if container:
            raise RecoveryError(
                f"operator {owner}: {name} holds {len(container)} entries: the time is not "
                "closed (a snapshot needs a quiet worker at a closed time)"
            )
    keys: Dict[Any, Dict[str, Any]] = {}
    for name, store in stores.items():
        for key, value in store.items():
            keys.setdefault(key, {})[name] = copy_piece(value)
    for key, name, value in pending:
        keys.setdefault(key, {})[name] = value
    return OperatorState(keyed=[(stable_hash(key), (key, parts)) for key, parts in keys.items()])


def keyed_restore(
    owner: str,
    state: OperatorState,
    stores: Dict[str, Dict[Any, Any]],
    pending: Optional[Callable[[Any, str, Any], bool]] = None,
) -> None:
    """Put the pieces of :func:`keyed_snapshot` back into ``stores`` (by attribute name);
    ``pending(key, name, value)`` takes the parts that are not a store (work at future times)
    and answers whether it knew ``name``."""
    for _, piece in state.keyed:
        key, parts = piece
        for name, value in parts.items():
            store = stores.get(name)
            if store is None:
                if pending is not None and pending(key, name, value):
                    continue
                raise RecoveryError(f"operator {owner}: unknown state {name!r} for key {key!r}")
            store[key] = copy_piece(value)


def future_pieces(
    owner: str, name: str, entries: Iterable[Tuple[Any, Any, Any]], beyond: Callable[[Any], bool]
) -> List[Tuple[Any, str, Any]]:
    """Pending work at future times as keyed parts: ``entries`` are ``(key, time, item)``,
    grouped into one ``(key, name, [(time, item), ...])`` per key.

    At a closed time ``F`` an operator may still hold work at times after ``F`` (a temporal
    filter or a window sends updates at a window's end at once; the operators downstream hold
    them, with capabilities, until the frontier passes): that work is state. ``beyond(time)``
    says whether ``time`` is at or beyond the operator's input frontier; work at a time that
    is not means the time is not closed, and :class:`~timelypy.errors.RecoveryError` names
    ``owner``, the number of such entries and the earliest."""
    by_key: Dict[Any, List[Tuple[Any, Any]]] = {}
    late: List[Any] = []
    for key, time, item in entries:
        if not beyond(time):
            late.append(time)
            continue
        held = by_key.get(key)
        if held is None:
            by_key[key] = [(time, item)]
        else:
            held.append((time, item))
    if late:
        first = min(late) if _sortable(late) else late[0]
        raise RecoveryError(
            f"operator {owner}: {name} holds {len(late)} entries at times the input frontier "
            f"has passed (the earliest {first!r}): the time is not closed (a snapshot needs a "
            "quiet worker at a closed time)"
        )
    return [(key, name, held) for key, held in by_key.items()]


def _sortable(times: List[Any]) -> bool:
    try:
        min(times)
    except TypeError:
        return False
    return True


class KeyedState:
    """A mixin making an operator :class:`Stateful` whose state is per-key dictionaries.

    ``state_keyed``: the names of its ``key -> value`` dictionaries (histories, counts),
    snapshotted one piece per key. ``state_closed``: the names of containers of pending work
    (times not yet evaluated) that are empty at a closed time; a snapshot refuses a non-empty
    one. The operator's exchange must route by the same key (``stable_hash(key) % peers``).

    Work held at future times (after the closed time: what a temporal filter sends ahead) is
    state too, for an operator that overrides :meth:`future_state` (its pending entries as
    :func:`future_pieces`), :meth:`restore_future` (one key's entries back) and
    :meth:`hold_future` (capabilities at the restored times, which are at or after the
    closed time the dataflow restarts at, so holding them is legal).
    """

    state_keyed: Tuple[str, ...] = ()
    state_closed: Tuple[str, ...] = ()

    def _state_owner(self) -> str:
        scope = getattr(getattr(self, "subgraph", None), "name", "?")
        return f"{scope}/{getattr(self, 'index', '?')} ({getattr(self, 'name', '?')!r})"

    def future_state(self) -> List[Tuple[Any, str, Any]]:
        """``(key, name, [(time, item), ...])`` for the work held at future times (none
        here); see :func:`future_pieces`."""
        return []

    def restore_future(self, key: Any, name: str, entries: Any) -> bool:
        """Take back one key's future work of part ``name``; False: ``name`` is unknown."""
        return False

    def hold_future(self) -> None:
        """After a restore: hold capabilities at the least times of the restored future work."""

    def snapshot_state(self) -> OperatorState:
        """One piece per key of the ``state_keyed`` dictionaries (see :func:`keyed_snapshot`),
        with the key's future work (:meth:`future_state`)."""
        return keyed_snapshot(
            self._state_owner(),
            {name: getattr(self, name) for name in self.state_keyed},
            {name: getattr(self, name) for name in self.state_closed},
            self.future_state(),
        )

    def restore_state(self, state: OperatorState) -> None:
        """Put this worker's pieces back (see :func:`keyed_restore`), and hold capabilities
        for the future work among them."""
        keyed_restore(
            self._state_owner(),
            state,
            {name: getattr(self, name) for name in self.state_keyed},
            self.restore_future,
        )
        self.hold_future()
