"""timelypy.testing: run_changes over given batches, check_against_scratch at every time."""

from __future__ import annotations

import pytest

from timelypy.testing import ScratchMismatch, check_against_scratch, contents_at, run_changes

pytestmark = pytest.mark.timeout(300)


def degrees(edges):
    return edges.map(lambda e: e[0]).count()


def reach(edges):
    """Nodes reachable from node 0."""
    roots = edges.filter(lambda e: e[0] == 0).map(lambda e: e[0]).distinct()
    return roots.iterate(
        lambda inner: (
            inner.map(lambda n: (n, n))
            .join(edges.enter(inner.scope))
            .map(lambda kv: kv[1][1])
            .concat(inner)
            .distinct()
        )
    )


EDGES = [[(0, 1), (1, 2), (2, 3)], {(1, 2): -1}, [(0, 2), (3, 4)], {(0, 1): -1, (0, 2): -1}]


def test_changes_per_time_with_inserts_and_removals():
    changes = run_changes(degrees, EDGES)
    assert changes == {
        0: [((0, 1), 1), ((1, 1), 1), ((2, 1), 1)],
        1: [((1, 1), -1)],
        2: [((0, 1), -1), ((0, 2), 1), ((3, 1), 1)],
        3: [((0, 2), -1)],
    }
    assert contents_at(changes, 3) == {(2, 1): 1, (3, 1): 1}


def test_several_inputs_by_name_and_batches_of_different_lengths():
    def joined(people, cities):
        return people.join(cities)

    changes = run_changes(
        joined,
        {
            "people": [[(1, "ann"), (2, "bob")], [], {(1, "ann"): -1}],
            "cities": [[(1, "Oslo")], [(2, "Rome")]],
        },
    )
    assert changes == {
        0: [((1, ("ann", "Oslo")), 1)],
        1: [((2, ("bob", "Rome")), 1)],
        2: [((1, ("ann", "Oslo")), -1)],
    }


@pytest.mark.parametrize(
    "workers, backend", [(2, "inline"), pytest.param(2, "processes", marks=pytest.mark.processes)]
)
def test_more_workers_give_the_same_changes(workers, backend):
    assert run_changes(reach, EDGES, workers=workers, backend=backend) == run_changes(reach, EDGES)


def test_check_against_scratch_passes_a_correct_program():
    changes = check_against_scratch(reach, EDGES)
    assert contents_at(changes, 0) == {0: 1, 1: 1, 2: 1, 3: 1}
    assert contents_at(changes, 1) == {0: 1, 1: 1}


@pytest.mark.processes
def test_check_against_scratch_on_processes():
    assert check_against_scratch(degrees, EDGES, workers=2, backend="processes") == run_changes(
        degrees, EDGES
    )


def test_check_against_scratch_names_the_first_time_and_record_that_differ():
    def first_sighting_only(words):  # a filter with state of its own: drops the retraction
        seen = set()
        return words.filter(lambda w: w not in seen and not seen.add(w))

    with pytest.raises(ScratchMismatch) as caught:
        check_against_scratch(first_sighting_only, [["a", "b"], {"a": -1}])
    error = caught.value
    assert (error.time, error.record, error.incremental, error.scratch) == (1, "a", 1, 0)
    assert str(error).startswith("at time 1: record 'a' has count 1 in the incremental run")


def test_check_against_scratch_of_given_changes():
    bad = run_changes(degrees, EDGES)
    bad[2] = [((0, 2), 1), ((3, 1), 1)]  # the retraction of (0, 1) lost
    with pytest.raises(ScratchMismatch) as caught:
        check_against_scratch(degrees, EDGES, incremental=bad)
    assert (caught.value.time, caught.value.record) == (2, (0, 1))
    assert (caught.value.incremental, caught.value.scratch) == (1, 0)


def test_a_program_that_returns_no_collection_is_refused():
    with pytest.raises(Exception, match="returned int, not a Collection"):
        run_changes(lambda c: 3, [[1]])


def test_a_string_is_not_a_batch():
    with pytest.raises(TypeError, match="a batch is a list of records"):
        run_changes(degrees, ["ab"])


def test_several_outputs_by_name():
    def stats(words):
        return {"counts": words.count(), "distinct": words.distinct()}

    changes = run_changes(stats, [["a", "a", "b"], {"a": -2}])
    assert changes == {
        "counts": {0: [(("a", 2), 1), (("b", 1), 1)], 1: [(("a", 2), -1)]},
        "distinct": {0: [("a", 1), ("b", 1)], 1: [("a", -1)]},
    }
    assert check_against_scratch(stats, [["a", "a", "b"], {"a": -2}]) == changes


def test_check_against_scratch_names_the_output_that_differs():
    def stats(words):
        seen = set()
        return {
            "counts": words.count(),
            "first": words.filter(lambda w: w not in seen and not seen.add(w)),
        }

    with pytest.raises(
        ScratchMismatch, match=r"at time 1: record 'a' of output 'first' has count 1"
    ):
        check_against_scratch(stats, [["a"], {"a": -1}])
