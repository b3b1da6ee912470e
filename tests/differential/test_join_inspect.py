"""An ``inspect`` straight after a join is fused into the join operator: the join calls it on
each output update as it sends it. The fused inspection must see exactly the updates that an
unfused one (an ``inspect`` behind a pass-through ``map``) sees, the collection must still
flow to other consumers, a second inspection stays an operator, and an error in the inspection
names it."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Dict, List, Tuple

import pytest
from support.updates import net_changes

import timelypy as tp
from timelypy.differential import arrange_columns
from timelypy.differential.join import JoinOperator
from timelypy.errors import OperatorError, WorkerError


def _changes(seed: int, rounds: int = 30) -> List[List[Tuple[Tuple[int, int], int]]]:
    """Rounds of skip-level style changes ``((manager, person), diff)``: people change
    manager, with removals and re-insertions."""
    rng = random.Random(seed)
    manager = {p: rng.randrange(6) for p in range(20)}
    out = [[((m, p), 1) for p, m in manager.items()]]
    for _ in range(rounds):
        batch = []
        for _ in range(rng.randint(0, 4)):
            p = rng.randrange(20)
            new = rng.randrange(6)
            batch += [((manager[p], p), -1), ((new, p), 1)]
            manager[p] = new
        out.append(batch)
    return out


def _run(
    fused: bool, workers: int, seed: int, probes_only: bool = False, person: Any = int
) -> Dict[str, Any]:
    """Run the skip-level join with an inspection (fused into the join, or behind a map);
    ``probes_only``: nothing but the probe reads the inspected collection; ``person`` names
    the people (ints fit columns, beyond 64 bits they take the object path)."""
    rounds = [[((person(m), person(p)), d) for (m, p), d in batch] for batch in _changes(seed)]

    def build(worker: Any) -> Dict[str, Any]:
        seen: List[Tuple[Any, Any, int]] = []
        joins: List[Any] = []

        def dataflow(scope: Any) -> Any:
            session, manages = scope.new_collection()
            joined = manages.map(lambda mp: (mp[1], mp[0])).join(manages)
            joins.extend(c for c in scope.subgraph.children if isinstance(c, JoinOperator))
            if not fused:
                joined = joined.map(lambda r: r)  # an operator in between: no fusion
            inspected = joined.inspect(seen.append)
            keys = None if probes_only else inspected.map(lambda r: r[0]).capture()
            return session, inspected.probe(), keys

        session, probe, keys = worker.dataflow(dataflow)
        for t, batch in enumerate(rounds):
            for i, (record, diff) in enumerate(batch):
                if i % worker.peers == worker.index:
                    session.update(record, diff)
            session.advance_to(t + 1)
            session.flush()
            worker.step_until(probe, t + 1)
        session.close()
        worker.step_until_done()
        paths = (sum(j.column_batches for j in joins), sum(j.object_batches for j in joins))
        return {"seen": seen, "keys": keys and keys.consolidated(), "paths": paths}

    return tp.execute(build, workers=workers)


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fused_inspection_sees_what_an_unfused_one_sees(workers: int, seed: int) -> None:
    fused = _run(True, workers, seed)
    unfused = _run(False, workers, seed)
    seen_fused = [u for w in fused for u in w["seen"]]
    seen_unfused = [u for w in unfused for u in w["seen"]]
    assert sorted(seen_fused) == sorted(seen_unfused) and seen_fused
    assert net_changes(seen_fused) == net_changes(seen_unfused)
    keys_fused = Counter()
    keys_unfused = Counter()
    for w in fused:
        keys_fused.update(w["keys"])
    for w in unfused:
        keys_unfused.update(w["keys"])
    assert keys_fused == keys_unfused


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("person", ["fits columns", "beyond 64 bits"])
def test_with_only_probes_after_it_the_inspection_sees_every_update(
    workers: int, person: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read by probes only, the join inspects each chunk of outputs as it makes it and sends
    placeholders: the inspection sees what an unfused one sees, on both paths, with batches
    cut into many activations, and the probes still count every update (the run ends)."""
    monkeypatch.setattr(JoinOperator, "fuel", 5)
    monkeypatch.setattr(JoinOperator, "small_batch", 0)  # (small batches read objects)
    monkeypatch.setattr(JoinOperator, "small_other", 0)
    monkeypatch.setattr(arrange_columns, "COLUMNS_MIN_UPDATES", 1)
    make = int if person == "fits columns" else (lambda p: 2**70 + p)
    for seed in (1, 2):
        fused = _run(True, workers, seed, probes_only=True, person=make)
        unfused = _run(False, workers, seed, probes_only=True, person=make)
        seen_fused = sorted(u for w in fused for u in w["seen"])
        assert seen_fused and seen_fused == sorted(u for w in unfused for u in w["seen"])
        columns, objects = (sum(w["paths"][i] for w in fused) for i in (0, 1))
        assert (columns if person == "fits columns" else objects) > 0, (columns, objects)


