"""Incremental reachability in an iterative scope (``benchmarks/reachability.py``): its fast
paths against from-scratch references. The spine's compaction pass at partially ordered times,
and the whole program with every change buffered before the first step, checked at every outer
time."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Dict

import pytest
from oracle.graphs import reachable
from support.dataflows import reachability

import timelypy as tp
from timelypy.differential.agent import TraceAgent
from timelypy.differential.trace import BatchBuilder, Spine
from timelypy.order import Product, order_for

PRODUCT = order_for(Product(0, 0))


def _insert(spine, updates, upper):
    data: Dict[Any, list] = {}
    for k, v, t, r in updates:
        data.setdefault(k, []).append((v, t, r))
    spine.new_batch(data, [upper])


def _assert_reads(spine, history, keys, s) -> None:
    """``spine.accumulate(key, s)`` equals the sum of ``history``'s updates at times <= ``s``."""
    for key in keys:
        want: Dict[Any, int] = {}
        for k, v, t, r in history:
            if k == key and PRODUCT.le(t, s):
                want[v] = want.get(v, 0) + r
        assert spine.accumulate(key, s) == {v: r for v, r in want.items() if r}, (key, s)


@pytest.mark.parametrize("seed", range(8))
def test_product_compaction_keeps_accumulations_and_consolidates(seed):
    """A full compaction pass at an antichain since: accumulations at every time at or beyond
    since are unchanged; a key with several updates is advanced and consolidated (at most one
    update per value and time, every time at or beyond since's meet); a key with one update
    keeps it."""
    rng = random.Random(seed)
    spine = Spine(PRODUCT, "w2")
    history = []
    for rnd in range(6):
        ups = [
            (
                rng.randrange(40),
                rng.randrange(2),
                Product(rnd, rng.randrange(4)),
                rng.choice((-1, 1, 1, 2)),
            )
            for _ in range(rng.randrange(5, 60))
        ]
        history.extend(ups)
        _insert(spine, ups, Product(rnd + 1, 0))
    before = {k: list(vals) for b in spine.batches for k, vals in b.items()}
    since = sorted({Product(rng.randrange(1, 6), rng.randrange(4)) for _ in range(3)})
    since = [f for f in since if not any(PRODUCT.le(g, f) and g != f for g in since)]
    agent = TraceAgent(spine, since=since, through_seq=float("inf"), explicit=True)
    spine.advance_writer(since)
    spine.hold_since([(PRODUCT.minimum, -1)])
    assert sorted(spine.since) == sorted(since)
    spine.compact()
    spine._check()
    m0 = min(f[0] for f in since)
    m1 = min(f[1] for f in since)
    for b in spine.batches:
        assert isinstance(b, BatchBuilder) and b.compacted == b.since
        for _, vals in b.items():
            if len(vals) > 1:
                assert len({(v, t) for v, t, _ in vals}) == len(vals)
                assert all(t[0] >= m0 and t[1] >= m1 for _, t, _ in vals)
            assert all(r for _, _, r in vals)
    if len(spine.batches) == 1:
        for key, vals in spine.batches[0].items():
            if len(vals) == 1 and len(before.get(key, ())) == 1:
                assert vals == before[key]
    for a in range(0, 8):
        for b in range(0, 5):
            s = Product(a, b)
            if not any(PRODUCT.le(f, s) for f in since):
                continue
            _assert_reads(spine, history, range(40), s)
    agent.close()


@pytest.mark.parametrize("seed", range(10))
def test_product_merges_keep_accumulations(seed):
    """Batches merged one by one into an owned predecessor at an antichain since (the merge's
    inline case: one update of a key on each side, equal or distinct values, cancelling or
    not): every accumulation at or beyond since is the history's, counts are exact, and two
    updates of one value whose advanced times are equal end as one update."""
    rng = random.Random(seed)
    spine = Spine(PRODUCT, "merge")
    agent = TraceAgent(spine, through_seq=0)
    history = []
    since = [PRODUCT.minimum]
    for rnd in range(30):
        ups = [
            (
                rng.randrange(25),
                rng.choice(((), (), 1)),
                Product(rnd, rng.randrange(5)),
                rng.choice((-1, 1)),
            )
            for _ in range(rng.randrange(1, 8))
        ]
        history.extend(ups)
        _insert(spine, ups, Product(rnd + 1, 0))
        if rng.random() < 0.5:
            cand = sorted({Product(rng.randrange(rnd + 1), rng.randrange(5)) for _ in range(2)})
            cand = [f for f in cand if not any(PRODUCT.le(g, f) and g != f for g in cand)]
            if all(any(PRODUCT.le(f, g) for f in since) for g in cand):
                agent.set_logical_compaction(cand)
                since = cand
        spine.advance_writer([Product(rnd + 1, 0)])
        agent.acknowledge(spine.seq)
        spine.maintain()
        spine._check()
        for s in [*since, Product(rnd + 1, 0), Product(rnd, 4), Product(rnd + 2, 2)]:
            if not any(PRODUCT.le(f, s) for f in since):
                continue
            _assert_reads(spine, history, range(25), s)
    agent.close()


