"""Arrangements (the Differential Dataflow book): sharing, wrappers, scopes, traces, compaction.

* one arrangement serves many operators (counted in ``scope.describe()``);
* ``Arranged.filter`` is a wrapper (no new arrange operator) equal to filter-then-join;
* ``Arranged.enter`` brings an arrangement into an iterative scope (the book's reachability);
* a trace exported from one dataflow and imported into another gives what one dataflow gives,
  including updates made after the import;
* the exported handle's logical compaction holds back, then allows, compaction;
* compaction is real: 10^5 changes through skip-level keep every trace near the live data;
* chains of linear operators are fused into one ``Linear[...]`` operator.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any, Dict, Iterable, List, Set, Tuple

import pytest
from support.paths import EXAMPLES

import timelypy as tp

pytestmark = pytest.mark.timeout(120)


def operators_named(describe: str, name: str) -> int:
    return len(re.findall(rf"^\s*\[\d+\] {re.escape(name)}$", describe, re.M))


def arrange_operators(describe: str) -> int:
    return len(re.findall(r"^\s*\[\d+\] Arrange", describe, re.M))


def accumulate(updates: Iterable[Tuple[Any, Any, int]], t: int) -> Dict[Any, int]:
    acc: Dict[Any, int] = {}
    for d, t1, r in updates:
        if t1 <= t:
            acc[d] = acc.get(d, 0) + r
    return {d: r for d, r in acc.items() if r}


def random_script(seed: int, rounds: int, people: int = 8, per_round: int = 6):
    """Per round, a list of (pair, diff) changes to a set of pairs (never negative)."""
    rng = random.Random(seed)
    current: Set[Tuple[int, int]] = set()
    script: List[List[Tuple[Tuple[int, int], int]]] = []
    for _ in range(rounds):
        changes = []
        for _ in range(per_round):
            p = (rng.randrange(people), rng.randrange(people))
            if p in current:
                current.discard(p)
                changes.append((p, -1))
            else:
                current.add(p)
                changes.append((p, +1))
        script.append(changes)
    return script


def state_at(script, t: int) -> Set[Tuple[int, int]]:
    acc: Counter = Counter()
    for changes in script[: t + 1]:
        for p, d in changes:
            acc[p] += d
    return {p for p, c in acc.items() if c > 0}


# --------------------------------------------------------------------------- sharing
def test_one_arrangement_serves_many_joins():
    readers = 10

    def build(worker):
        def dataflow(scope):
            session, knows = scope.new_collection(name="knows")
            arranged = knows.arrange_by_key()
            outs = [
                arranged.join_core(arranged, lambda k, v1, v2, i=i: [(i, k, v1, v2)])
                for i in range(readers)
            ]
            return session, [o.capture() for o in outs], scope.describe()

        session, caps, describe = worker.dataflow(dataflow)
        script = random_script(1, 6)
        for t, changes in enumerate(script):
            session.advance_to(t)
            for p, d in changes:
                session.update(p, d)
        session.close()
        return caps, describe, script

    ((caps, describe, script),) = tp.execute(build)
    assert operators_named(describe, "ArrangeByKey") == 1
    assert operators_named(describe, "JoinCore") == readers
    for i, cap in enumerate(caps):
        for t in range(len(script)):
            knows = state_at(script, t)
            expected = {(i, x, y, z): 1 for x, y in knows for x2, z in knows if x == x2}
            assert cap.at(t) == expected, (i, t)


def test_book_by_self_example_uses_two_arrangements_of_knows():
    """The book's "arrangement by self" example: six uses of `knows`, two arrangements of it;
    the naive version arranges `knows` once per use."""
    import importlib.util

    path = EXAMPLES / "friends_of_friends.py"
    spec = importlib.util.spec_from_file_location("examples_fof_for_arrangements", path)
    fof = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fof)

    def naive_triangles(query, knows):
        keys = knows  # used as semijoin keys, 4 times
        return (
            query.join_map(knows, lambda x, q, y: (y, (x, q)))
            .join_map(knows, lambda y, xq, z: (xq[1], (xq[0], y, z)))
            .map(lambda r: ((r[1][0], r[1][2]), (r[0], r[1][1])))
            .semijoin(keys)
            .map(lambda r: ((r[1][1], r[0][1]), (r[1][0], r[0][0])))
            .semijoin(keys)
            .map(lambda r: ((r[0][1], r[1][1]), (r[1][0], r[0][0])))
            .semijoin(keys)
            .map(lambda r: ((r[1][1], r[0][1]), (r[1][0], r[0][0])))
            .semijoin(keys)
            .map(lambda r: (r[1][0], (r[0][1], r[0][0], r[1][1])))
        )

    def build(worker):
        def shared(scope):
            ks, knows = scope.new_collection(name="knows")
            qs, query = scope.new_collection(name="query")
            out = fof.triangles(
                query,
                knows.arrange_by_key(name="KnowsByKey"),
                knows.arrange_by_self(name="KnowsBySelf"),
            )
            return ks, qs, out.capture(), scope.describe()

        def naive(scope):
            ks, knows = scope.new_collection(name="knows")
            qs, query = scope.new_collection(name="query")
            out = naive_triangles(query, knows)
            return ks, qs, out.capture(), scope.describe()

        ks1, qs1, cap1, d1 = worker.dataflow(shared)
        ks2, qs2, cap2, d2 = worker.dataflow(naive)
        rng = random.Random(4)
        knows_script = random_script(5, 5, people=6, per_round=10)
        queries = []
        for t, changes in enumerate(knows_script):
            for s in (ks1, qs1, ks2, qs2):
                s.advance_to(t)
            for p, d in changes:
                ks1.update(p, d)
                ks2.update(p, d)
            q = (rng.randrange(6), t)
            queries.append(q)
            qs1.insert(q)
            qs2.insert(q)
        for s in (ks1, qs1, ks2, qs2):
            s.close()
        return cap1, cap2, d1, d2, knows_script, queries

    ((cap1, cap2, d1, d2, knows_script, queries),) = tp.execute(build)
    # knows: one arrangement by key, one by self; the six joins arrange only their left input.
    assert operators_named(d1, "KnowsByKey") == 1
    assert operators_named(d1, "KnowsBySelf") == 1
    assert operators_named(d1, "JoinCore") == 6
    assert operators_named(d1, "ArrangeByKey") == 6 and operators_named(d1, "ArrangeBySelf") == 0
    # Naively every use of knows is arranged again (and every left input too).
    assert arrange_operators(d2) == 12
    found = 0
    for t in range(len(knows_script)):
        knows = state_at(knows_script, t)
        query = {q for q in queries if q[1] <= t}
        expected = {r: 1 for r in fof.scratch_triangles(knows, query)}
        assert cap1.at(t) == expected, t
        assert cap2.at(t) == expected, t
        found += len(expected)
    assert found, "the script should produce some triangles"


# --------------------------------------------------------------------------- filter wrapper
def test_arranged_filter_is_a_wrapper_equal_to_collection_filter():
    def build(worker):
        def wrapped(scope):
            ks, knows = scope.new_collection(name="knows")
            qs, query = scope.new_collection(name="query")
            knows1 = knows.arrange_by_key()
            before = scope.describe()
            knows2 = knows1.filter(lambda k, v: k == v or (k + v) % 3 == 0)
            after = scope.describe()
            out = query.join_core(knows1, lambda x, q, y: [(y, (x, q))]).join_core(
                knows2, lambda y, xq, z: [(xq[1], (xq[0], y, z))]
            )
            return ks, qs, out.capture(), before, after, scope.describe()

        def plain(scope):
            ks, knows = scope.new_collection(name="knows")
            qs, query = scope.new_collection(name="query")
            filtered = knows.filter(lambda kv: kv[0] == kv[1] or (kv[0] + kv[1]) % 3 == 0)
            out = query.join_map(knows, lambda x, q, y: (y, (x, q))).join_map(
                filtered, lambda y, xq, z: (xq[1], (xq[0], y, z))
            )
            return ks, qs, out.capture()

        ks1, qs1, cap1, before, after, full = worker.dataflow(wrapped)
        ks2, qs2, cap2 = worker.dataflow(plain)
        script = random_script(7, 8, people=7, per_round=8)
        rng = random.Random(8)
        for t, changes in enumerate(script):
            for s in (ks1, qs1, ks2, qs2):
                s.advance_to(t)
            for p, d in changes:
                ks1.update(p, d)
                ks2.update(p, d)
            q = (rng.randrange(7), rng.randrange(3))
            qs1.insert(q)
            qs2.insert(q)
        for s in (ks1, qs1, ks2, qs2):
            s.close()
        return cap1, cap2, before, after, full, len(script)

    ((cap1, cap2, before, after, full, rounds),) = tp.execute(build)
    assert before == after, "filtering an arrangement must not build an operator"
    # knows arranged once; each join_core arranges only its (collection) left input.
    assert arrange_operators(full) == 3
    assert "Filter" not in full and "Linear" not in full
    nonempty = 0
    for t in range(rounds + 1):
        assert cap1.at(t) == cap2.at(t), t
        nonempty += bool(cap1.at(t))
    assert nonempty


# --------------------------------------------------------------------------- entering scopes
def reach_from_scratch(knows: Set[Tuple[int, int]], query: Set[Tuple[int, int]]):
    reach = set(query)
    while True:
        step = reach | {(y, q) for x, q in reach for x2, y in knows if x == x2}
        if step == reach:
            return reach
        reach = step


def _run_reachability(body_variant: str, seed: int = 11):
    """The book's reachability: `knows` arranged outside, entered into the loop."""

    def build(worker):
        def dataflow(scope):
            ks, knows = scope.new_collection(name="knows")
            qs, query = scope.new_collection(name="query")
            arranged = knows.arrange_by_key()
            if body_variant == "filtered":
                arranged = arranged.filter(lambda x, y: x != y)

            def body(reach):
                knows_in = arranged.enter(reach.scope)
                query_in = query.enter(reach.scope)
                if body_variant == "book":
                    # Exactly the book's code: `knows.join_map(reach, ...)`, reach a collection.
                    step = knows_in.join_map(reach, lambda x, y, q: (y, q))
                else:
                    step = knows_in.join_map(reach.arrange_by_key(), lambda x, y, q: (y, q))
                return step.concat(query_in).distinct()

            out = query.iterate(body)
            return ks, qs, out.capture(), scope.describe()

        ks, qs, cap, describe = worker.dataflow(dataflow)
        rng = random.Random(seed)
        script = random_script(seed, 7, people=9, per_round=5)
        queries: List[Tuple[int, Tuple[int, int], int]] = []
        for t, changes in enumerate(script):
            ks.advance_to(t)
            qs.advance_to(t)
            for p, d in changes:
                ks.update(p, d)
            q = (rng.randrange(9), rng.randrange(4))
            if not any(q == q2 for _, q2, _ in queries):
                queries.append((t, q, 1))
                qs.insert(q)
        ks.close()
        qs.close()
        return cap, describe, script, queries

    ((cap, describe, script, queries),) = tp.execute(build)
    for t in range(len(script)):
        knows = state_at(script, t)
        if body_variant == "filtered":
            knows = {(x, y) for x, y in knows if x != y}
        query = {q for t0, q, _ in queries if t0 <= t}
        assert cap.at(t) == {r: 1 for r in reach_from_scratch(knows, query)}, t
    return describe


