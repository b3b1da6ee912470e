"""Dataflows built one after another on several workers, each after the previous one completed.

Every worker builds the same dataflows in the same order (as in timely), but not at the same
moment: a worker that finished the first dataflow sooner builds the second and sends its
progress, and its data, to peers that have not built it yet. Those messages must wait for the
dataflow on the receiving worker, not be lost. One worker here lags before building the second
dataflow so that its peers' messages surely arrive first; every answer is checked against the
records inserted and against one worker.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any, Callable, Dict, List, Tuple

import cloudpickle
import pytest

import timelypy as tp

# Builds shipped to worker processes reference functions of this module: send them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.timeout(120)

LAG = 0.3
"""Seconds the lagging worker waits before building a later dataflow (its peers build the same
dataflow meanwhile and send it progress and data)."""

KEYS = 5


def records(worker: Any, name: str, size: int) -> List[Tuple[int, int]]:
    """This worker's share of ``size`` records ``(key, value)`` for dataflow ``name``."""
    offset = len(name)
    return [(i % KEYS, i + offset) for i in range(worker.index, size, worker.peers)]


def final(updates: List[Tuple[Any, Any, int]]) -> Dict[Any, int]:
    """The collection the updates add up to (records with a nonzero count)."""
    total: Counter = Counter()
    for data, _time, diff in updates:
        total[data] += diff
    return {data: n for data, n in total.items() if n}


def shape(kind: str, scope: Any, name: str) -> Tuple[Any, Any]:
    """A dataflow of ``kind``: ``"plain"`` (no exchange between workers), ``"count"`` (records
    counted by key: exchanged by key) or ``"join"`` (the records joined with themselves by
    key); returns the input session and the captured output."""
    session, collection = scope.new_collection(name=name)
    if kind == "plain":
        out = collection.map(lambda r: (r[0], r[1] * 2))
    elif kind == "count":
        out = collection.map(lambda r: r[0]).count()
    elif kind == "join":
        out = collection.join(collection.map(lambda r: (r[0], -r[1])))
    else:  # pragma: no cover - a mistake in a test
        raise ValueError(kind)
    return session, out.capture()


def run_one(worker: Any, kind: str, name: str, size: int, lagging: int) -> Dict[Any, int]:
    """Build one dataflow, insert this worker's records, close, run it to completion."""
    if worker.index == lagging % worker.peers:
        time.sleep(LAG)
    session, captured = worker.dataflow(lambda scope: shape(kind, scope, name), name=name)
    for record in records(worker, name, size):
        session.insert(record)
    session.close()
    worker.step_until_done(timeout=60)
    return final(captured.updates())


def sequential_build(kinds: Tuple[str, ...], size: int, lagging: int) -> Callable[[Any], Any]:
    """A build running one dataflow per entry of ``kinds``, each after the previous completed;
    every dataflow but the first is built late on worker ``lagging``."""

    def build(worker: Any) -> List[Dict[Any, int]]:
        out = []
        for n, kind in enumerate(kinds):
            out.append(run_one(worker, kind, f"df{n}-{kind}", size, lagging if n else -1))
        return out

    return build


def merged(results: List[List[Dict[Any, int]]]) -> List[Dict[Any, int]]:
    """Each dataflow's output over all workers (each worker captures its own part)."""
    out: List[Dict[Any, int]] = []
    for parts in zip(*results):
        total: Counter = Counter()
        for part in parts:
            total.update(part)
        out.append({data: n for data, n in total.items() if n})
    return out


def expected(kind: str, name: str, size: int) -> Dict[Any, int]:
    """The answer of a ``kind`` dataflow over all ``size`` records, computed directly."""
    offset = len(name)
    rows = [(i % KEYS, i + offset) for i in range(size)]
    if kind == "plain":
        return dict(Counter((k, v * 2) for k, v in rows))
    if kind == "count":
        return dict(Counter((k, n) for k, n in Counter(k for k, _ in rows).items()))
    return dict(Counter((k, (v, -w)) for k, v in rows for k2, w in rows if k2 == k))


KINDS = [
    ("plain", "plain"),
    ("plain", "count"),
    ("count", "join"),
    ("plain", "count", "join"),
]


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("kinds", KINDS, ids="-".join)
def test_sequential_dataflows_inline(workers: int, kinds: Tuple[str, ...]) -> None:
    size = 12
    build = sequential_build(kinds, size, lagging=0)
    want = [expected(kind, f"df{n}-{kind}", size) for n, kind in enumerate(kinds)]
    assert merged(tp.execute(build, workers=1)) == want
    assert merged(tp.execute(build, workers=workers, timeout=60)) == want


@pytest.mark.parametrize("lagging", [0, 1])
def test_sequential_dataflows_lagging_worker(lagging: int) -> None:
    """Whichever worker is late, the others' early messages wait for it."""
    kinds = ("count", "join")
    size = 10
    want = [expected(kind, f"df{n}-{kind}", size) for n, kind in enumerate(kinds)]
    build = sequential_build(kinds, size, lagging=lagging)
    assert merged(tp.execute(build, workers=2, timeout=60)) == want


@pytest.mark.parametrize("kinds", [("plain", "plain"), ("plain", "count", "join")], ids="-".join)
def test_sequential_dataflows_processes(kinds: Tuple[str, ...]) -> None:
    size = 12
    want = [expected(kind, f"df{n}-{kind}", size) for n, kind in enumerate(kinds)]
    build = sequential_build(kinds, size, lagging=1)
    assert merged(tp.execute(build, workers=2, backend="processes", timeout=90)) == want


def reported_build(worker: Any) -> List[Any]:
    """The program of the report: two input-only dataflows, each worker inserting its index."""

    def one(name: str) -> Any:
        session, captured = worker.dataflow(
            lambda scope: (lambda p: (p[0], p[1].capture()))(scope.new_collection(name=name))
        )
        session.insert(worker.index)
        session.close()
        worker.step_until_done(timeout=30)
        return captured.updates()

    return [one("a"), one("b")]


def test_reported_program_completes() -> None:
    results = tp.execute(reported_build, workers=2, timeout=60)
    assert results == [[[(0, 0, 1)], [(0, 0, 1)]], [[(1, 0, 1)], [(1, 0, 1)]]]