def test_product_merge_consolidates_one_update_each_side():
    spine = Spine(PRODUCT, "one")
    agent = TraceAgent(spine, through_seq=0)
    _insert(
        spine,
        [
            (1, (), Product(0, 1), 1),
            (2, (), Product(0, 1), 1),
            (3, "a", Product(0, 0), 1),
            (4, (), Product(0, 3), 1),
        ],
        Product(1, 0),
    )
    agent.set_logical_compaction([Product(1, 2)])
    spine.advance_writer([Product(1, 2)])
    agent.acknowledge(spine.seq)
    spine.maintain()
    _insert(
        spine,
        [
            (1, (), Product(1, 2), -1),
            (2, (), Product(1, 2), 1),
            (3, "b", Product(1, 2), 1),
            (4, (), Product(1, 2), 1),
        ],
        Product(2, 0),
    )
    agent.acknowledge(spine.seq)
    spine.maintain()
    spine._check()
    (batch,) = spine.batches
    assert 1 not in batch  # cancelled at (1, 2)
    assert batch.get(2) == [((), Product(1, 2), 2)]  # consolidated at (1, 2)
    # Keys 3 and 4 keep two updates each: a kernel may leave their times as they were or
    # advance them to since (``TIMELYPY_KERNELS`` swaps in the oracle, which advances them);
    # either way they read alike at every time from since on.
    assert sorted(v for v, _, _ in batch.get(3)) == ["a", "b"]
    assert len(batch.get(4)) == 2  # (1, 3) != (1, 2): nothing to consolidate
    for s in [Product(1, 2), Product(1, 3), Product(2, 2), Product(3, 5)]:
        assert spine.accumulate(3, s) == {"a": 1, "b": 1}
    assert spine.accumulate(4, Product(1, 3)) == {(): 2}
    assert spine.accumulate(4, Product(1, 2)) == {(): 1}
    assert spine.accumulate(4, Product(2, 2)) == {(): 1}
    agent.close()


def _graph(seed, n, rounds, per_round):
    rng = random.Random(seed)
    edges = set()
    while len(edges) < 2 * n:
        edges.add((rng.randrange(n), rng.randrange(n)))
    changes, current = [], set(edges)
    for t in range(1, rounds + 1):
        batch = []
        for _ in range(per_round):
            old = rng.choice(sorted(current))
            new = (rng.randrange(n), rng.randrange(n))
            if new in current:
                continue
            current.discard(old)
            current.add(new)
            batch.append((old, new))
        changes.append((t, batch))
    return edges, changes


def _run(edges, changes, roots, workers=1):
    def build(worker):
        def dataflow(scope):
            es, e = scope.new_collection()
            rs, r = scope.new_collection()
            out = reachability(e, r)
            return es, rs, out.capture()

        es, rs, cap = worker.dataflow(dataflow)
        if worker.index == 0:
            for x in roots:
                rs.insert(x)
        rs.close()
        for i, edge in enumerate(sorted(edges)):
            if i % worker.peers == worker.index:
                es.insert(edge)
        es.advance_to(1)
        k = 0
        for t, batch in changes:
            for old, new in batch:
                if k % worker.peers == worker.index:
                    es.remove(old)
                    es.insert(new)
                k += 1
            es.advance_to(t + 1)
        es.close()
        worker.step_until_done(timeout=120)
        return cap.consolidated()

    return [u for part in tp.execute(build, workers=workers, backend="inline") for u in part]


@pytest.mark.parametrize(
    "seed,n,rounds,per_round",
    [(0, 60, 40, 1), (1, 300, 30, 3), (2, 1500, 25, 4), (3, 2500, 12, 20)],
)
def test_buffered_reachability_is_exact_at_every_time(seed, n, rounds, per_round):
    """The reachability benchmark's program, every change buffered before the first step: the
    output's accumulation at every outer time is the reachable set of that time's graph, each
    node once."""
    edges, changes = _graph(seed, n, rounds, per_round)
    roots = (1, 2)
    updates = _run(edges, changes, roots)
    state = set(edges)
    expect = [reachable(state, roots)]
    for _, batch in changes:
        for old, new in batch:
            state.discard(old)
            state.add(new)
        expect.append(reachable(state, roots))
    for t, want in enumerate(expect):
        acc: Dict[Any, int] = defaultdict(int)
        for x, time, d in updates:
            if time <= t:
                acc[x] += d
        assert all(c in (0, 1) for c in acc.values()), t
        assert {x for x, c in acc.items() if c} == want, t


