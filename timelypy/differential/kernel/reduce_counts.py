"""Count, distinct and threshold of one time's summed changes, as C-level loops over columns.

At totally ordered times ``count`` and ``threshold`` keep one number per record (its count) and
turn a time's summed input changes into output changes by comparing ``f(old)`` with
``f(new)``. Given the changed records (decoded from consolidated columns, each once) and their
summed diffs as an ``int64`` array, the old counts are read from the state dictionary with
``map(state.get, records, ...)``, the new ones are added by numpy, and the output updates, the
state's new entries and its deletions are built with ``zip``, ``compress`` and ``repeat``: no
Python-level loop per record (except ``threshold``'s own function, called per changed record).

Both functions give the output updates as a multiset equal to the per-record loop's (retractions
first, then insertions, in the records' order), and leave the state as that loop does. They
return None, with the state untouched, when a count would leave ``int64`` (the caller takes the
per-record loop, where Python's integers do not overflow).

Example:

>>> import numpy as np
>>> pairs = {"a": ("a", 2)}
>>> sorted(count_changes(["a", "b"], np.array([-2, 1]), pairs, 7))
[(('a', 2), 7, -1), (('b', 1), 7, 1)]
>>> pairs
{'b': ('b', 1)}
"""

from __future__ import annotations

from collections import deque
from itertools import compress, repeat
from operator import itemgetter
from typing import Any, Callable, Dict, List, Optional

import numpy as np

__all__ = ["COUNT_LIMIT", "count_changes", "threshold_changes"]

COUNT_LIMIT = 1 << 62
"""Old counts and summed changes stay below this in magnitude (their sum fits ``int64``)."""

_ABSENT = (None, 0)
"""The pair of a record with no count (never stored)."""
_SECOND = itemgetter(1)


def _fits(counts: np.ndarray) -> bool:
    return not len(counts) or int(np.abs(counts).max()) < COUNT_LIMIT


def _old_counts(olds: List[Any], n: int) -> Optional[np.ndarray]:
    """The counts of ``olds`` (pairs, ``_ABSENT`` for none) as ``int64``, or None if one does
    not fit."""
    try:
        counts = np.fromiter(map(_SECOND, olds), np.int64, n)
    except (OverflowError, TypeError):
        return None
    return counts if _fits(counts) else None


def count_changes(
    records: List[Any], sums: np.ndarray, pairs: Dict[Any, Any], t: Any
) -> Optional[List[Any]]:
    """The output changes at ``t`` of ``count`` for the distinct ``records`` whose counts
    change by ``sums`` (non-zero), with ``pairs`` (``record -> (record, count)``, the state)
    updated; None (nothing changed) if a count would leave ``int64``."""
    n = len(records)
    olds = list(map(pairs.get, records, repeat(_ABSENT, n)))
    if not _fits(sums):
        return None
    if olds.count(_ABSENT) == n:  # all new (a load): each count is its sum, none retracted
        fresh = list(zip(records, sums.tolist()))
        pairs.update(zip(records, fresh))
        return list(zip(fresh, repeat(t), repeat(1)))
    old = _old_counts(olds, n)
    if old is None:
        return None
    new = old + sums
    had, has = old != 0, new != 0
    out: List[Any] = list(zip(compress(olds, had.tolist()), repeat(t), repeat(-1)))
    kept = has.tolist()
    fresh = list(zip(compress(records, kept), new[has].tolist()))
    out += zip(fresh, repeat(t), repeat(1))
    gone = (had & ~has).tolist()
    deque(map(pairs.__delitem__, compress(records, gone)), 0)
    pairs.update(zip(compress(records, kept), fresh))
    return out


def threshold_changes(
    records: List[Any],
    sums: np.ndarray,
    counts: Dict[Any, int],
    f: Optional[Callable[[Any, int], int]],
    t: Any,
) -> Optional[List[Any]]:
    """The output changes at ``t`` of ``threshold(f)`` (``f=None``: distinct, 1 for a positive
    count) for the distinct ``records`` whose counts change by ``sums`` (non-zero), with
    ``counts`` (the state, ``record -> count``) updated; None (nothing changed) if a count
    would leave ``int64``. ``f`` is called, as by the per-record loop, on the non-zero old and
    new count of each record."""
    n = len(records)
    try:
        old = np.fromiter(map(counts.get, records, repeat(0, n)), np.int64, n)
    except (OverflowError, TypeError):
        return None
    if not (_fits(old) and _fits(sums)):
        return None
    new = old + sums
    had, has = old != 0, new != 0
    kept = has.tolist()
    if f is None:
        diff = (new > 0).astype(np.int64) - (old > 0)
        moved = diff != 0
        out = list(zip(compress(records, moved.tolist()), repeat(t), diff[moved].tolist()))
    else:
        out = []
        for d, o, c in zip(records, old.tolist(), new.tolist()):
            fo = f(d, o) if o else 0
            fn = f(d, c) if c else 0
            if fo != fn:
                out.append((d, t, fn - fo))
    deque(map(counts.__delitem__, compress(records, (had & ~has).tolist())), 0)
    counts.update(zip(compress(records, kept), new[has].tolist()))
    return out
