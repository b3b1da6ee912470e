"""Checkpoints of dataflows whose operators hold work at future times: windows and temporal filters.

A temporal filter sends each record's retraction (and, for a record that is not yet present,
its insertion) at a time after the current one at once; the operators downstream hold these
updates, with capabilities, until the frontier passes their times. A checkpoint at a closed time
``F`` while windows are open stores that pending work with the rest of the state (keyed by the
record's key), so a restore on any number of workers continues exactly: at every later time the
output equals the uninterrupted run and the from-scratch reference.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Callable, Dict, List, Tuple

import pytest

import timelypy as tp
from tests.windows import reference as wref
from timelypy.differential.arrange import ArrangeOperator
from timelypy.differential.consolidate import ConsolidateOperator
from timelypy.differential.reduce import CountTotal, ThresholdTotal
from timelypy.errors import RecoveryError
from timelypy.recovery.snapshot import closed_at, restore_worker, snapshot_worker
from timelypy.windows import Session, Sliding, Tumbling, windowed
from timelypy.workers.launch.inline import local_workers

Update = Tuple[Any, Any, int, int, int]
"""``(key, value, event_time, arrival, diff)``, the windows reference's update."""

TIMES = 14
SPAN = 3
"""A record ``(key, (i, et))`` is present while ``et <= time < et + SPAN``."""


def stream(seed: int = 7) -> List[Update]:
    """Records ``(i % 3, (i, et))`` with event times around their arrival (some late, some
    ahead), and removals of earlier ones."""
    rng = random.Random(seed)
    out: List[Update] = []
    i = 0
    for t in range(TIMES):
        for _ in range(4):
            et = max(0, t + rng.randint(-3, 5))
            out.append((i % 3, (i, et), et, t, 1))
            i += 1
        if t >= 2 and rng.random() < 0.6:
            k, v, et, _, _ = rng.choice([u for u in out if u[3] < t - 1 and u[4] == 1])
            if not any(u[1] == v and u[4] == -1 for u in out):
                out.append((k, v, et, t, -1))
    return out


def event_time(value: Tuple[int, int]) -> int:
    return value[1]


def present(pairs: Any) -> Any:
    return pairs.temporal_filter(lambda kv: kv[1][1], lambda kv: kv[1][1] + SPAN)


