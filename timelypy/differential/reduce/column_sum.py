"""Sum at totally ordered times, read from column batches with numpy.

Reduce with :func:`~.logic.sum_logic` gives each key the total ``value * count`` of its values
once the key has a value with a non-zero count. At totally ordered times the key's output
changes only at the times of its input changes, and only through two numbers: its total and its
*support* (the number of values with a non-zero count). For a
:class:`~timelypy.differential.trace.column_batch.ColumnBatch` of ``int`` values (sorted by
``(key, val, time)``, consolidated) both are computed for every ``(key, time)`` of the batch at
once:

* per ``(key, val)``, the running count after each update is the key's prior count of the value
  plus a cumulative sum of the diffs (``numpy.cumsum``); an update changes the support where the
  running count turns zero or non-zero;
* per ``(key, time)`` (the updates re-sorted by key, then time), ``numpy.add.reduceat`` sums
  ``value * diff`` and the support changes, and a cumulative sum per key gives the total and
  the support after each time;
* the output changes where the presence (support > 0) or the total changed: the old
  ``(key, total)`` retracted, the new one inserted, as the object path's evaluation of
  :func:`~.logic.sum_logic` at that time would.

Only the keys the batch touches cost Python work, once each (their prior state is read from,
and their new consolidated state written to, the operator's histories, which the object path
reads as it always did). The arithmetic stays in ``int64``: the batch is taken only when
``|value| * sum(|diff|)`` plus the prior totals cannot reach ``2**62`` (else None: the caller
takes the object path, where Python's integers do not overflow).

Example:

>>> from timelypy.differential.trace.column_batch import ColumnBatch
>>> batch = ColumnBatch.from_updates([((1, 5), 0, 1), ((1, 7), 0, 1), ((2, 3), 0, 2)], [0], [1])
>>> in_hist, out_hist = {}, {}
>>> sorted(sum_column_batch(batch, in_hist, out_hist, {}, {}))
[((1, 12), 0, 1), ((2, 6), 0, 1)]
>>> in_hist[1], out_hist[2]
([(5, 0, 1), (7, 0, 1)], [(6, 0, 1)])
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..kernel.columns import key_starts
from ..trace.column_batch import ColumnBatch

__all__ = ["SUM_LIMIT", "sum_column_batch", "sum_columns_fit"]

SUM_LIMIT = 1 << 62
"""Totals, products and running counts stay below this in magnitude on the column path."""
_VALUE_LIMIT = 1 << 31

History = List[Tuple[Any, Any, int]]


def sum_columns_fit(batch: Any, min_count: int) -> bool:
    """``batch`` is a column batch of at least ``min_count`` updates whose values are ``int``
    below ``2**31`` in magnitude, with ``int64`` sums of ``value * diff`` that cannot overflow.

    Example: a batch of 3 updates with ``min_count=4`` does not fit (smaller batches are
    cheaper on the object path)."""
    if type(batch) is not ColumnBatch or batch.count < max(min_count, 1):
        return False
    if batch.val_layout.shape != "i":
        return False
    vals = batch.val_cols[0]
    top = max(-int(vals.min()), int(vals.max()))
    if top >= _VALUE_LIMIT:
        return False
    return top * int(np.abs(batch.diffs).sum()) < SUM_LIMIT


def _prior(keys: List[Any], in_hist: Dict[Any, History]) -> Optional[Dict[int, Dict[Any, int]]]:
    """``{index: {val: count}}`` of the batch's keys with a history (their accumulated input,
    zeros dropped), or None if one holds a value that is not an ``int`` or a total out of
    range."""
    accs: Dict[int, Dict[Any, int]] = {}
    for i in np.flatnonzero(np.fromiter(map(in_hist.__contains__, keys), bool, len(keys))):
        acc: Dict[Any, int] = {}
        for v, _, r in in_hist[keys[i]]:
            acc[v] = acc.get(v, 0) + r
        acc = {v: c for v, c in acc.items() if c}
        if any(type(v) is not int or abs(c) >= SUM_LIMIT for v, c in acc.items()):
            return None
        if abs(sum(v * c for v, c in acc.items())) >= SUM_LIMIT:
            return None
        accs[int(i)] = acc
    return accs


def _groups(starts: np.ndarray, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """The group of every row, and the last row of each group."""
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:] - 1
    ends[-1] = n - 1
    return np.repeat(np.arange(len(starts)), ends - starts + 1), ends


def sum_column_batch(
    batch: ColumnBatch,
    in_hist: Dict[Any, History],
    out_hist: Dict[Any, History],
    in_sizes: Dict[Any, int],
    out_sizes: Dict[Any, int],
) -> Optional[List[Any]]:
    """The output changes ``((key, total), time, ±1)`` of reduce with ``sum_logic`` for the
    batch (a :func:`sum_columns_fit` batch whose times the input frontier has passed, every
    earlier time evaluated), with the histories of its keys replaced by their consolidated
    state (a key's input at the batch's last time, its output there); None, with nothing
    changed, when a key's prior state does not fit (see the module)."""
    n = batch.count
    starts = batch.starts()
    keys = batch.decode_keys(starts)
    accs = _prior(keys, in_hist)
    if accs is None:
        return None
    vals, times, diffs = batch.val_cols[0], batch.times, batch.diffs
    key_id, _ = _groups(starts, n)
    kv_starts = key_starts(batch.key_cols + batch.val_cols, n)
    kv_id, kv_ends = _groups(kv_starts, n)
    total0 = np.zeros(len(keys), np.int64)
    support0 = np.zeros(len(keys), np.int64)
    prior_kv = np.zeros(len(kv_starts), np.int64)
    first_kv = np.searchsorted(kv_starts, starts).tolist() + [len(kv_starts)]
    kv_vals = vals[kv_starts].tolist() if accs else []
    for i, acc in accs.items():
        total0[i] = sum(v * c for v, c in acc.items())
        support0[i] = len(acc)
        for g in range(first_kv[i], first_kv[i + 1]):
            prior_kv[g] = acc.get(kv_vals[g], 0)
    csum = np.cumsum(diffs)
    base = csum[kv_starts] - diffs[kv_starts]
    after = prior_kv[kv_id] + csum - base[kv_id]
    d_support = (after != 0).astype(np.int64) - (after != diffs)
    gk, gt, total, before_total, support, before_supp = _per_time(
        key_id, times, vals * diffs, d_support, total0, support0
    )
    now, was = support > 0, before_supp > 0
    same = total == before_total
    retract = was & ~(now & same)
    insert = now & ~(was & same)
    out = _changes(keys, gk[retract], before_total[retract], gt[retract], -1)
    out += _changes(keys, gk[insert], total[insert], gt[insert], 1)
    last = int(times.max())
    final = after[kv_ends]
    _write_inputs(batch, keys, key_id, kv_ends, final, last, in_hist, in_sizes)
    for i, acc in accs.items():  # the prior counts of the values the batch did not change
        merged = dict(acc)
        merged.update(
            zip(
                kv_vals[first_kv[i] : first_kv[i + 1]],
                final[first_kv[i] : first_kv[i + 1]].tolist(),
            )
        )
        _put(in_hist, in_sizes, keys[i], [(v, last, c) for v, c in merged.items() if c])
    # A key's output after the batch: its total after its last time, if it has support.
    key_last = np.append(np.flatnonzero(gk[1:] != gk[:-1]), len(gk) - 1)
    for key in keys:
        out_hist.pop(key, None)
        out_sizes.pop(key, None)
    totals = total[key_last].tolist()
    for i in np.flatnonzero(support[key_last] > 0).tolist():
        out_hist[keys[i]] = [(totals[i], last, 1)]
    return out


