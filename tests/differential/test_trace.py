"""Traces: sequential access by key, value, time; compaction keeps accumulations; the spine's
invariants under random insert / merge / compact sequences; merge events."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import timelypy as tp
from timelypy.differential.agent import TraceAgent
from timelypy.differential.consolidation import advance_time
from timelypy.differential.trace import Batch, Spine
from timelypy.instrument import EventLog, Instruments, SpineMerged
from timelypy.order import INT_ORDER, Product, order_for


def _insert(spine, updates, upper):
    data = {}
    for k, v, t, r in updates:
        data.setdefault(k, []).append((v, t, r))
    spine.new_batch(data, [upper])


updates_strategy = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(-2, 2).filter(bool)), max_size=12
)


@settings(max_examples=150, deadline=None)
@given(st.lists(updates_strategy, min_size=1, max_size=8), st.integers(0, 8))
def test_compaction_keeps_accumulations_at_and_beyond_since(rounds, since):
    """I9: after merging and compacting with since = F, for every s >= F and every (key, val),
    the sum of diffs at times <= s is unchanged."""
    spine = Spine(INT_ORDER, "t")
    history = []
    for i, ups in enumerate(rounds):
        batch = [(k, v, i, r) for k, v, r in ups]
        history.extend(batch)
        _insert(spine, batch, i + 1)
    handle = TraceAgent(spine, since=[since], through_seq=float("inf"), explicit=True)
    spine.advance_writer([since])
    # Drop the initial hold at the minimum so that `since` governs.
    spine.hold_since([(0, -1)])
    spine.compact()
    spine._check()
    for s in range(since, len(rounds) + 2):
        for key in range(5):
            expected = {}
            for k, v, t, r in history:
                if k == key and t <= s:
                    expected[v] = expected.get(v, 0) + r
            expected = {v: r for v, r in expected.items() if r}
            assert spine.accumulate(key, s) == expected
    # Stored times are at or beyond since (they were advanced).
    for b in spine.batches:
        for vals in (vals for _, vals in b.items()):
            for _, t, _ in vals:
                assert t >= min(since, t)
    handle.close()


def test_cursor_is_sorted_by_key_value_time():
    spine = Spine(INT_ORDER, "t")
    _insert(spine, [(3, "b", 0, 1), (1, "z", 0, 1), (1, "a", 0, 2)], 1)
    _insert(spine, [(1, "a", 1, -1), (0, "q", 1, 1), (2, "c", 1, 1)], 2)
    assert list(spine.cursor()) == [
        (0, [("q", [(1, 1)])]),
        (1, [("a", [(0, 2), (1, -1)]), ("z", [(0, 1)])]),
        (2, [("c", [(1, 1)])]),
        (3, [("b", [(0, 1)])]),
    ]


@settings(max_examples=100, deadline=None)
@given(
    st.tuples(st.integers(0, 6), st.integers(0, 6)),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=3),
)
def test_advance_time_product_guarantee(t, frontier):
    """advance_by(t, F) <= s exactly when t <= s, for every s at or beyond F."""
    order = order_for(Product(0, 0))
    t = Product(*t)
    frontier = [Product(*f) for f in frontier]
    adv = advance_time(t, frontier, order.join, order.meet)
    for a in range(8):
        for b in range(8):
            s = Product(a, b)
            if any(order.le(f, s) for f in frontier):
                assert order.le(adv, s) == order.le(t, s)


# --------------------------------------------------------------------------- spine stress test
def _spine_stress(seed: int, order, time_of, steps: int = 300) -> None:
    """Random inserts, empty seals, reader holds (logical and physical), merges and compactions,
    in the style of sortedcontainers' stress tests: the invariants (`Spine._check`) and every
    accumulation a reader may still ask for are checked after every step."""
    rng = random.Random(seed)
    spine = Spine(order, f"stress{seed}")
    history = []  # every (key, val, time, diff) inserted
    round_ = 0  # batches cover the rounds [round_, next round)
    agents = []
    for _ in range(steps):
        op = rng.random()
        if op < 0.45:
            size = rng.randrange(0, 12)
            updates = [
                (
                    rng.randrange(6),
                    rng.randrange(3),
                    time_of(round_, rng.randrange(3)),
                    rng.choice((-2, -1, 1, 1, 2)),
                )
                for _ in range(size)
            ]
            history.extend(updates)
            round_ += 1
            _insert(spine, updates, time_of(round_, 0))
        elif op < 0.55:
            round_ += rng.randrange(1, 3)
            spine.seal([time_of(round_, 0)])
        elif op < 0.65:
            agents.append(TraceAgent(spine, through_seq=rng.randrange(spine.seq + 1)))
        elif op < 0.75 and agents:
            rng.choice(agents).acknowledge(spine.seq)
            spine.maintain()
        elif op < 0.85 and agents:
            a = rng.choice(agents)
            a.set_logical_compaction([time_of(rng.randrange(round_ + 1), rng.randrange(3))])
        elif op < 0.9 and agents:
            agents.pop(rng.randrange(len(agents))).close()
        elif op < 0.95:
            spine.advance_writer([time_of(round_, 0)])
        else:
            spine.compact()
        spine._check()
        _check_reads(spine, order, history, round_, time_of, rng)
    for a in agents:
        a.close()
    spine.compact()
    spine._check()
    _check_reads(spine, order, history, round_, time_of, rng)


def _check_reads(spine, order, history, round_, time_of, rng) -> None:
    """Every key's accumulation at times at or beyond since (the since frontier itself, the
    current round, and a few random times) equals the history's."""
    since = spine.since
    times = list(since) + [time_of(round_ + 1, 0)]
    times += [time_of(rng.randrange(round_ + 2), rng.randrange(3)) for _ in range(3)]
    for s in times:
        if not any(order.le(f, s) for f in since):
            continue
        expected = {}
        for k, v, t, r in history:
            if order.le(t, s):
                expected[(k, v)] = expected.get((k, v), 0) + r
        for key in range(6):
            want = {v: r for (k, v), r in expected.items() if k == key and r}
            assert spine.accumulate(key, s) == want, (key, s)