@pytest.mark.parametrize("variant", ["arranged", "filtered"])
def test_arranged_enter_into_iterate_matches_from_scratch(variant):
    describe = _run_reachability(variant)
    # knows is arranged once, outside the loop; entering does not arrange it again: the only
    # other arrangement by key is the loop variable's (inside the loop).
    assert operators_named(describe, "ArrangeByKey") == 2
    outside = describe.split("subgraph:")[0]
    assert operators_named(outside, "ArrangeByKey") == 1


def test_book_reachability_join_map_with_a_collection():
    _run_reachability("book")


# --------------------------------------------------------------------------- sharing traces
def _export(scope):
    session, knows = scope.new_collection(name="knows")
    arranged = knows.arrange_by_key(name="Exported")
    return session, arranged, arranged.trace


def _queries_dataflow(knows_arranged_fn):
    """A dataflow reading `knows` (arranged, from `knows_arranged_fn(scope)`): a semijoin with
    its own query keys and a join with tagged queries."""

    def dataflow(scope):
        knows = knows_arranged_fn(scope)
        qs, keys = scope.new_collection(name="keys")
        semi = knows.semijoin(keys)
        joined = knows.join_map(
            keys.map(lambda k: (k, "q")).arrange_by_key(), lambda k, v, tag: (k, v, tag)
        )
        out = semi.concat(joined.map(lambda r: (r[0], (r[1], r[2]))))
        probe = out.probe()
        return qs, out.capture(), probe

    return dataflow