def test_buffered_reachability_on_two_workers():
    edges, changes = _graph(5, 800, 15, 5)
    roots = (1,)
    one = sorted(_run(edges, changes, roots, workers=1))
    two = _run(edges, changes, roots, workers=2)
    acc: Dict[Any, int] = defaultdict(int)
    for x, t, d in two:
        acc[(x, t)] += d
    assert sorted((x, t, d) for (x, t), d in acc.items() if d) == one


@pytest.mark.parametrize("schedule", ["buffered", "each", "random"])
@pytest.mark.parametrize("path", ["collection", "arranged", "updates"])
@pytest.mark.parametrize("seed", range(12))
def test_distinct_at_product_times_long_histories(seed, path, schedule):
    """``distinct`` at Product times (its inline evaluation) with long histories per key (so
    histories are compacted and keys carry several pending times): the content at every time
    of the grid equals the from-scratch reference."""
    from tests.differential.test_reduce_product import (
        THRESHOLD_PATHS,
        _expected,
        _random_updates,
        _run,
        _threshold_reference,
    )

    rng = random.Random(seed * 31 + len(path) + len(schedule))
    updates = _random_updates(rng, keyed=False, n=rng.randrange(40, 160))
    got = _run(updates, lambda c: THRESHOLD_PATHS[path](c, None), schedule, seed)
    assert got == _expected(updates, _threshold_reference(None))


def test_a_run_of_batches_merges_in_time_order_into_its_first():
    """A large batch behind small ones (an iteration's round behind its stragglers) is merged
    once, with them, into the owned batch before them; accumulations are unchanged."""
    from timelypy.instrument import EventLog, Instruments, SpineMerged

    hub = Instruments(0)
    log = hub.add(EventLog(kinds=(SpineMerged,)))
    spine = Spine(PRODUCT, "run", instruments=hub)
    agent = TraceAgent(spine, through_seq=0)
    history = []
    big = [(k, (), Product(0, k % 7), 1) for k in range(200)]
    history.extend(big)
    _insert(spine, big, Product(1, 0))
    agent.acknowledge(spine.seq)
    spine.maintain()
    assert len(spine.batches) == 1
    for rnd, size in enumerate((1, 2, 150), start=1):
        ups = [(k, (), Product(rnd, k % 3), -1 if k % 5 == 0 else 1) for k in range(size)]
        history.extend(ups)
        _insert(spine, ups, Product(rnd + 1, 0))
    assert len(spine.batches) == 4  # unseen by the reader: not merged
    log.clear()
    agent.acknowledge(spine.seq)
    spine.maintain()
    spine._check()
    assert len(spine.batches) == 1
    assert [e.sizes[1] for e in log.events] == [1, 2, 150]  # each batch merged once
    assert log.events[-1].updates == spine.stored_updates()
    for s in (Product(4, 0), Product(4, 2), Product(5, 9), Product(9, 1)):
        for key in range(200):
            want = sum(r for k, _, t, r in history if k == key and PRODUCT.le(t, s))
            assert spine.accumulate(key, s) == ({(): want} if want else {})
    agent.close()


@pytest.mark.parametrize("seed", range(6))
def test_compaction_tracks_the_keys_with_several_updates(seed):
    """After the first compaction pass of an owned batch at Product times, merges keep the set
    of its keys with other than one update, and later passes visit only them: the set always
    equals a scan, every such key ends consolidated, accumulations are the history's."""
    rng = random.Random(seed)
    spine = Spine(PRODUCT, "several")
    agent = TraceAgent(spine, through_seq=0)
    history = []
    since = [PRODUCT.minimum]
    for rnd in range(40):
        ups = [
            (
                rng.randrange(60),
                rng.choice(((), (), 2)),
                Product(rnd, rng.randrange(4)),
                rng.choice((-1, 1, 1)),
            )
            for _ in range(rng.randrange(1, 20))
        ]
        history.extend(ups)
        _insert(spine, ups, Product(rnd + 1, 0))
        if rng.random() < 0.6:
            f = [Product(max(0, rnd - rng.randrange(3)), rng.randrange(3))]
            if all(PRODUCT.le(g, f[0]) for g in since):
                agent.set_logical_compaction(f)
                since = f
        spine.advance_writer([Product(rnd + 1, 0)])
        agent.acknowledge(spine.seq)
        spine.maintain()
        if rng.random() < 0.3:
            spine.compact()
            for b in spine.batches:
                if isinstance(b, BatchBuilder):
                    scan = {k for k, vals in b.items() if len(vals) != 1}
                    assert b.several == scan
                    for k in scan:
                        vals = b.get(k)
                        assert len({(v, t) for v, t, _ in vals}) == len(vals)
        for b in spine.batches:
            if isinstance(b, BatchBuilder) and b.several is not None:
                assert b.several == {k for k, vals in b.items() if len(vals) != 1}
        spine._check()
        s = Product(rnd + 1, 0)
        _assert_reads(spine, history, range(60), s)
    agent.close()