@pytest.mark.parametrize("seed", range(6))
def test_spine_stress_int_times(seed):
    _spine_stress(seed, INT_ORDER, lambda a, b: a)


@pytest.mark.parametrize("seed", range(4))
def test_spine_stress_product_times(seed):
    _spine_stress(seed, order_for(Product(0, 0)), lambda a, b: Product(a, b), steps=150)


def test_check_catches_batches_that_do_not_tile_time():
    spine = Spine(INT_ORDER, "t")
    TraceAgent(spine)  # a reader that has seen nothing: no merges
    _insert(spine, [(1, "a", 0, 1)], 1)
    spine.insert(Batch({2: [("b", 3, 1)]}, [3], [4], seq=spine.seq + 1))
    with pytest.raises(AssertionError):
        spine._check()


def test_batches_carry_their_description():
    spine = Spine(INT_ORDER, "t")
    reader = TraceAgent(spine)  # it has seen nothing: no merges yet
    _insert(spine, [(1, "a", 0, 1)], 1)
    spine.seal([3])  # an empty region: the next batch starts where the last one ended
    _insert(spine, [(2, "b", 3, 1)], 4)
    first, second = spine.batches
    assert (first.lower, first.upper, first.since) == ([0], [1], [0])
    assert (second.lower, second.upper) == ([1], [4])
    spine._check()
    reader.set_logical_compaction([2])
    reader.acknowledge(spine.seq)
    spine.maintain()
    (merged,) = spine.batches
    assert (merged.lower, merged.upper, merged.since) == ([0], [4], [0])  # the writer holds 0
    spine.advance_writer([4])
    spine.compact()
    assert spine.batches[0].since == [2]
    assert dict(spine.batches[0].items()) == {1: [("a", 2, 1)], 2: [("b", 3, 1)]}
    spine._check()


# --------------------------------------------------------------------------- cursor
def test_cursor_steps_through_keys_values_and_times():
    spine = Spine(INT_ORDER, "t")
    _insert(
        spine, [(3, "b", 0, 1), (1, "z", 0, 1), (1, "a", 0, 2), (5, "x", 0, 1), (5, "x", 0, -1)], 1
    )
    _insert(spine, [(1, "a", 1, -1), (2, "c", 1, 1)], 2)
    cursor = spine.cursor()
    seen = []
    while cursor.key_valid():
        while cursor.val_valid():
            cursor.map_times(lambda t, r: seen.append((cursor.key(), cursor.val(), t, r)))
            cursor.step_val()
        cursor.step_key()
    # key 5 cancels out entirely and is skipped
    assert seen == [(1, "a", 0, 2), (1, "a", 1, -1), (1, "z", 0, 1), (2, "c", 1, 1), (3, "b", 0, 1)]
    cursor.rewind_keys()
    cursor.seek_key(2)
    assert cursor.key() == 2
    cursor.seek_key(4)
    assert not cursor.key_valid()
    cursor.rewind_keys()
    cursor.seek_val("b")
    assert cursor.val() == "z"
    cursor.rewind_vals()
    assert cursor.val() == "a"


# --------------------------------------------------------------------------- instruments
def test_spine_reports_merges_to_its_instruments():
    hub = Instruments(0)
    log = hub.add(EventLog(kinds=(SpineMerged,)))
    spine = Spine(INT_ORDER, "t", instruments=hub, worker=0)
    for i in range(8):
        _insert(spine, [(i, "v", i, 1)], i + 1)  # distinct keys: merges never consolidate
    events = log.events
    assert events and all(e.trace == "t" and e.worker == 0 for e in events)
    for e in events:
        assert e.result == sum(e.sizes) and min(e.sizes) >= 1
    assert events[-1].updates == spine.stored_updates() == 8
    assert events[-1].batches == len(spine.batches)
    hub.remove(log)
    _insert(spine, [(9, "v", 8, 1)], 9)
    assert len(log.events) == len(events)  # no sink, no event


def test_spine_merged_events_on_a_worker():
    """A sink registered on a worker sees the merges of its arrangements, with sizes adding up
    (cancelling updates make the merged batch smaller)."""

    def build(worker):
        log = worker.instruments.add(EventLog(kinds=(SpineMerged,)))

        def dataflow(scope):
            session, records = scope.new_collection(name="in")
            arranged = records.arrange_by_key(name="Indexed")
            return session, arranged, arranged.stream.probe()

        session, arranged, probe = worker.dataflow(dataflow)
        for t in range(6):
            session.advance_to(t)
            session.insert((t, "x"))
            if t:
                session.remove((t - 1, "x"))
            session.advance_to(t + 1)
            session.flush()
            worker.step_until(probe, t + 1, timeout=30)
        events = [e for e in log.events if e.trace == "Indexed"]
        return events, arranged.spine.stored_updates(), len(arranged.spine.batches)

    ((events, stored, batches),) = tp.execute(build)
    assert events
    for e in events:
        assert e.worker == 0 and e.result <= sum(e.sizes) and min(e.sizes) >= 1
    assert events[-1].updates == stored and events[-1].batches == batches
