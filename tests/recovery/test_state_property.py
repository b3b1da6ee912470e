"""The backbone of recovery: snapshot every worker at a random closed time, restore onto the
same or another number of inline workers, continue, and compare with the from-scratch oracle.

Random programs (every differential operator, iterative ones included) and random update
streams; the run stops at a closed time ``F``, every worker's state is taken
(:func:`~timelypy.recovery.snapshot.snapshot_worker`), the program is built anew on 1, 2 or 3
workers, restored (:func:`~timelypy.recovery.snapshot.restore_worker`) and fed the updates at
times at or after ``F``. At every later time the accumulated output equals the program
evaluated from scratch on the accumulated input, and equals the uninterrupted run.

Longer run::

    TIMELYPY_EXAMPLES=2000 python -m pytest tests/recovery/test_state_property.py
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import reference as ref
from support import strategies as strat

from timelypy.dataflow.state import OperatorState
from timelypy.recovery.snapshot import closed_at, restore_worker, snapshot_worker
from timelypy.workers.launch.inline import local_workers

EXAMPLES = int(os.environ.get("TIMELYPY_EXAMPLES", "200"))

Update = Tuple[Any, Any, int]


class Run:
    """A program on ``peers`` inline workers stepped by this driver, fed by time."""

    def __init__(self, program: Any, n_inputs: int, peers: int) -> None:
        self.workers = local_workers(peers)
        self.built: List[Tuple[List[Any], Any]] = []
        for worker in self.workers:

            def dataflow(scope: Any) -> Tuple[List[Any], Any]:
                sessions, collections = [], []
                for i in range(n_inputs):
                    s, c = scope.new_collection(name=f"in{i}")
                    sessions.append(s)
                    collections.append(c)
                return sessions, ref.build(program, scope, collections).capture()

            self.built.append(worker.dataflow(dataflow))

    def feed(self, updates: Dict[int, List[Update]], t: int) -> None:
        """Send the updates at time ``t`` (spread over the workers), advance to ``t + 1`` and
        run until ``t + 1`` is closed on every worker."""
        peers = len(self.workers)
        for i, ups in updates.items():
            for k, (rec, _, diff) in enumerate(u for u in ups if u[1] == t):
                self.built[k % peers][0][i].update(rec, diff)
        for sessions, _ in self.built:
            for s in sessions:
                s.advance_to(t + 1)
                s.flush()
        self.settle(t + 1)

    def settle(self, t: int) -> None:
        for _ in range(100_000):
            for w in self.workers:
                w.step()
            if all(closed_at(w, t) for w in self.workers):
                return
        raise AssertionError(f"time {t} did not close")

    def at(self, t: int) -> Dict[Any, int]:
        out: Dict[Any, int] = {}
        for _, captured in self.built:
            for rec, n in captured.at(t).items():
                out[rec] = out.get(rec, 0) + n
        return {r: n for r, n in out.items() if n}

    def snapshot(self) -> List[Dict[str, OperatorState]]:
        return [snapshot_worker(w) for w in self.workers]

    def restore(self, snapshots: Sequence[Dict[str, OperatorState]], t: int) -> None:
        for w in self.workers:
            restore_worker(w, snapshots, t)
        self.settle(t)


def check_restore(
    program: Any, script: List[tuple], n_inputs: int, before: int, after: int, cut: int
) -> Optional[str]:
    """Run to a closed time, restore onto ``after`` workers, continue; None when every later
    time is exact (and equal to the uninterrupted run), else what differs."""
    updates = ref.script_updates(script, n_inputs)
    last = max([u[1] for ups in updates.values() for u in ups], default=0) + 1
    closed = min(cut, last)  # F: the closed time of the checkpoint
    whole = Run(program, n_inputs, before)
    first = Run(program, n_inputs, before)
    for t in range(last + 1):
        whole.feed(updates, t)
    for t in range(closed):
        first.feed(updates, t)
    if closed == 0:
        first.settle(0)
    snaps = first.snapshot()
    second = Run(program, n_inputs, after)
    second.restore(snaps, closed)
    for t in range(closed, last + 1):
        second.feed(updates, t)
    for t in range(closed, last + 2):
        expected = ref.evaluate_at(program, updates, t)
        got = second.at(t)
        if got != expected:
            return f"at time {t} (restored at {closed}): expected {expected}, got {got}"
        if whole.at(t) != got:
            return f"at time {t}: the uninterrupted run has {whole.at(t)}, restored {got}"
    return None


@st.composite
def program_and_script(draw: Any, programs: Optional[st.SearchStrategy] = None) -> tuple:
    """A random program and a long update stream (long enough that most programs hold state
    at the checkpoint)."""
    program = draw(programs if programs is not None else strat.programs(max_depth=4))
    script = draw(strat.update_streams(program.n_inputs, max_actions=60))
    return program, script, program.n_inputs


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

RESCALES = [(1, 1), (2, 2), (1, 2), (2, 3), (3, 1)]


@SETTINGS
@given(program_and_script(), st.sampled_from(RESCALES), st.integers(0, 12))
def test_restore_random_programs(case, scale, cut):
    program, script, n_inputs = case
    problem = check_restore(program, script, n_inputs, scale[0], scale[1], cut)
    assert problem is None, f"{program}\n{problem}"


@settings(
    max_examples=max(20, EXAMPLES // 3),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    program_and_script(strat.iterative_programs(max_depth=3)),
    st.sampled_from(RESCALES),
    st.integers(0, 12),
)
def test_restore_random_iterative_programs(case, scale, cut):
    program, script, n_inputs = case
    problem = check_restore(program, script, n_inputs, scale[0], scale[1], cut)
    assert problem is None, f"{program}\n{problem}"