def _drive_export_import(interactive: bool):
    """knows changes at times 0..7; the importing dataflow is built at time 3; the same
    computation also runs in the exporting worker's own dataflow for comparison."""
    import_at = 3
    rounds = 8
    script = random_script(21, rounds, people=6, per_round=5)
    rng = random.Random(22)
    key_changes = {t: [(rng.randrange(6), +1)] for t in range(rounds)}
    key_changes[6].append((key_changes[4][0][0], -1))

    def build(worker):
        knows_session, arranged, trace = worker.dataflow(_export)

        # Reference: the same queries in one dataflow with its own copy of `knows`.
        def reference(scope):
            ks, knows = scope.new_collection(name="knows_ref")
            qs, cap, probe = _queries_dataflow(lambda s: knows.arrange_by_key())(scope)
            return ks, qs, cap, probe

        ref_knows, ref_keys, ref_cap, ref_probe = worker.dataflow(reference)
        imp_keys = imp_cap = imp_probe = None
        for t in range(rounds):
            for s in (knows_session, ref_knows, ref_keys):
                s.advance_to(t)
            if t == import_at:
                # No reader will ask about times before `import_at`: let the trace compact.
                trace.set_logical_compaction([import_at])
                imp_keys, imp_cap, imp_probe = worker.dataflow(
                    _queries_dataflow(lambda scope: scope.import_trace(trace))
                )
            if imp_keys is not None:
                imp_keys.advance_to(t)
            for p, d in script[t]:
                knows_session.update(p, d)
                ref_knows.update(p, d)
            if t >= import_at:  # queries only once the importing dataflow exists
                for k, d in key_changes[t]:
                    ref_keys.update(k, d)
                    imp_keys.update(k, d)
            for s in (knows_session, ref_knows, ref_keys, imp_keys):
                if s is not None:
                    s.advance_to(t + 1)
                    s.flush()
            worker.step_until(ref_probe, t + 1, timeout=30)
            if interactive and imp_probe is not None:
                worker.step_while(lambda p=imp_probe, t=t: p.less_than(t + 1), max_steps=20_000)
                assert imp_cap.at(t) == ref_cap.at(t), t
        for s in (knows_session, ref_knows, ref_keys, imp_keys):
            s.close()
        trace.close()
        worker.step_until_done(timeout=30)
        return ref_cap, imp_cap

    ((ref_cap, imp_cap),) = tp.execute(build)
    nonempty = 0
    for t in range(rounds):
        assert imp_cap.at(t) == ref_cap.at(t), t
        nonempty += bool(ref_cap.at(t))
    assert nonempty >= 3


