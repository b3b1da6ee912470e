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

import timelypy as tp
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


def _run(fused: bool, workers: int, seed: int) -> Dict[str, Any]:
    rounds = _changes(seed)

    def build(worker: Any) -> Dict[str, Any]:
        seen: List[Tuple[Any, Any, int]] = []

        def dataflow(scope: Any) -> Any:
            session, manages = scope.new_collection()
            joined = manages.map(lambda mp: (mp[1], mp[0])).join(manages)
            if not fused:
                joined = joined.map(lambda r: r)  # an operator in between: no fusion
            inspected = joined.inspect(seen.append)
            return session, inspected.probe(), inspected.map(lambda r: r[0]).capture()

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
        return {"seen": seen, "keys": keys.consolidated()}

    return tp.execute(build, workers=workers)


def _consolidated(updates: List[Tuple[Any, Any, int]]) -> Dict[Tuple[Any, Any], int]:
    acc: Counter = Counter()
    for data, time, diff in updates:
        acc[(data, time)] += diff
    return {k: v for k, v in acc.items() if v}


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fused_inspection_sees_what_an_unfused_one_sees(workers: int, seed: int) -> None:
    fused = _run(True, workers, seed)
    unfused = _run(False, workers, seed)
    seen_fused = [u for w in fused for u in w["seen"]]
    seen_unfused = [u for w in unfused for u in w["seen"]]
    assert sorted(seen_fused) == sorted(seen_unfused) and seen_fused
    assert _consolidated(seen_fused) == _consolidated(seen_unfused)
    keys_fused = Counter()
    keys_unfused = Counter()
    for w in fused:
        keys_fused.update(w["keys"])
    for w in unfused:
        keys_unfused.update(w["keys"])
    assert keys_fused == keys_unfused


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
