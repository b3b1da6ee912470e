"""The driver-side session API on every backend: push updates, advance, wait, read changes,
look up arrangement contents by key."""

from __future__ import annotations

import sys

import cloudpickle
import pytest

import timelypy as tp
from timelypy.errors import TimelyError, WaitTimeoutError, WorkerError

cloudpickle.register_pickle_by_value(sys.modules[__name__])

BACKENDS = [
    ("inline", 1),
    ("inline", 3),
    pytest.param("processes", 1, marks=pytest.mark.processes),
    pytest.param("processes", 2, marks=pytest.mark.processes),
    pytest.param("ray", 2, marks=pytest.mark.ray),
]


def degree_dataflow(scope):
    edges_in, edges = scope.new_collection()
    degrees = edges.map(lambda e: e[0]).count()
    return {
        "edges": edges_in,
        "degrees": degrees.capture(),
        "probe": degrees.probe(),
        "by_node": degrees.arrange_by_key(),
    }


def connectivity_dataflow(scope):
    """Connectivity by label propagation, with interactive queries through semijoin."""
    edges_in, edges = scope.new_collection()
    queries_in, queries = scope.new_collection()
    both = edges.concat(edges.map(lambda e: (e[1], e[0])))
    nodes = both.map(lambda e: (e[0], e[0])).distinct()

    def propagate(inner):
        e = both.enter(inner.scope)
        n = nodes.enter(inner.scope)
        return (
            inner.join(e)
            .map(lambda kv: (kv[1][1], kv[1][0]))
            .concat(n)
            .reduce(lambda key, vals: [(vals[0][0], 1)])
        )

    labels = nodes.iterate(propagate)
    answers = labels.semijoin(queries)
    return {
        "edges": edges_in,
        "queries": queries_in,
        "answers": answers.capture(),
        "probe": answers.probe(),
        "labels": labels.arrange_by_key(),
    }


@pytest.fixture
def backend_ready(request, backend):
    """Ray sessions use the suite's shared local Ray (tests/conftest.py)."""
    if backend == "ray":
        request.getfixturevalue("ray_session")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend,workers", BACKENDS)
def test_session_updates_changes_and_lookups(backend, workers, backend_ready):
    with tp.open_session(degree_dataflow, workers=workers, backend=backend, timeout=60) as s:
        s.insert("edges", (1, 2))
        s.insert("edges", (1, 3))
        s.insert("edges", (2, 3))
        s.advance_to(1)
        s.wait("probe")
        assert s.lookup("by_node", 1) == {2: 1}
        assert s.lookup("by_node", 2) == {1: 1}
        assert s.lookup("by_node", 9) == {}
        assert sorted(s.changes("degrees")) == [((1, 2), 0, 1), ((2, 1), 0, 1)]
        s.remove("edges", (1, 3))
        s.advance_to(2)
        s.wait("probe")
        assert s.lookup("by_node", 1) == {1: 1}
        assert sorted(s.changes("degrees")) == [((1, 1), 1, 1), ((1, 2), 1, -1)]
        assert s.changes("degrees") == []
        assert s.frontier("probe") == [2]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend,workers", BACKENDS)
def test_session_interactive_connectivity_queries(backend, workers, backend_ready):
    with tp.open_session(connectivity_dataflow, workers=workers, backend=backend, timeout=90) as s:
        for e in [(1, 2), (2, 3), (4, 5)]:
            s.insert("edges", e)
        s.insert("queries", 3)
        s.insert("queries", 5)
        s.advance_to(1)
        s.wait("probe")
        assert s.lookup("labels", 3) == {1: 1}
        assert s.lookup("labels", 5) == {4: 1}
        assert sorted(s.changes("answers")) == [((3, 1), 0, 1), ((5, 4), 0, 1)]
        s.insert("edges", (3, 4))  # joins the two components: 5's label becomes 1
        s.advance_to(2)
        s.wait("probe")
        assert s.lookup("labels", 5) == {1: 1}
        assert sorted(s.changes("answers")) == [((5, 1), 1, 1), ((5, 4), 1, -1)]


def test_session_errors_are_clear():
    with tp.open_session(degree_dataflow, timeout=10) as s:
        with pytest.raises(TimelyError, match="no handle named 'nope'"):
            s.lookup("nope", 1)
        with pytest.raises(TimelyError, match="is a ProbeHandle"):
            s.lookup("probe", 1)
        s.advance_to(3)
        with pytest.raises(TimelyError, match="before"):
            s.advance_to(2)
        with pytest.raises(WaitTimeoutError):
            s.wait("probe", time=10, timeout=0.5)  # inputs are only at 3: 10 never passes


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_session_worker_failure_names_the_worker():
    def failing(scope):
        edges_in, edges = scope.new_collection()
        boom = edges.map(lambda e: 1 // (e[0] - 7)).probe()
        return {"edges": edges_in, "probe": boom}

    with pytest.raises(WorkerError, match="ZeroDivisionError"):
        with tp.open_session(failing, workers=2, backend="processes", timeout=30) as s:
            s.insert("edges", (7, 1))
            s.advance_to(1)
            s.wait("probe")
