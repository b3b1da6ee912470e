"""A join lets go of a trace it will not read again: once one input is complete and its last
batch joined, the other input's trace is only ever read by that input's batches, so the join
closes its handle (as differential-dataflow's join drops it). A trace the join arranged for
itself (``Collection.join`` / ``semijoin``) then has no reader left: it is no longer merged,
compacted nor extended, and its batches go when the worker is next quiet. An arrangement handed
to the user (``arrange_by_key``) stays maintained. The output must stay exact at every time."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Dict, List, Tuple

import pytest

import timelypy as tp
from timelypy.differential.agent import TraceAgent
from timelypy.errors import TimelyError

Update = Tuple[Tuple[int, int], int]


def _rounds(seed: int, rounds: int) -> List[List[Update]]:
    """Random ``((key, value), diff)`` changes per time: inserts and removals of live records."""
    rng = random.Random(seed)
    live: Counter = Counter()
    out = []
    for _ in range(rounds):
        batch = []
        for _ in range(rng.randint(0, 6)):
            if live and rng.random() < 0.4:
                record = rng.choice(sorted(live))
                diff = -1
            else:
                record, diff = (rng.randrange(8), rng.randrange(5)), 1
            live[record] += diff
            if not live[record]:
                del live[record]
            batch.append((record, diff))
        out.append(batch)
    return out


def _join_at(left: Counter, right: Counter) -> Dict[Any, int]:
    """The from-scratch join of two accumulated collections ``{(key, val): count}``."""
    by_key: Dict[int, List[Tuple[int, int]]] = {}
    for (k, v), c in right.items():
        by_key.setdefault(k, []).append((v, c))
    out: Counter = Counter()
    for (k, v), c in left.items():
        for v2, c2 in by_key.get(k, ()):
            out[(k, (v, v2))] += c * c2
    return {r: c for r, c in out.items() if c}


def _spines(worker: Any) -> List[Any]:
    return [op.spine for op in worker.dataflows()[0].children if hasattr(op, "spine")]


def _run(
    seed: int, workers: int, static_first: bool, shared: bool, close_at: int = 3, rounds: int = 25
) -> List[Dict[str, Any]]:
    """``stream`` joined with ``static``; ``static`` closes after ``close_at`` times while
    ``stream`` keeps changing. ``shared``: the stream is arranged by the user."""
    static_rounds = _rounds(seed, close_at)
    stream_rounds = _rounds(seed + 1000, rounds)

    def build(worker: Any) -> Dict[str, Any]:
        def dataflow(scope: Any) -> Any:
            s_static, static = scope.new_collection()
            s_stream, stream = scope.new_collection()
            left = stream.arrange_by_key() if shared else stream
            joined = static.join(left) if static_first else left.join(static)
            return s_static, s_stream, left, joined.capture(), joined.probe()

        s_static, s_stream, left, out, probe = worker.dataflow(dataflow)
        # (the join arranges its inputs in the order it names them)
        stream_spine = left.spine if shared else _spines(worker)[1 if static_first else 0]
        sizes_after_close = []  # the stream trace's size at each time once let go
        for t in range(rounds):
            for i, (record, diff) in enumerate(stream_rounds[t]):
                if i % worker.peers == worker.index:
                    s_stream.update(record, diff)
            if t < close_at:
                for i, (record, diff) in enumerate(static_rounds[t]):
                    if i % worker.peers == worker.index:
                        s_static.update(record, diff)
            s_stream.advance_to(t + 1)
            if t + 1 == close_at:
                s_static.close()
            elif t + 1 < close_at:
                s_static.advance_to(t + 1)
            s_stream.flush()
            worker.step_until(probe, t + 1)
            if stream_spine.abandoned:
                sizes_after_close.append(stream_spine.stored_updates())
        result = {
            "out": out,
            "abandoned": stream_spine.abandoned,
            "dropped": stream_spine.dropped,
            "sizes": sizes_after_close,
            "lookup": left.lookup(0) if shared else None,
        }
        s_stream.close()
        worker.step_until_done()
        return result

    results = tp.execute(build, workers=workers)
    for t in range(rounds):
        static = Counter()
        for batch in static_rounds[: min(t + 1, close_at)]:
            for record, diff in batch:
                static[record] += diff
        stream = Counter()
        for batch in stream_rounds[: t + 1]:
            for record, diff in batch:
                stream[record] += diff
        expected = _join_at(static, stream) if static_first else _join_at(stream, static)
        got: Counter = Counter()
        for r in results:
            for record, c in r["out"].at(t).items():
                got[record] += c
        assert {k: v for k, v in got.items() if v} == expected, f"time {t}"
    return results


@pytest.mark.parametrize("static_first", [False, True])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("seed", range(4))
def test_private_trace_is_let_go_when_the_other_input_completes(seed, workers, static_first):
    results = _run(seed, workers, static_first, shared=False)
    for r in results:
        assert r["abandoned"], "the stream's private trace is still maintained"
        # Let go at the join's first activation after the static input completed (the next
        # batch of the stream), dropped when the worker was next quiet (the end of that step:
        # this driver steps each time to the end), never extended again.
        assert r["dropped"] and len(r["sizes"]) >= 15 and set(r["sizes"]) == {0}, r["sizes"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_users_arrangement_stays_maintained(workers):
    results = _run(7, workers, static_first=False, shared=True)
    stream = Counter()
    for batch in _rounds(7 + 1000, 25):
        for record, diff in batch:
            stream[record] += diff
    looked_up: Counter = Counter()
    for r in results:
        assert not r["abandoned"]
        looked_up.update(r["lookup"])
    assert {v: c for v, c in looked_up.items() if c} == {
        v: c for (k, v), c in stream.items() if k == 0 and c
    }


def test_a_handle_on_a_let_go_trace_is_refused():
    def build(worker: Any) -> str:
        def dataflow(scope: Any) -> Any:
            s_a, a = scope.new_collection()
            s_b, b = scope.new_collection()
            return s_a, s_b, a.join(b).probe()

        s_a, s_b, probe = worker.dataflow(dataflow)
        s_a.insert((1, 2))
        s_b.insert((1, 3))
        s_a.close()
        s_b.advance_to(1)
        s_b.flush()
        worker.step_until(probe, 1)
        s_b.insert((1, 4))  # a batch of b: the join runs and lets trace b go
        s_b.advance_to(2)
        s_b.flush()
        worker.step_until(probe, 2)
        let_go = [s for s in _spines(worker) if s.abandoned]
        assert len(let_go) == 1 and let_go[0].private
        with pytest.raises(TimelyError, match="no longer maintained"):
            TraceAgent(let_go[0])
        s_b.close()
        worker.step_until_done()
        return let_go[0].name

    assert tp.execute(build, workers=1) == ["ArrangeByKey"]