def latest(key: Any, vals: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
    return [(max(v[1] for v, _ in vals), 1)]


def tagged(pairs: Any) -> Any:
    return pairs.map(lambda kv: (kv[0], (kv[1][0] * 10, kv[1][1])))


PROGRAMS: Dict[str, Callable[[Any], Any]] = {
    "window_count": lambda p: windowed(p, Tumbling(4), event_time).count(),
    "window_sliding": lambda p: windowed(
        p, Sliding(6, 2), event_time, lateness=2, retain=3
    ).count(),
    "window_session": lambda p: windowed(p, Session(3), event_time, lateness=1).count(),
    "window_join": lambda p: windowed(p, Tumbling(4), event_time).join(
        windowed(tagged(p), Tumbling(4), event_time)
    ),
    "filter_count": lambda p: present(p).map(lambda kv: kv[0]).count(),
    "filter_distinct": lambda p: present(p).map(lambda kv: kv[0]).distinct(),
    "filter_reduce": lambda p: present(p).reduce(latest),
    "filter_consolidate": lambda p: present(p).consolidate(),
    "filter_arrange": lambda p: present(p).arrange_by_key().as_collection(),
    "filter_join": lambda p: present(p).join(p),
}


def _acc(pairs: List[Tuple[Any, int]]) -> Dict[Any, int]:
    out: Dict[Any, int] = defaultdict(int)
    for r, d in pairs:
        out[r] += d
    return {r: n for r, n in out.items() if n}


def _present_at(updates: List[Update], time: int) -> Dict[Any, int]:
    return _acc(
        [((k, v), d) for k, v, et, t, d in updates if t <= time and max(t, et) <= time < et + SPAN]
    )


def _by_key(content: Dict[Any, int]) -> Dict[Any, List[Tuple[Any, int]]]:
    out: Dict[Any, List[Tuple[Any, int]]] = defaultdict(list)
    for (k, v), n in content.items():
        out[k].append((v, n))
    return out


def reference(name: str, updates: List[Update], time: int) -> Dict[Any, int]:
    """The program ``name`` evaluated from scratch at ``time``."""
    if name.startswith("window"):
        spec: Any = {"window_sliding": Sliding(6, 2), "window_session": Session(3)}.get(
            name, Tumbling(4)
        )
        lateness = {"window_sliding": 2, "window_session": 1}.get(name, 0)
        retain = 3 if name == "window_sliding" else None
        content = wref.window_records(updates, spec, lateness, retain, time)
        if name != "window_join":
            return wref.counts(content)
        other = [(k, (v[0] * 10, v[1]), et, t, d) for k, v, et, t, d in updates]
        return wref.joined(content, wref.window_records(other, spec, 0, None, time))
    now = _present_at(updates, time)
    if name == "filter_count":
        keys = _acc([(k, n) for (k, _), n in now.items()])
        return {(k, n): 1 for k, n in keys.items()}
    if name == "filter_distinct":
        return {k: 1 for (k, _), n in now.items() if n > 0}
    if name == "filter_reduce":
        return {(k, latest(k, vals)[0][0]): 1 for k, vals in _by_key(now).items()}
    if name in ("filter_consolidate", "filter_arrange"):
        return now
    assert name == "filter_join"
    everything = _acc([((k, v), d) for k, v, _, t, d in updates if t <= time])
    return _acc(
        [
            ((k1, (v1, v2)), n1 * n2)
            for (k1, v1), n1 in now.items()
            for (k2, v2), n2 in everything.items()
            if k1 == k2
        ]
    )


class Run:
    """A program on ``peers`` inline workers stepped by the test, fed by time."""

    def __init__(self, name: str, peers: int) -> None:
        def build(scope: Any) -> Tuple[Any, Any]:
            session, pairs = scope.new_collection(name="pairs")
            return session, PROGRAMS[name](pairs).capture()

        self.workers = local_workers(peers)
        self.built = [w.dataflow(build) for w in self.workers]

    def settle(self, t: int) -> None:
        for _ in range(100_000):
            for w in self.workers:
                w.step()
            if all(closed_at(w, t) for w in self.workers):
                return
        raise AssertionError(f"time {t} did not close")

    def feed(self, updates: List[Update], t: int) -> None:
        for n, (k, v, _, _, d) in enumerate(u for u in updates if u[3] == t):
            self.built[n % len(self.built)][0].update((k, v), d)
        for session, _ in self.built:
            session.advance_to(t + 1)
            session.flush()
        self.settle(t + 1)

    def at(self, t: int) -> Dict[Any, int]:
        out: Dict[Any, int] = defaultdict(int)
        for _, captured in self.built:
            for rec, n in captured.at(t).items():
                out[rec] += n
        return {r: n for r, n in out.items() if n}


def held_at(run: Run, after: int) -> int:
    """How many updates the run's arrangement batchers, total reduces and consolidates hold at
    times after ``after`` (work a checkpoint at ``after`` must keep)."""
    total = 0
    for w in run.workers:
        for op in w.dataflows()[0].children[1:]:
            if isinstance(op, ArrangeOperator):
                total += sum(1 for u in op.batcher.pending if u[1] > after)
            elif isinstance(op, (CountTotal, ThresholdTotal)):
                op._columns.unfold(
                    op.pending
                )  # (updates held as columns, as the objects hold them)
                total += sum(len(sums) for t, sums in op.pending.items() if t > after)
            elif isinstance(op, ConsolidateOperator):
                total += sum(1 for _, t in op._pending if t > after)
    return total


END = TIMES + 10  # every window closed, every filtered record gone


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("scale", [(1, 1), (1, 2), (2, 3), (3, 1)])
@pytest.mark.parametrize("cut", [4, 9])
def test_restored_with_open_windows_equals_uninterrupted_and_reference(
    name: str, scale: Tuple[int, int], cut: int
) -> None:
    updates = stream()
    first = Run(name, scale[0])
    for t in range(cut):
        first.feed(updates, t)
    assert held_at(first, cut) > 0, "no work at future times: the test checks nothing"
    snaps = [snapshot_worker(w) for w in first.workers]
    second = Run(name, scale[1])
    for w in second.workers:
        restore_worker(w, snaps, cut)
    second.settle(cut)
    whole = Run(name, scale[0])
    for t in range(END):
        whole.feed(updates, t)
        if t >= cut:
            second.feed(updates, t)
    for t in range(cut, END):
        expected = reference(name, updates, t)
        assert second.at(t) == expected, f"{name}: at time {t} (restored at {cut})"
        assert whole.at(t) == expected, f"{name}: the uninterrupted run at time {t}"
    assert reference(name, updates, END - 1) or name.startswith("filter_"), "no result at the end"


def test_pending_work_before_the_frontier_is_refused_naming_the_operator() -> None:
    run = Run("filter_count", 1)
    for t in range(3):
        run.feed(stream(), t)
    count = next(op for op in run.workers[0].dataflows()[0].children if isinstance(op, CountTotal))
    count.pending[1] = {0: 1}  # a time the frontier (3) has passed: not a closed time
    with pytest.raises(RecoveryError, match=r"CountTotal.*pending.*earliest 1.*not closed"):
        snapshot_worker(run.workers[0])


def test_arrangement_of_an_older_version_is_read_and_an_unknown_one_refused() -> None:
    run = Run("filter_arrange", 1)
    for t in range(5):
        run.feed(stream(), t)
    snap = snapshot_worker(run.workers[0])
    oid, state = next((k, s) for k, s in snap.items() if s.version == 3)
    assert any(len(piece) == 3 and piece[0] == "pending" for _, piece in state.keyed)
    state.version = 4
    fresh = Run("filter_arrange", 1)
    with pytest.raises(RecoveryError, match=r"state version 4; this timelypy reads versions 2"):
        restore_worker(fresh.workers[0], [snap], 5)


# Sessions with a checkpoint store: pieces go through the store's encoding, and through
# worker processes.


def session_dataflow(scope: Any) -> Dict[str, Any]:
    pairs_in, pairs = scope.new_collection()
    counts = windowed(pairs, Sliding(6, 2), event_time, lateness=2).count()
    return {"pairs": pairs_in, "counts": counts.capture(), "probe": counts.probe()}


def session_feed(s: Any, updates: List[Update], start: int, end: int) -> None:
    for t in range(start, end):
        for k, v, _, arrival, d in updates:
            if arrival == t:
                s.update("pairs", (k, v), d)
        s.advance_to(t + 1)
    s.wait("probe")


def session_contents(changes: List[Tuple[Any, Any, int]], time: int) -> Dict[Any, int]:
    return _acc([(data, d) for data, t, d in changes if t <= time])


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "before,after",
    [
        ({"workers": 1}, {"workers": 1}),
        ({"workers": 2}, {"workers": 3}),
        pytest.param(
            {"workers": 2, "backend": "processes"},
            {"workers": 1},
            marks=pytest.mark.processes,
            id="processes-2-then-inline-1",
        ),
    ],
)
def test_session_checkpoint_with_open_windows(tmp_path: Any, before: Any, after: Any) -> None:
    updates = stream()
    cut = 7
    with tp.open_session(session_dataflow, checkpoint=tp.Checkpoints(str(tmp_path)), **before) as s:
        session_feed(s, updates, 0, cut)
        assert s.checkpoint().time == cut
    with tp.open_session(session_dataflow, restore=str(tmp_path), **after) as s:
        assert s.restored_at == cut
        state = s.restored("counts")
        session_feed(s, updates, cut, END)
        later = s.changes("counts")
    assert all(t >= cut for _, t, _ in later), "changes before the checkpoint came again"
    for t in range(cut, END):
        expected = wref.counts(wref.window_records(updates, Sliding(6, 2), 2, None, t))
        assert session_contents(state + later, t) == expected, f"at time {t}"


if __name__ == "__main__":  # worker processes import this script
    pass