def test_exported_trace_imported_elsewhere_matches_one_dataflow():
    _drive_export_import(interactive=False)


def test_exported_trace_import_is_interactive():
    _drive_export_import(interactive=True)


def test_import_completes_when_the_exported_input_closes():
    def build(worker):
        session, _, trace = worker.dataflow(_export)
        captured = worker.dataflow(
            lambda scope: scope.import_trace(trace).as_collection().capture()
        )
        session.insert((1, 2))
        session.close()
        trace.close()
        return captured

    (captured,) = tp.execute(build)
    assert captured.consolidated() == [((1, 2), 0, 1)]


def test_completed_dataflow_drops_traces_no_handle_holds():
    """A completed dataflow's traces go at the worker's next step (not when the collector finds
    the operator cycles); a held handle keeps its trace readable until it closes; a handle asked
    for later is refused by name."""

    def build(worker):
        def dataflow(scope):
            session, knows = scope.new_collection(name="knows")
            held = knows.arrange_by_key(name="Held")
            loose = knows.map(lambda kv: (kv[1], kv[0])).arrange_by_key(name="Loose")
            return session, held, loose, held.trace, held.join(loose).probe()

        session, held, loose, handle, probe = worker.dataflow(dataflow)
        session.insert((1, 2))
        session.insert((2, 1))
        session.close()
        worker.step_until_done()
        assert not loose.spine.dropped  # released at the next step, not inside the last one
        worker.step()
        assert loose.spine.dropped and loose.spine.batches == []
        with pytest.raises(tp.TimelyError, match="'Loose'.*dropped"):
            _ = loose.trace
        assert not held.spine.dropped
        assert handle.get(1) == [(2, 0, 1)]
        handle.close()
        assert held.spine.dropped and held.spine.batches == []
        return True

    assert tp.execute(build) == [True]


