"""The hot loops of progress tracking: count tables and the frontiers kept over them.

**The count-table contract.** A *count table* is a ``dict`` from an item (a timestamp, in
progress tracking) to a non-zero ``int``. It is the live state behind
:attr:`ChangeBatch.counts <timelypy.progress.change_batch.ChangeBatch.counts>` and
:attr:`MutableAntichain.table <timelypy.progress.frontier.MutableAntichain.table>`. A writer
may, in place:

1. call a kernel of this module on it (:func:`update`, :func:`update_many`, ...), or
2. write the update out itself (a hot loop that saves the call), in the full form
   ``c = table.get(item, 0) + delta; if c: table[item] = c; else: del table[item]``, or
3. in the short form ``table[item] = table.get(item, 0) + delta`` when ``delta > 0`` and the
   table holds no negative count (tables of consumed or produced message counts), since a
   positive sum of non-negative terms is never zero.

After every write, **no count in the table is zero**: a reader may test ``if table:`` for "some
change is pending" and ``len(table)`` for the number of items with a change. Sites that write
the update out say so by citing "the count-table contract" of this module.

**Frontiers.** The frontier of a count table is the list of the minimal items with a positive
count: under a partial order ``le``, :func:`minimal_positive`; under a total order, at most one
item, :func:`least_positive`. Counts may be transiently negative (a consumed count from a peer
can arrive before the produced count it cancels); only positive counts make the frontier.
Frontier lists are replaced, never changed in place, so a reader holding one sees a snapshot.

Every kernel is pure Python and listed in ``__all__``; another implementation drops in behind
the same names (``timelypy.kernels``), and ``tests/test_progress_kernel.py`` checks each against
the plain twin in ``tests/oracle/kernels/progress/kernel.py``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Sequence, Tuple

__all__ = [
    "frontier_changes",
    "least_positive",
    "minimal_positive",
    "move",
    "update",
    "update_many",
    "update_partial",
    "update_total",
]

CountTable = Dict[Any, int]


def update(table: CountTable, item: Any, delta: int) -> None:
    """Add ``delta`` to the count of ``item`` (a zero ``delta`` is ignored). O(1)."""
    if delta:
        c = table.get(item, 0) + delta
        if c:
            table[item] = c
        else:
            del table[item]


def update_many(table: CountTable, pairs: Iterable[Tuple[Any, int]]) -> int:
    """Add every ``(item, delta)`` of ``pairs``; return the sum of the deltas. O(len(pairs))."""
    moved = 0
    for item, delta in pairs:
        if delta:
            moved += delta
            c = table.get(item, 0) + delta
            if c:
                table[item] = c
            else:
                del table[item]
    return moved


def update_total(table: CountTable, pairs: Iterable[Tuple[Any, int]], old: Any) -> Tuple[int, bool]:
    """Add every ``(time, delta)`` of ``pairs`` to the table of a totally ordered frontier whose
    element is ``old`` (``None``: empty). Return the sum of the deltas and whether the frontier
    may have moved (``old`` is ``None`` and some delta is non-zero, or some non-zero delta is
    at a time ``<= old``); when False, :func:`least_positive` would still give ``old``.
    O(len(pairs))."""
    moved = 0
    lowered = False
    for t, d in pairs:
        if d:
            moved += d
            c = table.get(t, 0) + d
            if c:
                table[t] = c
            else:
                del table[t]
            if old is None or t <= old:
                lowered = True
    return moved, lowered


def update_partial(
    table: CountTable,
    frontier: Sequence[Any],
    pairs: Iterable[Tuple[Any, int]],
    le: Callable[[Any, Any], bool],
) -> bool:
    """Add every ``(time, delta)`` of ``pairs`` to the table whose frontier (under the partial
    order ``le``) is ``frontier``; return whether the frontier may have moved (a positive delta
    at a time no frontier element is ``le``, or a negative delta at a frontier element); when
    False, :func:`minimal_positive` would still give ``frontier``. O(len(pairs) *
    len(frontier)) at most."""
    may_move = False
    for t, d in pairs:
        if not d:
            continue
        c = table.get(t, 0) + d
        if c:
            table[t] = c
        else:
            del table[t]
        if may_move:
            continue
        if d > 0:
            # Positive at or beyond a frontier element cannot change the frontier.
            for f in frontier:
                if le(f, t):
                    break
            else:
                may_move = True
        elif t in frontier:  # negative only matters at a frontier element
            may_move = True
    return may_move


def least_positive(table: CountTable) -> Any:
    """The least item with a positive count (``None`` if none): the frontier of a totally
    ordered table. O(len(table))."""
    if not table:
        return None
    new = min(table)
    if table[new] <= 0:  # transiently negative counts: scan the positive ones
        new = min((t for t, c in table.items() if c > 0), default=None)
    return new


def minimal_positive(table: CountTable, le: Callable[[Any, Any], bool]) -> List[Any]:
    """The minimal items with a positive count under ``le``, in sorted order (Python's order on
    the items must extend ``le``, as it does for timestamps). O(n log n + n * len(result))."""
    positive = [t for t, c in table.items() if c > 0]
    if len(positive) <= 1:
        return positive
    positive.sort()  # one pass in sorted order suffices: the sort order extends le
    new: List[Any] = []
    for t in positive:
        for f in new:
            if le(f, t):
                break
        else:
            new.append(t)
    return new


def frontier_changes(old: Sequence[Any], new: Sequence[Any]) -> List[Tuple[Any, int]]:
    """The changes from frontier ``old`` to frontier ``new``: ``(t, -1)`` for each element that
    left (in ``old``'s order), then ``(t, +1)`` for each that came (in ``new``'s order).
    O(len(old) + len(new))."""
    if len(old) <= 1 and len(new) <= 1:
        if old and new and old[0] == new[0]:
            return []
        changes = [(old[0], -1)] if old else []
        if new:
            changes.append((new[0], 1))
        return changes
    old_set, new_set = set(old), set(new)
    changes = [(t, -1) for t in old if t not in new_set]
    changes.extend((t, 1) for t in new if t not in old_set)
    return changes


def move(table: CountTable, old: Any, new: Any) -> None:
    """Move one count from ``old`` to ``new`` (``None`` on either side: nothing there): what a
    totally ordered frontier moving from ``old`` to ``new`` does to a table it reaches by the
    identity summary. O(1)."""
    if old is not None:
        c = table.get(old, 0) - 1
        if c:
            table[old] = c
        else:
            del table[old]
    if new is not None:
        c = table.get(new, 0) + 1
        if c:
            table[new] = c
        else:
            del table[new]


from timelypy.kernels import adopt  # noqa: E402  (the kernels above are defined first)

adopt(__name__, globals())
