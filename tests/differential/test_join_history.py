"""A join reads a key's history across the other trace's batches advanced to the batch's times.

A record inserted before a batch and retracted later lives in two batches of the trace until
geometric merging or compaction joins them; the join advances such a key's updates to the lower
bound of the batch it joins and consolidates them first (as differential-dataflow's join advances
the history it reads), so the pair cancels before any output is made. In a closed loop over the
skip-level program (each change waited for) the output at every time is then exactly the change
of the join from scratch: no update too many, on both paths and with peers.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Tuple

import pytest
from support.columns import columns_mode

import timelypy as tp

PEOPLE = 600
"""People loaded (each ``p`` managed by ``p // 2``): enough for a column batch in ``auto``."""

CHANGES = 240
"""Changes at times ``1 .. CHANGES``: person ``p`` moves from manager ``p // 2`` to ``p // 3``."""


def _skip_level(manages: Counter) -> Counter:
    """``manages.map(swap).join(manages)`` from scratch: ``(k, (manager of k, report of k))``."""
    by_manager: Dict[int, List[int]] = {}
    for (m, p), c in manages.items():
        by_manager.setdefault(m, []).extend([p] * c)
    out: Counter = Counter()
    for (m, p), c in manages.items():
        for report in by_manager.get(p, ()):
            out[(p, (m, report))] += c
    return out


def _expected() -> List[Counter]:
    """The join's change at each time ``1 .. CHANGES`` (zeros dropped)."""
    manages = Counter((p // 2, p) for p in range(1, PEOPLE))
    before = _skip_level(manages)
    changes = []
    for p in range(1, CHANGES + 1):
        manages[(p // 2, p)] -= 1
        manages[(p // 3, p)] += 1
        manages = +manages
        after = _skip_level(manages)
        diff = Counter(after)
        diff.subtract(before)
        changes.append(Counter({r: c for r, c in diff.items() if c}))
        before = after
    return changes


def _run(workers: int, mode: str) -> List[List[Tuple[Any, int, int]]]:
    def build(worker: Any) -> List[Tuple[Any, int, int]]:
        def dataflow(scope: Any) -> Any:
            session, manages = scope.new_collection()
            joined = manages.map(lambda mp: (mp[1], mp[0])).join(manages)
            return session, joined.capture(), joined.probe()

        session, out, probe = worker.dataflow(dataflow)
        for p in range(worker.index + 1, PEOPLE, worker.peers):
            session.insert((p // 2, p))
        session.advance_to(1)
        worker.step_until(probe, 1, timeout=60)
        for p in range(1, CHANGES + 1):
            if p % worker.peers == worker.index:
                session.remove((p // 2, p))
                session.insert((p // 3, p))
            session.advance_to(p + 1)
            worker.step_until(probe, p + 1, timeout=60)
        session.close()
        worker.step_until_done(timeout=60)
        return [u for u in out.updates() if u[1] >= 1]

    with columns_mode(mode):
        return tp.execute(build, workers=workers, backend="inline")


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("mode", ["auto", "off"])
def test_closed_loop_outputs_are_the_changes_from_scratch(workers: int, mode: str) -> None:
    expected = _expected()
    updates = [u for per_worker in _run(workers, mode) for u in per_worker]
    by_time: Dict[int, List[Tuple[Any, int]]] = {}
    for record, time, diff in updates:
        by_time.setdefault(time, []).append((record, diff))
    for t, want in enumerate(expected, start=1):
        got = by_time.get(t, [])
        summed: Counter = Counter()
        for record, diff in got:
            summed[record] += diff
        assert +summed == +want and -summed == -want, f"time {t}"
        # no update beyond the change: nothing emitted that another update cancels
        assert len(got) == len(want), f"time {t}: {sorted(got)} for {dict(want)}"