# --------------------------------------------------------------------------- logical compaction
def _churn(session, worker, times: Iterable[int], keys: int, handle=None):
    """Every key moves from value t-1 to value t at each time t (live data: `keys` records)."""
    for t in times:
        session.advance_to(t)
        for k in range(keys):
            session.remove((k, t - 1))
            session.insert((k, t))
        session.flush()
        worker.step()
        if handle is not None:
            handle.set_logical_compaction([t])


KEYS = 20


def test_exported_handle_holds_back_compaction_then_reads_history():
    def build(worker):
        session, arranged, trace = worker.dataflow(_export)
        for k in range(KEYS):
            session.insert((k, 0))
        _churn(session, worker, range(1, 301), KEYS)
        session.advance_to(301)
        session.flush()
        worker.step()
        worker.step()
        stored = arranged.spine.stored_updates()
        history = {t: trace.accumulate(3, t) for t in (0, 5, 150, 300)}
        session.close()
        trace.close()
        return stored, history

    ((stored, history),) = tp.execute(build)
    # Every (key, value) at every time is still distinguishable: the whole history is kept.
    assert stored >= KEYS * 2 * 300
    assert history == {0: {0: 1}, 5: {5: 1}, 150: {150: 1}, 300: {300: 1}}


@pytest.mark.parametrize("release", ["advance", "close"])
def test_released_exported_handle_lets_the_trace_compact(release):
    """The responsible user of the book's shared arrangements: advance (or close) the exported
    handle as time passes; the trace then stays at the size of the live data under churn."""

    def build(worker):
        session, arranged, trace = worker.dataflow(_export)
        if release == "close":
            trace.close()
        for k in range(KEYS):
            session.insert((k, 0))
        worst = 0
        for t in range(1, 401):
            _churn(session, worker, [t], KEYS, trace if release == "advance" else None)
            worst = max(worst, arranged.spine.stored_updates())
        session.advance_to(401)  # complete time 400
        session.flush()
        worker.step()
        values = None if release == "close" else [trace.accumulate(k, 400) for k in range(3)]
        session.close()
        trace.close()
        return worst, values

    ((worst, values),) = tp.execute(build)
    assert worst <= 4 * KEYS + 100
    if values is not None:
        # Reads at times at or beyond the handle's frontier are still exact.
        assert values == [{400: 1}] * 3


def _held_then_released(explicit_compact: bool):
    def build(worker):
        session, arranged, trace = worker.dataflow(_export)
        for k in range(KEYS):
            session.insert((k, 0))
        _churn(session, worker, range(1, 301), KEYS)
        session.advance_to(301)  # complete time 300
        session.flush()
        worker.step()
        held = arranged.spine.stored_updates()
        trace.set_logical_compaction([301])
        if explicit_compact:
            arranged.spine.compact()
            last = 300
        else:
            _churn(session, worker, range(301, 401), KEYS, trace)
            session.advance_to(401)  # complete time 400
            session.flush()
            worker.step()
            last = 400
        released = arranged.spine.stored_updates()
        values = [trace.accumulate(k, last + 1) for k in range(3)]
        session.close()
        trace.close()
        return held, released, values, last

    ((held, released, values, last),) = tp.execute(build)
    assert held >= KEYS * 2 * 300  # history kept while the handle held it
    assert values == [{last: 1}] * 3  # reads at or beyond `since` stay exact
    assert released <= 4 * KEYS + 100, (held, released)


def test_advancing_a_held_exported_handle_lets_the_trace_compact():
    _held_then_released(explicit_compact=False)


