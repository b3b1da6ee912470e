"""The grouping kernel: the arrange batcher's pending updates grouped by key, then consolidated.

Contract. Inputs: ``pending``, a list of ``((key, val), time, diff)`` (never changed), and which
times to take: those ``< bound`` (totally ordered times; every one when ``bound`` is None) for
:func:`group_before`, those for which ``beyond(time)`` is false for :func:`group_not_beyond`
(``beyond`` is called at most once per distinct time). Outputs: ``(data, keep)``: ``data`` maps
each key to its ``[(val, time, diff), ...]`` in arrival order, ``keep`` is the list of the
updates not taken, in arrival order. :func:`consolidate_groups` then consolidates ``data`` in
place (:func:`~.consolidation.consolidate` per key with several updates, keys left empty are
removed) and returns the number of updates left. Invariants: ``data`` and ``keep`` together
hold every pending update exactly once; after :func:`consolidate_groups` no key holds two
updates of one ``(val, time)`` nor a zero diff. Cost: O(len(pending)) dictionary operations.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from .consolidation import consolidate

COMPILED = False
"""True in the copy :func:`timelypy.kernels.compile_kernels` compiles (see its ``if COMPILED:``)."""

__all__ = ["consolidate_groups", "group_before", "group_not_beyond"]

Update = Tuple[Tuple[Any, Any], Any, int]
"""``((key, val), time, diff)``."""
Groups = Dict[Any, List[Tuple[Any, Any, int]]]
"""``key -> [(val, time, diff), ...]``."""


if COMPILED:  # (no bound methods: mypyc makes dict.get native)

    def group_before(pending: List[Update], bound: Optional[Any]) -> Tuple[Groups, List[Update]]:
        """Totally ordered times: group the updates at times ``< bound`` (all when None)."""
        data: Groups = {}
        keep = []
        for upd in pending:
            kv, t, r = upd
            if bound is None or t < bound:
                key, val = kv
                lst = data.get(key)
                if lst is None:
                    data[key] = [(val, t, r)]
                else:
                    lst.append((val, t, r))
            else:
                keep.append(upd)
        return data, keep

    def group_not_beyond(
        pending: List[Update], beyond: Callable[[Any], bool]
    ) -> Tuple[Groups, List[Update]]:
        """Partially ordered times: group the updates at times not at or beyond the frontier
        (``beyond(t)`` says whether ``t`` is)."""
        data: Groups = {}
        keep = []
        seen: Dict[Any, bool] = {}
        for upd in pending:
            kv, t, r = upd
            b = seen.get(t)
            if b is None:
                seen[t] = b = beyond(t)
            if not b:
                key, val = kv
                lst = data.get(key)
                if lst is None:
                    data[key] = [(val, t, r)]
                else:
                    lst.append((val, t, r))
            else:
                keep.append(upd)
        return data, keep

else:

    def group_before(pending: List[Update], bound: Optional[Any]) -> Tuple[Groups, List[Update]]:
        """Totally ordered times: group the updates at times ``< bound`` (all when None)."""
        data: Groups = {}
        keep = []
        get = data.get
        for upd in pending:
            kv, t, r = upd
            if bound is None or t < bound:
                lst = get(kv[0])
                if lst is None:
                    data[kv[0]] = [(kv[1], t, r)]
                else:
                    lst.append((kv[1], t, r))
            else:
                keep.append(upd)
        return data, keep

    def group_not_beyond(
        pending: List[Update], beyond: Callable[[Any], bool]
    ) -> Tuple[Groups, List[Update]]:
        """Partially ordered times: group the updates at times not at or beyond the frontier
        (``beyond(t)`` says whether ``t`` is)."""
        data: Groups = {}
        keep = []
        get = data.get
        seen: Dict[Any, bool] = {}  # per distinct time: far fewer than updates
        for upd in pending:
            kv, t, r = upd
            b = seen.get(t)
            if b is None:
                seen[t] = b = beyond(t)
            if not b:
                lst = get(kv[0])
                if lst is None:
                    data[kv[0]] = [(kv[1], t, r)]
                else:
                    lst.append((kv[1], t, r))
            else:
                keep.append(upd)
        return data, keep


def consolidate_groups(data: Groups) -> int:
    """Consolidate (in place) the keys with several updates; drop keys that cancel out.
    Returns the number of updates left."""
    count = 0
    empty = []
    for k, lst in data.items():
        n = len(lst)
        if n == 1:
            count += 1
            continue
        if n == 2:  # the commonest case under churn: a retraction and an insertion
            (v1, t1, r1), (v2, t2, r2) = lst
            if (v1 != v2 or t1 != t2) and r1 and r2:
                count += 2
                continue
        lst = consolidate(lst)
        if lst:
            data[k] = lst
            count += len(lst)
        else:
            empty.append(k)
    for k in empty:
        del data[k]
    return count


from timelypy.kernels import adopt  # noqa: E402  (last: a drop-in replaces the names above)

adopt(__name__, globals())