def _per_time(
    key_id: np.ndarray,
    times: np.ndarray,
    d_total: np.ndarray,
    d_support: np.ndarray,
    total0: np.ndarray,
    support0: np.ndarray,
) -> Tuple[np.ndarray, ...]:
    """Per ``(key, time)`` of the rows (in key, then time order): the key, the time, the
    key's total after and before that time, and its support after and before."""
    n = len(times)
    order = np.lexsort((times, key_id))
    k_o, t_o = key_id[order], times[order]
    change = np.empty(n, dtype=bool)
    change[0] = True
    change[1:] = (k_o[1:] != k_o[:-1]) | (t_o[1:] != t_o[:-1])
    g_starts = np.flatnonzero(change)
    dt = np.add.reduceat(d_total[order], g_starts)
    ds = np.add.reduceat(d_support[order], g_starts)
    gk, gt = k_o[g_starts], t_o[g_starts]
    key_first = np.searchsorted(gk, np.arange(len(total0)))
    group_key, _ = _groups(key_first, len(g_starts))
    c_total, c_supp = np.cumsum(dt), np.cumsum(ds)
    total = total0[gk] + c_total - (c_total - dt)[key_first][group_key]
    support = support0[gk] + c_supp - (c_supp - ds)[key_first][group_key]
    return gk, gt, total, total - dt, support, support - ds


def _changes(
    keys: List[Any], rows: np.ndarray, totals: np.ndarray, times: np.ndarray, diff: int
) -> List[Any]:
    """``((keys[row], total), time, diff)`` for each row."""
    ks = list(map(keys.__getitem__, rows.tolist()))
    return list(zip(zip(ks, totals.tolist()), times.tolist(), repeat(diff)))


def _write_inputs(
    batch: ColumnBatch,
    keys: List[Any],
    key_id: np.ndarray,
    kv_ends: np.ndarray,
    final: np.ndarray,
    last: int,
    in_hist: Dict[Any, History],
    in_sizes: Dict[Any, int],
) -> None:
    """Each key's input history as the final counts of the batch's values, at ``last``."""
    nonzero = final != 0
    keep = kv_ends[nonzero]
    entries = list(zip(batch.val_cols[0][keep].tolist(), repeat(last), final[nonzero].tolist()))
    bounds = np.searchsorted(key_id[keep], np.arange(len(keys) + 1)).tolist()
    for i, key in enumerate(keys):
        _put(in_hist, in_sizes, key, entries[bounds[i] : bounds[i + 1]])


def _put(hists: Dict[Any, History], sizes: Dict[Any, int], key: Any, hist: History) -> None:
    """``hists[key] = hist`` (with its size), or no entry when ``hist`` is empty."""
    if hist:
        hists[key] = hist
        sizes[key] = len(hist)
    else:
        hists.pop(key, None)
        sizes.pop(key, None)