def test_compact_after_advancing_a_held_exported_handle():
    _held_then_released(explicit_compact=True)


# --------------------------------------------------------------------------- compaction is real
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_compaction_is_real_under_100k_skip_level_changes():
    """10^5 changes to the manages relation of 1000 people: every trace stays within a small
    multiple of its live records, and the output is still exact."""
    people = 1000
    modifications = 100_000

    def build(worker):
        def dataflow(scope):
            session, manages = scope.new_collection(name="manages")
            by_manager = manages.arrange_by_key(name="ManagesByManager")
            by_person = manages.map(lambda mp: (mp[1], mp[0])).arrange_by_key(
                name="ManagesByPerson"
            )
            out = by_person.join(by_manager)  # (m1, (m2, p)), the book's output
            return session, [by_manager, by_person], out.capture(), out.probe()

        session, arrangements, cap, probe = worker.dataflow(dataflow)
        boss = {p: p // 2 for p in range(people)}
        for p in range(people):
            session.insert((boss[p], p))
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1, timeout=60)
        rng = random.Random(0)
        worst = 0
        t = 1
        for i in range(modifications):
            p = rng.randrange(1, people)
            new = rng.randrange(0, p)
            t += 1
            session.advance_to(t)
            session.remove((boss[p], p))
            session.insert((new, p))
            boss[p] = new
            if i % 100 == 99:
                session.flush()
                worker.step()
                worst = max([worst] + [a.spine.stored_updates() for a in arrangements])
        session.advance_to(t + 1)
        session.flush()
        worker.step_until(probe, t + 1, timeout=60)
        final = [a.spine.stored_updates() for a in arrangements]
        result = cap.at(t)
        session.close()
        return worst, final, boss, result

    ((worst, final, boss, result),) = tp.execute(build)
    live = people
    for stored in final:
        assert stored <= 4 * live + 100, final
    assert worst <= 4 * live + 100, worst
    manages = {(m, p) for p, m in boss.items()}
    by_manager: Dict[int, List[int]] = {}
    for m, p in manages:
        by_manager.setdefault(m, []).append(p)
    expected: Counter = Counter()
    for m2, m1 in manages:
        for p in by_manager.get(m1, ()):
            expected[(m1, (m2, p))] += 1
    assert result == dict(expected)


# --------------------------------------------------------------------------- linear fusion
def test_linear_chain_is_one_fused_operator():
    def build(worker):
        def dataflow(scope):
            session, c = scope.new_collection()
            out = c.map(lambda x: x * 3).filter(lambda x: x % 2 == 0).map(lambda x: x + 1)
            return session, out.capture(), scope.describe()

        session, cap, describe = worker.dataflow(dataflow)
        for x in range(10):
            session.insert(x)
        session.advance_to(1)
        session.remove(4)
        session.close()
        return cap, describe

    ((cap, describe),) = tp.execute(build)
    assert operators_named(describe, "Linear[map>filter>map]") == 1
    assert len(re.findall(r"^\s*\[\d+\] Linear", describe, re.M)) == 1
    assert cap.at(0) == {x * 3 + 1: 1 for x in range(10) if (x * 3) % 2 == 0}
    assert cap.at(1) == {x * 3 + 1: 1 for x in range(10) if (x * 3) % 2 == 0 and x != 4}


def test_linear_chain_with_two_consumers():
    def build(worker):
        def dataflow(scope):
            session, c = scope.new_collection()
            shared = c.map(lambda x: x + 1).filter(lambda x: x > 2)
            a = shared.map(lambda x: ("a", x)).capture()
            b = shared.negate().capture()
            return session, a, b, scope.describe()

        session, a, b, describe = worker.dataflow(dataflow)
        for x in range(5):
            session.insert(x)
        session.close()
        return a, b, describe

    ((a, b, describe),) = tp.execute(build)
    assert a.at(0) == {("a", x): 1 for x in (3, 4, 5)}
    assert b.at(0) == {x: -1 for x in (3, 4, 5)}
    # The common prefix may be fused into each consumer's chain (one operator per path, as
    # now) or run once (three operators), never one operator per stage (five).
    assert len(re.findall(r"^\s*\[\d+\] Linear\[", describe, re.M)) <= 3
