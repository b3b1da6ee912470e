"""Seals and merges of column batches large enough to run range by range, with no setting
changed, on every backend.

The suite's ``auto`` runs cut seals and merges into ranges of a few updates (see
``support.columns``); here the engine's own sizes do it: each of two workers seals more than
``arrange_columns.ENCODE_CHUNK`` updates in several encoded chunks, and its spine merges more
than ``kernel.columns.MERGE_RANGE_ROWS``. The join's changes must equal the self-join's changes
computed from scratch, and every worker must have merged range by range.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Tuple

import pytest
from support.updates import net_changes

import timelypy as tp
from timelypy.differential import arrange_columns
from timelypy.differential.kernel import columns as column_kernel

KEYS = (3 * column_kernel.MERGE_RANGE_ROWS) // 2
"""Keys of two values each: ``2 * KEYS`` records, more than ``ENCODE_CHUNK`` per worker of two."""


def _ranges_counted() -> List[int]:
    """Count the merges that run range by range in this process (wrap ``_range_bounds`` once:
    inline workers are threads of one process)."""
    counted = getattr(column_kernel._range_bounds, "counted", None)
    if counted is None:
        original = column_kernel._range_bounds
        counted = [0]

        def counting(parts: Any, total: int) -> Any:
            bounds = original(parts, total)
            if bounds is not None:
                counted[0] += 1
            return bounds

        counting.counted = counted  # type: ignore[attr-defined]
        column_kernel._range_bounds = counting
    return counted


def _self_join_changes(backend: str) -> Tuple[Dict[Any, int], List[int]]:
    """``pairs.join(pairs)`` of ``(k, 2k)`` and ``(k, 2k + 1)``, then at time 1 every ``(k,
    2k)`` moved to ``(k, 2k + 2 * KEYS)``, on 2 workers of ``backend``: the inspected changes
    consolidated by ``(record, time)``, and the ranged merges of each worker's process."""

    def build(worker: Any) -> Tuple[List[Any], int]:
        counted = _ranges_counted()
        before = counted[0]
        seen: List[Any] = []

        def dataflow(scope: Any) -> Any:
            session, pairs = scope.new_collection()
            return session, pairs.join(pairs).inspect(seen.append).probe()

        session, probe = worker.dataflow(dataflow)
        for k in range(worker.index, KEYS, worker.peers):
            session.insert((k, 2 * k))
            session.insert((k, 2 * k + 1))
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1)
        for k in range(worker.index, KEYS, worker.peers):
            session.remove((k, 2 * k))
            session.insert((k, 2 * k + 2 * KEYS))
        session.close()
        worker.step_until_done()
        return seen, counted[0] - before

    results = tp.execute(build, workers=2, backend=backend)
    changes = net_changes(update for seen, _ in results for update in seen)
    return changes, [ranged for _, ranged in results]


def _reference() -> Dict[Any, int]:
    """The self-join's changes from scratch: its output at time 0, and at 1 minus it."""

    def joined(values: Dict[int, List[int]]) -> Counter:
        return Counter({(k, (a, b)): 1 for k, vs in values.items() for a in vs for b in vs})

    before = joined({k: [2 * k, 2 * k + 1] for k in range(KEYS)})
    after = joined({k: [2 * k + 2 * KEYS, 2 * k + 1] for k in range(KEYS)})
    changes = {(r, 0): c for r, c in before.items()}
    for r in set(before) | set(after):
        if after[r] != before[r]:
            changes[(r, 1)] = after[r] - before[r]
    return changes


def _check(backend: str) -> None:
    assert KEYS > arrange_columns.ENCODE_CHUNK  # every worker seals several chunks
    changes, ranged = _self_join_changes(backend)
    assert changes == _reference()
    assert all(r > 0 for r in ranged), ranged  # every worker's process merged range by range


@pytest.mark.parametrize("backend", ["inline", "processes"])
def test_large_seals_and_merges_match_the_reference(backend: str, monkeypatch: Any) -> None:
    monkeypatch.setattr(column_kernel, "_range_bounds", column_kernel._range_bounds)  # restored
    _check(backend)


@pytest.mark.ray
def test_large_seals_and_merges_match_the_reference_on_ray(ray_session: Any) -> None:
    _check("ray")
