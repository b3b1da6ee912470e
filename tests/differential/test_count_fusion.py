"""count at total times with its neighbours fused in: a time-preserving linear chain before it
(``lines.flat_map(str.split).count()`` is one operator on one worker) and an ``inspect`` after
it (called on each time's changes as they are made; when only probes read the output, the
changes are not kept for it). Every variant must emit exactly the changes of the unfused
dataflow, at the same times, and call the inspection once per output update."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Dict, List, Tuple

import pytest

import timelypy as tp
from timelypy.differential import Collection
from timelypy.errors import OperatorError, UnhashableDataError, WorkerError
from timelypy.stats import Statistics

VOCAB = [f"w{i}" for i in range(12)]


def _line(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(0, 6)))


def _rounds(seed: int, lines: int = 30, rounds: int = 25) -> Tuple[List[str], List[List[Tuple]]]:
    """Initial lines and rounds of changes ``(line id, old, new, diff)``: replacements, lines
    removed and put back, a line changed twice in a round, diffs other than one."""
    rng = random.Random(seed)
    cur = [_line(rng) for _ in range(lines)]
    initial = list(cur)
    out = []
    for _ in range(rounds):
        batch = []
        for _ in range(rng.randint(0, 5)):
            i = rng.randrange(lines)
            new = _line(rng)
            batch.append((i, cur[i], new, 1))
            cur[i] = new
        if rng.random() < 0.3:  # the same line out and back in: nothing changes
            i = rng.randrange(lines)
            batch.append((i, cur[i], cur[i], 1))
        if rng.random() < 0.3:  # a record of weight 3 in and out again later in the round
            batch.append((-1, None, "w0 w1 w1", 3))
            batch.append((-1, "w0 w1 w1", None, 3))
        out.append(batch)
    return initial, out


def _expected(initial: List[str], rounds: List[List[Tuple]]) -> List[Tuple[Any, int, int]]:
    """The consolidated changes of ``(word, count)`` at each time, from scratch."""

    def counts(lines: Dict[Any, Counter]) -> Counter:
        c: Counter = Counter()
        for (_, text), m in lines.items():
            for w in text.split():
                c[w] += m
        return c

    state: Counter = Counter({(i, text): 1 for i, text in enumerate(initial)})
    prev: Counter = Counter()
    out = []
    for t in range(len(rounds) + 1):
        if t:
            for i, old, new, m in rounds[t - 1]:
                if old is not None:
                    state[(i, old)] -= m
                if new is not None:
                    state[(i, new)] += m
        now = counts(state)
        pairs_before = {(w, c) for w, c in prev.items() if c}
        pairs_now = {(w, c) for w, c in now.items() if c}
        out += [(p, t, -1) for p in pairs_before - pairs_now]
        out += [(p, t, 1) for p in pairs_now - pairs_before]
        prev = now
    return sorted(out)


def _consolidate(updates: List[Tuple[Any, Any, int]]) -> List[Tuple[Any, Any, int]]:
    acc: Counter = Counter()
    for d, t, r in updates:
        acc[(d, t)] += r
    return sorted((d, t, r) for (d, t), r in acc.items() if r)


def _split(il: Tuple[int, str]) -> List[str]:
    return il[1].split()


def _drive(
    worker: Any,
    session: Any,
    probe: Any,
    initial: List[str],
    rounds: List[List[Tuple]],
    closed: bool,
) -> None:
    """Load, then the rounds: each stepped to completion (closed) or all buffered and stepped
    at the end (the W3 harness)."""
    for i in range(worker.index, len(initial), worker.peers):
        session.insert((i, initial[i]))
    for t, batch in enumerate(rounds, start=1):
        session.advance_to(t)
        if closed:
            session.flush()
            worker.step_until(probe, t)
        for k, (i, old, new, m) in enumerate(batch):
            if k % worker.peers == worker.index:
                if old is not None:
                    session.update((i, old), -m)
                if new is not None:
                    session.update((i, new), m)
    session.close()
    while worker.step():
        pass


PROGRAMS = {
    # name: (count's input collection from the lines, whether stages fuse on one worker)
    "flat_map": lambda lines: lines.flat_map(_split),
    "map>flat_map>filter": lambda lines: (
        lines.map(lambda il: il[1]).flat_map(str.split).filter(lambda w: w != "w3")
    ),
    "flat_map>map": lambda lines: lines.flat_map(_split).map(lambda w: w.upper()),
    "explode>negate>negate": lambda lines: (
        lines.explode(lambda il: [(w, 1) for w in il[1].split()]).negate().negate()
    ),
    # not fused: the chain moves times; and a materialised chain
    "flat_map>map_times": lambda lines: lines.flat_map(_split).map_times(lambda t: t),
    "materialised": lambda lines: Collection(lines.scope, lines.flat_map(_split).inner),
}


def _transform_expected(name: str, expected: List[Tuple]) -> List[Tuple]:
    if name == "map>flat_map>filter":
        return [u for u in expected if u[0][0] != "w3"]
    if name == "flat_map>map":
        return sorted(((w.upper(), c), t, r) for (w, c), t, r in expected)
    return expected


@pytest.mark.parametrize("closed", [False, True], ids=["buffered", "closed-loop"])
@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("workers", [1, 2])
def test_count_after_a_linear_chain_then_inspect_and_probe(name, closed, workers):
    """The W3 shape: chain, count, inspect, probe (the inspection is all that sees the data)."""
    initial, rounds = _rounds(seed=len(name) * 7 + closed)

    def build(worker):
        seen: List[Tuple] = []

        def dataflow(scope):
            session, lines = scope.new_collection()
            probe = PROGRAMS[name](lines).count().inspect(seen.append).probe()
            return session, probe

        session, probe = worker.dataflow(dataflow)
        _drive(worker, session, probe, initial, rounds, closed)
        return seen

    seen = [u for part in tp.execute(build, workers=workers) for u in part]
    assert all(type(u) is tuple and len(u) == 3 for u in seen)
    expected = _transform_expected(name, _expected(initial, rounds))
    assert _consolidate(seen) == expected
    # exactly the changes: nothing that cancels, no update twice
    assert sorted(seen) == expected


@pytest.mark.parametrize("name", ["flat_map", "map>flat_map>filter"])
def test_fused_and_unfused_call_the_inspection_with_the_same_sequence(name):
    initial, rounds = _rounds(seed=3)

    def run(fused: bool) -> List[Tuple]:
        def build(worker):
            seen: List[Tuple] = []

            def dataflow(scope):
                session, lines = scope.new_collection()
                words = PROGRAMS[name](lines)
                if not fused:  # a materialised chain, and a map between count and inspect
                    words = Collection(scope, words.inner)
                    counts = words.count().map(lambda x: x)
                else:
                    counts = words.count()
                return session, counts.inspect(seen.append).probe()

            session, probe = worker.dataflow(dataflow)
            _drive(worker, session, probe, initial, rounds, closed=False)
            return seen

        (seen,) = tp.execute(build)
        return seen

    assert run(True) == run(False)


def test_the_chain_runs_inside_the_count_on_one_worker():
    stats = Statistics()

    def build(worker):
        def dataflow(scope):
            session, lines = scope.new_collection()
            return session, lines.flat_map(_split).count().inspect(lambda u: None).probe()

        session, probe = worker.dataflow(dataflow)
        session.insert((0, "a b a"))
        session.insert((1, "b c"))
        session.advance_to(1)
        session.remove((1, "b c"))
        session.close()
        while worker.step():
            pass

    tp.execute(build, statistics=stats)
    names = [op["name"] for op in stats.operators()]
    assert "Linear[flat_map]>CountTotal" in names
    assert not any(n.startswith("Linear[") and n.endswith("]") for n in names), names
    (count,) = stats.find("CountTotal")
    (probe,) = stats.find("Probe")
    # time 0: (a,2), (b,2), (c,1); time 1: (b,2) -> (b,1), (c,1) out: 6 output updates, all
    # counted by the probe although only placeholders reach it
    assert count["records_in"] == 3 and count["records_out"] == 6
    assert probe["records_in"] == 6


@pytest.mark.parametrize("workers", [1, 2])
def test_other_consumers_of_a_fused_inspection_get_the_data(workers):
    initial, rounds = _rounds(seed=11)

    def build(worker):
        seen: List[Tuple] = []

        def dataflow(scope):
            session, lines = scope.new_collection()
            counts = lines.flat_map(_split).count().inspect(seen.append)
            out = counts.capture()
            sizes = counts.map(lambda wc: wc[1]).capture()
            return session, counts.probe(), out, sizes

        session, probe, out, sizes = worker.dataflow(dataflow)
        _drive(worker, session, probe, initial, rounds, closed=True)
        return seen, out.updates(), sizes.updates()

    res = tp.execute(build, workers=workers)
    seen = [u for r in res for u in r[0]]
    out = [u for r in res for u in r[1]]
    sizes = [u for r in res for u in r[2]]
    expected = _expected(initial, rounds)
    assert sorted(seen) == expected and _consolidate(out) == expected
    assert _consolidate(sizes) == _consolidate([(wc[1], t, r) for wc, t, r in expected])


def test_count_probe_alone_and_a_second_inspection():
    initial, rounds = _rounds(seed=5)

    def build(worker):
        first: List[Tuple] = []
        second: List[Tuple] = []

        def dataflow(scope):
            session, lines = scope.new_collection()
            counts = lines.flat_map(_split).count()
            probe = counts.inspect(first.append).inspect(second.append).probe()
            bare = lines.flat_map(_split).count().probe()  # nothing reads the data at all
            return session, probe, bare

        session, probe, bare = worker.dataflow(dataflow)
        _drive(worker, session, probe, initial, rounds, closed=True)
        assert bare.done()
        return first, second

    ((first, second),) = tp.execute(build)
    assert sorted(first) == _expected(initial, rounds)
    assert second == first  # the second inspection is an operator of its own, same updates


def test_the_collection_before_the_count_still_serves_other_consumers():
    def build(worker):
        words_seen: List[Tuple] = []
        counts_seen: List[Tuple] = []

        def dataflow(scope):
            session, lines = scope.new_collection()
            words = lines.flat_map(_split)
            words.count().inspect(counts_seen.append).probe()
            return session, words.inspect(words_seen.append).probe()

        session, probe = worker.dataflow(dataflow)
        session.insert((0, "x y x"))
        session.advance_to(1)
        session.remove((0, "x y x"))
        session.close()
        while worker.step():
            pass
        return words_seen, counts_seen

    ((words, counts),) = tp.execute(build)
    assert sorted(words) == sorted(
        [("x", 0, 1), ("y", 0, 1), ("x", 0, 1), ("x", 1, -1), ("y", 1, -1), ("x", 1, -1)]
    )
    assert counts == [(("x", 2), 0, 1), (("y", 1), 0, 1), (("x", 2), 1, -1), (("y", 1), 1, -1)]


def test_distinct_and_threshold_with_a_fused_inspection():
    def build(worker):
        d_seen: List[Tuple] = []
        h_seen: List[Tuple] = []

        def dataflow(scope):
            session, words = scope.new_collection()
            words.distinct().inspect(d_seen.append).probe()
            probe = words.threshold(lambda w, n: 1 if n >= 2 else 0).inspect(h_seen.append).probe()
            return session, probe

        session, probe = worker.dataflow(dataflow)
        session.insert("a")
        session.insert("a")
        session.insert("b")
        session.advance_to(1)
        session.remove("a")
        session.advance_to(2)
        session.remove("a")
        session.remove("b")
        session.close()
        while worker.step():
            pass
        return d_seen, h_seen

    ((d, h),) = tp.execute(build)
    assert d == [("a", 0, 1), ("b", 0, 1), ("a", 2, -1), ("b", 2, -1)]
    assert h == [("a", 0, 1), ("a", 1, -1)]


# ----------------------------------------------------------------------------- errors
def _run_failing(stage: Any, inspect: Any = None) -> str:
    def build(worker):
        def dataflow(scope):
            session, lines = scope.new_collection()
            counts = lines.flat_map(stage).count()
            if inspect is not None:
                counts = counts.inspect(inspect)
            return session, counts.probe()

        session, probe = worker.dataflow(dataflow)
        session.insert("fine words")
        session.insert("poison here")
        session.close()
        while worker.step():
            pass

    with pytest.raises((OperatorError, UnhashableDataError, WorkerError)) as info:
        tp.execute(build)
    return str(info.value)


def test_an_error_in_the_fused_chain_names_the_chain_and_the_record():
    def stage(line: str) -> List[str]:
        if "poison" in line:
            raise ValueError("poisoned line")
        return line.split()

    message = _run_failing(stage)
    assert "operator 'Linear[flat_map]'" in message
    assert "ValueError" in message and "poisoned line" in message
    assert "'poison here'" in message


def test_an_unhashable_record_out_of_the_fused_chain_is_named():
    message = _run_failing(lambda line: [[w] for w in line.split()])
    assert "not hashable" in message and "['fine']" in message


def test_an_error_in_a_fused_inspection_names_the_inspection():
    def boom(u: Any) -> None:
        if u[0][0] == "poison":
            raise KeyError("no poison")

    message = _run_failing(str.split, inspect=boom)
    assert "operator 'Linear[inspect]'" in message and "KeyError" in message


# ----------------------------------------------------------------------------- capabilities
@pytest.mark.parametrize("op", ["count", "distinct", "flat_map>count"])
@pytest.mark.parametrize("workers", [1, 2])
def test_an_update_ahead_of_its_message_time_does_not_hold_the_frontier_back(op, workers):
    """``update_at`` a later time arrives in a message at the session's time: when the input
    frontier passes the message time, the operator's capability moves up to the later time
    (it held the probe at the message time until the frontier passed 3)."""

    def build(worker):
        seen: List[Tuple] = []

        def dataflow(scope):
            session, records = scope.new_collection()
            if op == "count":
                out = records.count()
            elif op == "distinct":
                out = records.distinct()
            else:
                out = records.flat_map(lambda r: [r, r]).count()
            return session, out.inspect(seen.append).probe()

        session, probe = worker.dataflow(dataflow)
        if worker.index == 0:
            session.update_at("x", 3, 1)
        session.advance_to(1)
        session.flush()
        steps = 0
        while probe.less_than(1):
            assert steps < 50, f"probe held at {probe.frontier}"
            worker.step()
            steps += 1
        assert probe.frontier == [1] and not seen
        session.advance_to(4)
        session.flush()
        worker.step_until(probe, 4)
        return seen

    seen = [u for part in tp.execute(build, workers=workers) for u in part]
    expected = {
        "count": [(("x", 1), 3, 1)],
        "distinct": [("x", 3, 1)],
        "flat_map>count": [(("x", 2), 3, 1)],
    }[op]
    assert seen == expected
