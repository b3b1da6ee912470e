"""The merge kernel: a newer batch's updates merged into a spine's merged batch, and compaction.

The spine keeps its merged batches as plain dictionaries ``key -> [(val, time, diff), ...]``
that it alone changes (see :class:`~timelypy.differential.trace.builder.BatchBuilder`); these
kernels change them in place.

Contract. :func:`merge_consolidating` and :func:`merge_product` merge ``newer`` (an iterable of
``(key, [(val, time, diff), ...])``, never changed) into ``data`` (changed in place; lists of
``newer`` are copied, never aliased) and return the new number of updates of ``data`` given its
old ``count``; ``since`` is the compaction frontier (a list of times of ``order``, a
:class:`~timelypy.order.TimeOrder`). :func:`compact_total` and :func:`compact_keys` advance the
times of ``data`` (every key, or the given keys) to ``since`` and consolidate them in place.
Invariants: accumulated at every time at or beyond ``since``, each key's updates are unchanged
(the merge adds those of ``newer``); no key is left without updates; the keys of ``newer``
present in ``data`` hold no zero diff and, at totally ordered times, no two updates of one
``(val, advanced time)``. :func:`merge_product` (``Product(int, int)`` times, ``since`` not
empty) keeps ``several``, when not None, the set of keys of ``data`` with other than one update.
Cost: O(updates of ``newer`` plus the updates of ``data`` at its keys) for a merge; O(updates
visited) for a compaction.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .consolidation import advance_and_consolidate

__all__ = ["compact_keys", "compact_total", "merge_consolidating", "merge_product"]

Vals = List[Tuple[Any, Any, int]]
Data = Dict[Any, Vals]


def merge_consolidating(
    data: Data, newer: Iterable[Tuple[Any, Vals]], count: int, since: Sequence[Any], order: Any
) -> int:
    """Merge ``newer`` into ``data``, advancing the times of the keys present in both to
    ``since`` and consolidating them; returns the new count."""
    single = since[0] if order.is_total and len(since) == 1 else None
    for key, vals in newer:
        existing = data.get(key)
        if existing is None:
            data[key] = list(vals)
            count += len(vals)
            continue
        if single is not None and len(existing) == 1 and len(vals) == 1:
            # The commonest case under churn, inline: one update on each side.
            v1, t1, r1 = existing[0]
            v2, t2, r2 = vals[0]
            if t1 < single:
                t1 = single
            if t2 < single:
                t2 = single
            if v1 == v2 and t1 == t2:
                r = r1 + r2
                if r:
                    data[key] = [(v1, t1, r)]
                else:
                    del data[key]
                    count -= 1
            else:
                data[key] = [(v1, t1, r1), (v2, t2, r2)]
                count += 1
            continue
        new = advance_and_consolidate(existing + vals, since, order)
        count += len(new) - len(existing)
        if new:
            data[key] = new
        else:
            del data[key]
    return count


def merge_product(
    data: Data,
    newer: Iterable[Tuple[Any, Vals]],
    count: int,
    since: Sequence[Any],
    order: Any,
    several: Optional[Set[Any]] = None,
) -> int:
    """:func:`merge_consolidating` at ``Product(int, int)`` times (``since`` not empty).
    Advancing to the antichain is the join with its meet ``(m0, m1)`` (a product of total
    orders is a distributive lattice)."""
    m0, m1 = since[0]
    for f0, f1 in since:
        if f0 < m0:
            m0 = f0
        if f1 < m1:
            m1 = f1
    for key, vals in newer:
        existing = data.get(key)
        if existing is None:
            data[key] = list(vals)
            count += len(vals)
            if several is not None and len(vals) != 1:
                several.add(key)
            continue
        if len(vals) == 1:
            # One new update (the commonest case): summed into the update of its value and
            # advanced time, if there is one, else appended as it is (an unadvanced time
            # compares with every time at or beyond since as its advanced time does). The
            # others are not advanced again here: consolidating them with each other is left
            # to the compaction pass (amortised), which visits the keys with several updates.
            count += _merge_one(existing, vals[0], m0, m1)
            if not existing:
                del data[key]
                if several is not None:
                    several.discard(key)
            elif several is not None:
                if len(existing) != 1:
                    several.add(key)
                else:
                    several.discard(key)
            continue
        new = advance_and_consolidate(existing + vals, since, order)
        count += len(new) - len(existing)
        if new:
            data[key] = new
            if several is not None:
                if len(new) != 1:
                    several.add(key)
                else:
                    several.discard(key)
        else:
            del data[key]
            if several is not None:
                several.discard(key)
    return count


def _merge_one(existing: Vals, upd: Tuple[Any, Any, int], m0: int, m1: int) -> int:
    """Merge the update ``upd`` into the updates of its key at ``Product(int, int)`` times, in
    place: summed into the update of its value whose time advanced to the meet ``(m0, m1)``
    equals its own advanced time, else appended. Returns the change in count."""
    v2, t2, r2 = upd
    a2, b2 = t2
    if a2 < m0:
        a2 = m0
    if b2 < m1:
        b2 = m1
    for idx in range(len(existing)):
        v1, t1, r1 = existing[idx]
        if v1 != v2:
            continue
        a1, b1 = t1
        if a1 < m0:
            a1 = m0
        if b1 < m1:
            b1 = m1
        if a1 == a2 and b1 == b2:
            r = r1 + r2
            if r:
                if t1[0] != a1 or t1[1] != b1:
                    t1 = tuple.__new__(type(t1), (a1, b1))
                existing[idx] = (v1, t1, r)
                return 0
            del existing[idx]
            return -1
    existing.append(upd)
    return 1


def compact_total(data: Data, since: Sequence[Any], order: Any) -> int:
    """Totally ordered times: advance every time of ``data`` to ``since`` and consolidate each
    key, in place; returns the number of updates left."""
    single = since[0] if len(since) == 1 else None
    count = 0
    for key in list(data):
        vals = data[key]
        if single is not None and len(vals) == 1:
            v, t, r = vals[0]
            if t < single:
                vals[0] = (v, single, r)
            count += 1
            continue
        new = advance_and_consolidate(vals, since, order)
        if new:
            data[key] = new
            count += len(new)
        else:
            del data[key]
    return count


def compact_keys(
    data: Data, keys: Iterable[Any], since: Sequence[Any], order: Any
) -> Tuple[int, Set[Any]]:
    """Advance the updates of ``keys`` (present in ``data``) to ``since`` and consolidate them,
    in place. Returns the number of updates those keys keep and the set of those with other
    than one update."""
    count = 0
    still = set()
    for key in keys:
        new = advance_and_consolidate(data[key], since, order)
        if new:
            data[key] = new
            count += len(new)
            if len(new) != 1:
                still.add(key)
        else:
            del data[key]
    return count, still


from timelypy.kernels import adopt  # noqa: E402  (last: a drop-in replaces the names above)

adopt(__name__, globals())