def test_the_join_takes_the_inspection_and_a_second_one_is_an_operator() -> None:
    def build(worker: Any) -> Tuple[List[str], List[Any], List[Any]]:
        first: List[Any] = []
        second: List[Any] = []

        def dataflow(scope: Any) -> Any:
            session, pairs = scope.new_collection()
            joined = pairs.join(pairs)
            before = len(scope.subgraph.children)
            joined.inspect(first.append)
            fused_count = len(scope.subgraph.children) - before
            probe = joined.inspect(second.append).probe()
            return session, probe, fused_count

        session, probe, fused_count = worker.dataflow(dataflow)
        session.insert((1, "a"))
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1)
        return fused_count, first, second

    ((fused_count, first, second),) = tp.execute(build, workers=1)
    assert fused_count == 0  # no operator was added for the first inspection
    assert first == second == [((1, ("a", "a")), 0, 1)]


def test_an_error_in_the_fused_inspection_names_it() -> None:
    def boom(update: Any) -> None:
        raise ValueError(f"no thanks: {update!r}")

    def build(worker: Any) -> None:
        def dataflow(scope: Any) -> Any:
            session, pairs = scope.new_collection()
            return session, pairs.join(pairs).inspect(boom).probe()

        session, probe = worker.dataflow(dataflow)
        session.insert((1, "a"))
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1)

    with pytest.raises(
        (OperatorError, WorkerError), match=r"operator 'Linear\[inspect\]'.*ValueError: no thanks"
    ):
        tp.execute(build, workers=1)


@pytest.mark.parametrize("probes_only", [True, False])
def test_an_error_in_the_fused_inspection_of_column_outputs_names_it(probes_only: bool) -> None:
    """Whether the join inspects as it makes its outputs (only probes read them) or as it
    sends them, a failing inspection is named, with the time of the update."""

    def picky(update: Any) -> None:
        if update[0] == (3, (30, 30)):
            raise ValueError("not this one")

    joins: List[Any] = []

    def build(worker: Any) -> None:
        def dataflow(scope: Any) -> Any:
            session, pairs = scope.new_collection()
            joined = pairs.join(pairs).inspect(picky)
            joins.extend(c for c in scope.subgraph.children if isinstance(c, JoinOperator))
            if not probes_only:
                joined.capture()
            return session, joined.probe()

        session, probe = worker.dataflow(dataflow)
        for k in range(2 * arrange_columns.COLUMNS_MIN_UPDATES):  # a batch of columns
            session.insert((k, 10 * k))
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1)

    with pytest.raises(
        (OperatorError, WorkerError),
        match=r"operator 'Linear\[inspect\]'.*ValueError: not this one.*at time 0",
    ):
        tp.execute(build, workers=1)
    assert [j.column_batches > 0 for j in joins] == [True]  # joined on the column path


def _skip_level_inspected(people: int, backend: str) -> Tuple[Dict[Any, int], List[int]]:
    """The skip-level join of ``people`` (each managed by ``p // 2``, then moved to ``p //
    3``) inspected with only a probe after it, on 2 workers of ``backend``: the inspected
    updates consolidated by ``(record, time)``, and the column batches each worker joined."""

    def build(worker: Any) -> Tuple[List[Any], int]:
        seen: List[Any] = []
        joins: List[Any] = []

        def dataflow(scope: Any) -> Any:
            session, manages = scope.new_collection()
            joined = manages.map(lambda mp: (mp[1], mp[0])).join(manages)
            joins.extend(c for c in scope.subgraph.children if isinstance(c, JoinOperator))
            return session, joined.inspect(seen.append).probe()

        session, probe = worker.dataflow(dataflow)
        for p in range(worker.index, people, worker.peers):
            session.insert((p // 2, p))
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1)
        for p in range(1 + worker.index, people, worker.peers):  # one batch of changes at 1
            session.remove((p // 2, p))
            session.insert((p // 3, p))
        session.close()
        worker.step_until_done()
        return seen, sum(j.column_batches for j in joins)

    results = tp.execute(build, workers=2, backend=backend)
    changes = net_changes(update for seen, _ in results for update in seen)
    return changes, [columns for _, columns in results]


def _skip_level_reference(people: int) -> Dict[Any, int]:
    """The same join's changes from scratch: the output at time 0, and at 1 minus it."""

    def joined(manager: Dict[int, int]) -> Counter:
        reports: Dict[int, List[int]] = {}
        for p, m in manager.items():
            reports.setdefault(m, []).append(p)
        return Counter({(k, (a, b)): 1 for k, a in manager.items() for b in reports.get(k, ())})

    before = joined({p: p // 2 for p in range(people)})
    after = joined({p: (p // 3 if p else 0) for p in range(people)})
    changes = {(r, 0): c for r, c in before.items()}
    for r in set(before) | set(after):
        if after[r] != before[r]:
            changes[(r, 1)] = after[r] - before[r]
    return changes


@pytest.mark.parametrize("backend", ["inline", "processes"])
def test_probes_only_column_path_on_two_workers_matches_the_reference(backend: str) -> None:
    """Large enough for column batches without any setting changed, on two workers inline
    and in two processes: the inspected updates are exactly the join's changes."""
    people = 4 * arrange_columns.COLUMNS_MIN_UPDATES
    inspected, columns = _skip_level_inspected(people, backend)
    assert inspected == _skip_level_reference(people)
    assert all(c > 0 for c in columns), columns  # every worker joined on the column path