def test_small_batches_wait_beside_a_much_larger_owned_batch():
    """A batch far smaller than the owned batch before it is not merged into it at once (a
    merge into a large batch visits cold memory per update); small batches merge among
    themselves and join the large one once they are a sixteenth of it. Reads are unchanged."""
    from timelypy.differential.trace.spine import _OWNED_RATIO

    spine = Spine(PRODUCT, "ratio")
    agent = TraceAgent(spine, through_seq=0)
    history = []
    n = 64 * _OWNED_RATIO
    first = [(k, (), Product(0, 0), 1) for k in range(n)]
    history.extend(first)
    _insert(spine, first, Product(1, 0))
    agent.acknowledge(spine.seq)
    spine.maintain()
    spine.compact()
    (big,) = spine.batches
    assert isinstance(big, BatchBuilder)
    kept_apart = merged_back = 0
    for rnd in range(1, 41):
        ups = [(n + rnd * 8 + j, (), Product(rnd, 0), 1) for j in range(8)]
        history.extend(ups)
        _insert(spine, ups, Product(rnd + 1, 0))
        agent.acknowledge(spine.seq)
        spine.maintain()
        spine._check()
        assert spine.batches[0] is big  # owned: merged into in place
        if len(spine.batches) > 1:
            kept_apart += 1
            small = sum(b.count for b in spine.batches[1:])
            assert small * _OWNED_RATIO < big.count
        else:
            merged_back += 1
        s = Product(rnd + 1, 0)
        for key in range(0, n + rnd * 8 + 8, 5):
            want = sum(r for k, _, t, r in history if k == key and PRODUCT.le(t, s))
            assert spine.accumulate(key, s) == ({(): want} if want else {})
    assert kept_apart and merged_back
    agent.close()


def test_join_with_a_trace_of_two_batches_matches_from_scratch():
    """A trace made of a large batch and small ones beside it (the spine keeps them apart):
    the join reads both batches of a key (in one, the other, or both) and its output, at every
    step of a closed loop, is the from-scratch join."""
    rng = random.Random(7)
    big = [(rng.randrange(40), rng.randrange(50)) for _ in range(3000)]
    steps = []
    for _ in range(30):
        steps.append(
            (
                [(rng.randrange(40), rng.randrange(50)) for _ in range(3)],
                [(rng.randrange(40), rng.randrange(9)) for _ in range(4)],
            )
        )

    def build(worker):
        def dataflow(scope):
            a_in, a = scope.new_collection()
            b_in, b = scope.new_collection()
            out = a.join(b)
            return a_in, b_in, out.capture(), out.probe()

        a_in, b_in, cap, probe = worker.dataflow(dataflow)
        for r in big:
            a_in.insert(r)
        a_in.advance_to(1)
        b_in.advance_to(1)
        a_in.flush()
        b_in.flush()
        worker.step_until(probe, 1, timeout=60)
        seen = []
        for t, (adds, bs) in enumerate(steps, start=1):
            for r in adds:
                a_in.insert(r)
            for r in bs:
                b_in.insert(r)
            a_in.advance_to(t + 1)
            b_in.advance_to(t + 1)
            a_in.flush()
            b_in.flush()
            worker.step_until(probe, t + 1, timeout=60)
            seen.append(cap.at(t))
        return seen

    seen = tp.execute(build, workers=1, backend="inline")[0]
    a_all, b_all = list(big), []
    for (adds, bs), got in zip(steps, seen):
        a_all.extend(adds)
        b_all.extend(bs)
        by_key: Dict[Any, list] = defaultdict(list)
        for k, w in b_all:
            by_key[k].append(w)
        want: Dict[Any, int] = defaultdict(int)
        for k, v in a_all:
            for w in by_key.get(k, ()):
                want[(k, (v, w))] += 1
        assert got == {r: c for r, c in want.items() if c}
