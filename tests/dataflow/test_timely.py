"""The timely layer, observed from outside: operators, times, frontiers, loops and errors."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timelypy as tp
from timelypy import IntSummary, Notificator, Product, Worker
from timelypy.errors import (
    CycleError,
    InputClosedError,
    OperatorError,
    TimelyError,
    TimeOrderError,
    WaitTimeoutError,
)

pytestmark = pytest.mark.timeout(60)


def step_n(worker: Worker, n: int = 20) -> None:
    """Step a fixed number of times (to show that something does NOT happen)."""
    for _ in range(n):
        worker.step()


def by_time_sorted(captured: tp.Captured) -> dict:
    return {t: sorted(rs) for t, rs in captured.by_time().items()}


# ---------------------------------------------------------------------------------------------
# Stateless operators


def test_map_filter_flat_map_keep_times():
    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()
            mapped = s.map(lambda x: x * 10)
            return (
                inp,
                mapped.capture(),
                mapped.filter(lambda x: x % 20 == 0).capture(),
                s.flat_map(lambda x: [x] * x).capture(),
            )

        inp, mapped, filtered, flat = worker.dataflow(dataflow)
        for epoch, records in enumerate([[1, 2, 3], [], [4], [0, 5]]):
            inp.advance_to(epoch)
            inp.send_batch(records)
        return mapped, filtered, flat

    ((mapped, filtered, flat),) = tp.execute(build)
    assert by_time_sorted(mapped) == {0: [10, 20, 30], 2: [40], 3: [0, 50]}
    assert by_time_sorted(filtered) == {0: [20], 2: [40], 3: [0]}
    assert by_time_sorted(flat) == {0: [1, 2, 2, 3, 3, 3], 2: [4, 4, 4, 4], 3: [5] * 5}
    for c in (mapped, filtered, flat):
        assert c.done() and c.frontier == []
        assert all(data for _, data in c.messages), "empty messages are not sent"


def test_map_preserves_record_order_within_a_time():
    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()
            return inp, s.map(lambda x: -x).capture()

        inp, cap = worker.dataflow(dataflow)
        inp.send_batch(range(3000))
        return cap

    (cap,) = tp.execute(build)
    assert [r for _, r in cap.records()] == [-x for x in range(3000)]
    assert {t for t, _ in cap.records()} == {0}


def test_concat_merges_streams_and_keeps_times():
    def build(worker):
        def dataflow(scope):
            a, sa = scope.new_input("a")
            b, sb = scope.new_input("b")
            c, sc = scope.new_input("c")
            return a, b, c, sa.concat(sb, sc).capture()

        a, b, c, cap = worker.dataflow(dataflow)
        a.send("a0")
        b.advance_to(2)
        b.send("b2")
        c.send_batch(["c0", "c0'"])
        a.advance_to(1)
        a.send("a1")
        return cap

    (cap,) = tp.execute(build)
    assert by_time_sorted(cap) == {0: ["a0", "c0", "c0'"], 1: ["a1"], 2: ["b2"]}
    assert cap.done()


def test_concat_of_a_stream_with_a_derived_stream():
    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()
            return inp, s.concat(s.map(lambda x: x + 100)).capture()

        inp, cap = worker.dataflow(dataflow)
        inp.send(1)
        inp.advance_to(5)
        inp.send(2)
        return cap

    (cap,) = tp.execute(build)
    assert by_time_sorted(cap) == {0: [1, 101], 5: [2, 102]}


def test_inspect_sees_every_record_once_and_passes_it_through():
    seen: List[Any] = []
    batches: List[Any] = []

    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()
            out = s.inspect(seen.append).inspect_batch(
                lambda t, data: batches.append((t, list(data)))
            )
            return inp, out.capture()

        inp, cap = worker.dataflow(dataflow)
        inp.send_batch([3, 1, 2])
        inp.advance_to(7)
        inp.send(9)
        return cap

    (cap,) = tp.execute(build)
    assert seen == [3, 1, 2, 9]
    assert sorted((t, r) for t, data in batches for r in data) == [(0, 1), (0, 2), (0, 3), (7, 9)]
    assert cap.records() == [(0, 3), (0, 1), (0, 2), (7, 9)]


def test_inspect_runs_before_the_probe_passes_the_epoch():
    """What inspect saw is complete for an epoch once the probe has passed it."""

    def build(worker):
        seen = []

        def dataflow(scope):
            inp, s = scope.new_input()
            return inp, s.inspect(seen.append).probe()

        inp, probe = worker.dataflow(dataflow)
        log = []
        for epoch in range(5):
            inp.send_batch([epoch] * (epoch + 1))
            inp.advance_to(epoch + 1)
            worker.step_until(probe, epoch + 1, timeout=5)
            log.append(Counter(seen)[epoch])
        return log

    assert tp.execute(build) == [[1, 2, 3, 4, 5]]


def test_exchange_on_one_worker_is_the_identity():
    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()
            return inp, s.capture(), s.exchange(lambda x: x % 7).capture()

        inp, direct, exchanged = worker.dataflow(dataflow)
        for epoch in range(4):
            inp.advance_to(epoch * 3)
            inp.send_batch(range(epoch * 10, epoch * 10 + 25))
        inp.send("strings hash too", time=100)
        return direct, exchanged

    direct, exchanged = tp.execute(build)[0]
    assert exchanged.records() == direct.records()
    assert exchanged.done() and exchanged.frontier_history[-1] == []


# ---------------------------------------------------------------------------------------------
# Probes and capture


def test_probe_frontier_progression():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        return inp, s.map(lambda x: x).probe()

    inp, probe = w.dataflow(dataflow)
    assert probe.frontier == [0]
    assert probe.less_equal(0) and not probe.less_than(0) and not probe.done()
    inp.send(1)
    inp.advance_to(3)
    w.step_until(probe, 3, timeout=5)
    assert probe.frontier == [3]
    assert probe.less_than(4) and probe.less_equal(3) and not probe.less_equal(2)
    assert not probe.less_than(3)
    inp.advance_to(10)
    w.step_until(probe, 10, timeout=5)
    assert probe.frontier == [10]
    inp.close()
    w.step_until_done(timeout=5)
    assert probe.done() and probe.frontier == [] and not probe.less_equal(10**9)


def test_probe_does_not_pass_an_epoch_with_records_in_flight():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        return inp, s.map(lambda x: x).map(lambda x: x).probe()

    inp, probe = w.dataflow(dataflow)
    inp.send(1)
    # Not advanced: however much we step, epoch 0 is still open.
    step_n(w)
    assert probe.frontier == [0]
    inp.advance_to(1)
    w.step_until(probe, 1, timeout=5)
    assert probe.frontier == [1]


def test_probe_with_two_streams_reports_their_meet():
    w = Worker()
    handle = tp.ProbeHandle()

    def dataflow(scope):
        a, sa = scope.new_input("a")
        b, sb = scope.new_input("b")
        sa.probe_with(handle)
        sb.map(lambda x: x).probe_with(handle)
        return a, b

    a, b = w.dataflow(dataflow)
    a.advance_to(5)
    step_n(w)
    assert handle.frontier == [0]
    b.advance_to(3)
    w.step_until(handle, 3, timeout=5)
    assert handle.frontier == [3]
    b.advance_to(8)
    w.step_until(handle, 5, timeout=5)
    assert handle.frontier == [5]
    a.close()
    b.close()
    w.step_until_done(timeout=5)
    assert handle.done()


def test_capture_records_messages_times_and_frontier():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        return inp, s.capture()

    inp, cap = w.dataflow(dataflow)
    assert cap.frontier == [0] and not cap.done() and cap.messages == []
    inp.send_batch(["x", "y"])
    inp.advance_to(2)
    inp.send("z")
    inp.send("w", time=4)
    inp.advance_to(3)
    w.step_while(lambda: cap.less_than(3), timeout=5)
    assert cap.frontier == [3]
    assert cap.records() == [(0, "x"), (0, "y"), (2, "z"), (4, "w")]
    assert cap.by_time() == {0: ["x", "y"], 2: ["z"], 4: ["w"]}
    inp.close()
    w.step_until_done(timeout=5)
    assert cap.done() and cap.frontier == []
    # Both advances happened before the first step: the frontier jumps from 0 straight to 3.
    assert cap.frontier_history == [[0], [3], []]


# ---------------------------------------------------------------------------------------------
# Generic operators and capabilities


def holder_factory(log: List[Any]):
    """A unary operator driven by command records, holding and moving capabilities."""

    def factory(cap, info):
        held = {"main": cap}

        def logic(input, output):
            for icap, data in input:
                for cmd in data:
                    log.append(cmd)
                    if cmd == "delay":
                        held["later"] = held["main"].delayed(5)
                        output.send(held["later"], ["at 5"])
                        with output.session(held["main"]) as session:
                            session.give("at 0")
                    elif cmd == "downgrade":
                        held["main"].downgrade(3)
                        session = output.session(held["main"])
                        session.give("at 3")
                        session.flush()
                    elif cmd == "downgrade-backwards":
                        held["main"].downgrade(1)
                    elif cmd == "drop-main":
                        held["main"].drop()
                        held["main"].drop()  # idempotent
                    elif cmd == "drop-later":
                        held["later"].drop()
                    elif cmd == "echo":
                        output.send(icap, ["echo"])

        return logic

    return factory


def test_unary_capability_delayed_downgrade_drop():
    w = Worker()
    log: List[Any] = []

    def dataflow(scope):
        inp, s = scope.new_input("commands")
        return inp, s.unary(holder_factory(log), name="holder").capture()

    inp, cap = w.dataflow(dataflow)
    inp.advance_to(10)
    step_n(w)
    assert cap.frontier == [0], "the initial capability at 0 is held"

    inp.send_batch(["delay", "downgrade"])
    inp.advance_to(11)
    w.step_while(lambda: cap.frontier != [3], timeout=5)
    step_n(w)
    assert cap.frontier == [3], "held at 3 (downgraded) and 5 (delayed): frontier is 3"
    assert sorted(cap.by_time().items()) == [(0, ["at 0"]), (3, ["at 3"]), (5, ["at 5"])]

    inp.send("drop-main")
    inp.advance_to(12)
    w.step_while(lambda: cap.frontier != [5], timeout=5)
    step_n(w)
    assert cap.frontier == [5], "only the delayed capability at 5 is left"

    inp.send_batch(["drop-later", "echo"])
    inp.advance_to(13)
    w.step_while(lambda: cap.less_than(13), timeout=5)
    assert cap.frontier == [13], "no capability left: the frontier follows the input"
    assert cap.by_time()[12] == ["echo"]
    inp.close()
    w.step_until_done(timeout=5)
    assert cap.done()
    assert cap.frontier_history == [[0], [3], [5], [13], []]
    assert log == ["delay", "downgrade", "drop-main", "drop-later", "echo"]


def test_downgrading_a_capability_backwards_raises_and_keeps_earlier_data():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input("commands")
        return inp, s.unary(holder_factory([]), name="holder").capture()

    inp, cap = w.dataflow(dataflow)
    inp.advance_to(10)
    inp.send_batch(["delay", "downgrade"])
    inp.advance_to(11)
    w.step_while(lambda: cap.frontier != [3], timeout=5)
    inp.send("downgrade-backwards")
    inp.advance_to(12)
    with pytest.raises(TimeOrderError) as info:
        w.step_until_done(timeout=5)
    msg = str(info.value)
    assert "'holder'" in msg and "3" in msg and "1" in msg
    assert cap.by_time() == {0: ["at 0"], 3: ["at 3"], 5: ["at 5"]}


def test_capability_misuse_is_rejected():
    errors: List[BaseException] = []

    def factory(cap, info):
        c4 = cap.delayed(4)
        for bad in (lambda: c4.delayed(2), lambda: c4.downgrade(3)):
            try:
                bad()
            except TimeOrderError as e:
                errors.append(e)
        c4.drop()
        try:
            c4.downgrade(9)
        except TimeOrderError as e:
            errors.append(e)

        def logic(input, output):
            for icap, data in input:
                try:
                    icap.delayed(icap.time - 1)
                except TimeOrderError as e:
                    errors.append(e)
                try:
                    output.send(c4, data)
                except TimelyError as e:
                    errors.append(e)
                output.send(icap, data)
            cap.drop()

        return logic

    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()
            return inp, s.unary(factory, name="misuser").capture()

        inp, cap = worker.dataflow(dataflow)
        inp.advance_to(3)
        inp.send("r")
        return cap

    (cap,) = tp.execute(build)
    assert cap.records() == [(3, "r")]
    assert len(errors) == 5
    assert all("'misuser'" in str(e) for e in errors)
    assert "dropped" in str(errors[2]) and "dropped" in str(errors[4])


def test_binary_operator_pairs_both_inputs_per_time():
    """Emit ``(time, left, right)`` once both input frontiers have passed ``time``."""

    def factory(cap, info):
        cap.drop()
        notificator = Notificator()
        left = defaultdict(list)
        right = defaultdict(list)

        def logic(in1, in2, output):
            for side, inp in ((left, in1), (right, in2)):
                for icap, data in inp:
                    if icap.time not in left and icap.time not in right:
                        notificator.notify_at(icap.retain())
                    side[icap.time].extend(data)
            for c in notificator.available([in1.frontier, in2.frontier]):
                t = c.time
                output.send(c, [(t, sorted(left.pop(t, [])), sorted(right.pop(t, [])))])
                c.drop()

        return logic

    w = Worker()

    def dataflow(scope):
        a, sa = scope.new_input("left")
        b, sb = scope.new_input("right")
        return a, b, sa.binary(sb, factory, name="pair").capture()

    a, b, cap = w.dataflow(dataflow)
    a.send_batch([2, 1])
    b.send("x")
    a.send(7, time=2)
    a.advance_to(3)
    step_n(w)
    assert cap.messages == [], "the right input has not passed time 0"
    b.advance_to(1)
    w.step_while(lambda: cap.less_than(1), timeout=5)
    assert cap.records() == [(0, (0, [1, 2], ["x"]))]
    b.send("y", time=2)
    b.close()
    a.close()
    w.step_until_done(timeout=5)
    assert cap.records() == [(0, (0, [1, 2], ["x"])), (2, (2, [7], ["y"]))]


def test_binary_operator_with_exchange_pacts():
    def factory(cap, info):
        cap.drop()

        def logic(in1, in2, output):
            for icap, data in in1:
                output.send(icap, [("L", x) for x in data])
            for icap, data in in2:
                output.send(icap, [("R", x) for x in data])

        return logic

    def build(worker):
        def dataflow(scope):
            a, sa = scope.new_input()
            b, sb = scope.new_input()
            out = sa.binary(sb, factory, tp.Exchange(lambda x: x), tp.Pipeline(), name="tag")
            return a, b, out.capture()

        a, b, cap = worker.dataflow(dataflow)
        a.send(1)
        b.advance_to(4)
        b.send(2)
        return cap

    (cap,) = tp.execute(build)
    assert by_time_sorted(cap) == {0: [("L", 1)], 4: [("R", 2)]}


def test_notificator_delivers_in_time_order_once_frontier_passes():
    deliveries: List[Any] = []

    def factory(cap, info):
        cap.drop()
        notificator = Notificator()
        counts: Counter = Counter()

        def logic(input, output):
            for icap, data in input:
                notificator.notify_at(icap.retain())  # several per time: merged on delivery
                counts[icap.time] += len(data)
            for c in notificator.available([input.frontier]):
                deliveries.append((c.time, input.frontier.less_equal(c.time)))
                output.send(c, [(c.time, counts.pop(c.time))])
                c.drop()

        return logic

    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        return inp, s.unary(factory, name="counts").capture()

    inp, cap = w.dataflow(dataflow)
    inp.send("late", time=6)
    inp.send("later", time=9)
    inp.send("mid", time=4)
    inp.send("now")
    step_n(w)
    assert deliveries == [], "nothing is delivered while the frontier is at 0"
    inp.advance_to(5)
    inp.send("also-6", time=6)
    w.step_while(lambda: cap.less_than(5), timeout=5)
    assert deliveries == [(0, False), (4, False)]
    inp.advance_to(6)
    step_n(w)
    assert [t for t, _ in deliveries] == [0, 4], "6 is not delivered at frontier 6"
    inp.advance_to(7)
    w.step_while(lambda: cap.less_than(7), timeout=5)
    inp.close()
    w.step_until_done(timeout=5)
    assert deliveries == [(0, False), (4, False), (6, False), (9, False)]
    assert cap.records() == [(0, (0, 1)), (4, (4, 1)), (6, (6, 2)), (9, (9, 1))]


def test_notificator_available_orders_times_and_merges_duplicates():
    from timelypy.progress import ChangeBatch, MutableAntichain

    internal = ChangeBatch()
    n = Notificator()
    for t in (7, 3, 5, 3):
        n.notify_at(tp.Capability(t, internal, lambda a, b: a <= b, 0, "op"))
    frontier = MutableAntichain()
    frontier.update(4, 1)
    ready = n.available([frontier])
    assert [c.time for c in ready] == [3]
    assert n.pending_times() == [5, 7]
    frontier.update(4, -1)  # empty frontier: everything is passed
    assert [c.time for c in n.available([frontier])] == [5, 7]
    assert len(n) == 0


# ---------------------------------------------------------------------------------------------
# Nested scopes and loops


def test_iterative_scope_product_times():
    inside: List[Any] = []

    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()

            def loop(child):
                handle, cycle = child.feedback()
                body = (
                    s.enter(child)
                    .concat(cycle)
                    .inspect_batch(lambda t, data: inside.extend((t, x) for x in data))
                )
                body.filter(lambda x: x < 3).map(lambda x: x + 1).connect_loop(handle)
                return body.filter(lambda x: x >= 3).leave()

            return inp, scope.iterative(loop).capture()

        inp, cap = worker.dataflow(dataflow)
        inp.send(0)
        inp.advance_to(2)
        inp.send(2)
        return cap

    (cap,) = tp.execute(build)
    assert all(type(t) is Product for t, _ in inside)
    assert sorted(inside) == [
        (Product(0, 0), 0),
        (Product(0, 1), 1),
        (Product(0, 2), 2),
        (Product(0, 3), 3),
        (Product(2, 0), 2),
        (Product(2, 1), 3),
    ]
    assert by_time_sorted(cap) == {0: [3], 2: [3]}
    assert all(type(t) is int for t, _ in cap.records())


def test_enter_and_leave_without_a_loop():
    times: List[Any] = []

    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()

            def inner(child):
                return (
                    s.enter(child)
                    .inspect_batch(lambda t, d: times.append(t))
                    .map(lambda x: x * 2)
                    .leave()
                )

            return inp, scope.iterative(inner).capture()

        inp, cap = worker.dataflow(dataflow)
        inp.send(1)
        inp.advance_to(3)
        inp.send(2)
        return cap

    (cap,) = tp.execute(build)
    assert sorted(times) == [Product(0, 0), Product(3, 0)]
    assert cap.records() == [(0, 2), (3, 4)]


def test_probe_inside_an_iterative_scope_sees_product_frontiers():
    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()

            def loop(child):
                handle, cycle = child.feedback()
                body = s.enter(child).concat(cycle)
                probe = body.probe()
                body.filter(lambda x: x < 2).map(lambda x: x + 1).connect_loop(handle)
                return probe

            return inp, scope.iterative(loop)

        inp, probe = worker.dataflow(dataflow)
        inp.send(0)
        inp.advance_to(1)
        inp.send(1)
        inp.close()
        history = [probe.frontier]
        while worker.step():
            history.append(probe.frontier)
            if len(history) > 10_000:
                raise AssertionError("did not finish")
        history.append(probe.frontier)
        return history, probe.done()

    ((history, done),) = tp.execute(build)
    assert done and history[-1] == []
    assert history[0] == [Product(0, 0)]
    for h in history:
        assert all(type(t) is Product for t in h)
    for old, new in zip(history, history[1:]):
        assert _dominated(old, new), f"frontier went back: {old} -> {new}"


def test_probe_inside_an_iterative_scope_starts_at_the_minimum():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        return inp, scope.iterative(lambda child: s.enter(child).probe())

    inp, probe = w.dataflow(dataflow)
    assert probe.frontier == [Product(0, 0)] and not probe.done()


def test_nested_loop_cannot_exceed_max_iterations():
    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()

            def loop(child):
                handle, cycle = child.feedback(max_iterations=10, name="runaway")
                s.enter(child).concat(cycle).map(lambda x: x + 1).connect_loop(handle)
                return handle

            scope.iterative(loop)
            return inp

        inp = worker.dataflow(dataflow)
        inp.send(0)

    with pytest.raises(tp.errors.NotConvergedError, match="runaway"):
        tp.execute(build, timeout=10)


# ---------------------------------------------------------------------------------------------
# Frontier monotonicity


def _dominated(old: List[Any], new: List[Any]) -> bool:
    """Every element of ``new`` is at or after some element of ``old`` (no regression)."""
    if not old:
        return not new
    return all(any(tp.less_equal(o, n) for o in old) for n in new)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["send", "ahead", "advance", "step"]), st.integers(0, 4)),
        max_size=40,
    )
)
def test_probe_frontier_never_regresses(ops):
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()

        def loop(child):
            handle, cycle = child.feedback()
            body = s.enter(child).concat(cycle)
            inner_probe = body.probe()
            body.filter(lambda x: x % 5 != 0).map(lambda x: x - 1).connect_loop(handle)
            return body.filter(lambda x: x % 5 == 0).leave(), inner_probe

        out, inner_probe = scope.iterative(loop)
        return inp, out.map(lambda x: x).probe(), inner_probe

    inp, probe, inner_probe = w.dataflow(dataflow)
    history = [probe.frontier]
    inner_history = [inner_probe.frontier]

    def step():
        w.step()
        history.append(probe.frontier)
        inner_history.append(inner_probe.frontier)

    for op, k in ops:
        if op == "send":
            inp.send(k)
        elif op == "ahead":
            inp.send(k + 3, time=inp.time + k)
        elif op == "advance":
            inp.advance_to(inp.time + k)
        else:
            for _ in range(k):
                step()
    inp.close()
    while w.step():
        history.append(probe.frontier)
        inner_history.append(inner_probe.frontier)
        assert len(history) < 10_000
    history.append(probe.frontier)
    inner_history.append(inner_probe.frontier)
    assert history[-1] == [] and inner_history[-1] == []
    for seq in (history, inner_history):
        for old, new in zip(seq, seq[1:]):
            assert _dominated(old, new), f"frontier went back: {old} -> {new}"


# ---------------------------------------------------------------------------------------------
# Build-time errors


def test_feedback_with_identity_summary_in_root_scope_is_a_cycle_error():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        handle, cycle = scope.feedback(IntSummary(0), name="no-advance")
        s.concat(cycle, name="merge").map(lambda x: x, name="body").connect_loop(handle)
        return inp

    with pytest.raises(CycleError) as info:
        w.dataflow(dataflow)
    msg = str(info.value)
    for name in ("no-advance", "merge", "body"):
        assert name in msg


def test_feedback_with_advancing_summary_in_root_scope_is_accepted():
    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()
            handle, cycle = scope.feedback(IntSummary(1))
            body = s.concat(cycle)
            body.filter(lambda x: x > 0).map(lambda x: x - 1).connect_loop(handle)
            return inp, body.capture()

        inp, cap = worker.dataflow(dataflow)
        inp.send(3)
        return cap

    (cap,) = tp.execute(build, timeout=10)
    assert cap.records() == [(0, 3), (1, 2), (2, 1), (3, 0)]


def test_cycle_error_names_each_operator_once_per_lap():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        handle, cycle = scope.feedback(IntSummary(0), name="no-advance")
        s.concat(cycle, name="merge").map(lambda x: x, name="body").connect_loop(handle)
        return inp

    with pytest.raises(CycleError) as info:
        w.dataflow(dataflow)
    names = str(info.value).split(": ", 1)[1].split(" -> ")
    assert all(a != b for a, b in zip(names, names[1:])), names


# ---------------------------------------------------------------------------------------------
# Input errors: the error is clear and nothing already accepted is lost


def _numbers_dataflow(worker):
    def dataflow(scope):
        inp, s = scope.new_input(name="numbers")
        return inp, s.capture()

    return worker.dataflow(dataflow)


@pytest.mark.parametrize("how", ["send", "send_batch"])
def test_send_before_current_time_is_a_time_order_error(how):
    w = Worker()
    inp, cap = _numbers_dataflow(w)
    inp.send("kept-0")
    inp.advance_to(5)
    inp.send("kept-5")
    with pytest.raises(TimeOrderError) as info:
        if how == "send":
            inp.send("bad", time=3)
        else:
            inp.send_batch(["bad"], time=3)
    msg = str(info.value)
    assert "'numbers'" in msg and "3" in msg and "5" in msg
    inp.send("kept-after")
    inp.close()
    w.step_until_done(timeout=5)
    assert cap.records() == [(0, "kept-0"), (5, "kept-5"), (5, "kept-after")]


def test_advance_to_backwards_is_a_time_order_error():
    w = Worker()
    inp, cap = _numbers_dataflow(w)
    inp.send("a")
    inp.advance_to(4)
    inp.send("b")
    with pytest.raises(TimeOrderError) as info:
        inp.advance_to(2)
    msg = str(info.value)
    assert "'numbers'" in msg and "2" in msg and "4" in msg
    assert inp.time == 4
    inp.advance_to(4)  # advancing to the current time is allowed (a no-op)
    inp.close()
    w.step_until_done(timeout=5)
    assert cap.records() == [(0, "a"), (4, "b")]


def test_using_an_input_after_close_is_an_input_closed_error():
    w = Worker()
    inp, cap = _numbers_dataflow(w)
    inp.send("a")
    inp.advance_to(1)
    inp.send("b")
    inp.close()
    inp.close()  # idempotent
    assert inp.closed
    for use, what in (
        (lambda: inp.send("x"), "send"),
        (lambda: inp.send_batch(["x"]), "send_batch"),
        (lambda: inp.advance_to(9), "advance_to"),
    ):
        with pytest.raises(InputClosedError) as info:
            use()
        assert "'numbers'" in str(info.value) and what in str(info.value)
    w.step_until_done(timeout=5)
    assert cap.records() == [(0, "a"), (1, "b")] and cap.done()


# ---------------------------------------------------------------------------------------------
# User functions that raise


@pytest.mark.parametrize(
    "make",
    [
        lambda s, f: s.map(f, name="parse"),
        lambda s, f: s.filter(f, name="parse"),
        lambda s, f: s.flat_map(lambda x: [f(x)], name="parse"),
        lambda s, f: s.inspect(f, name="parse"),
    ],
)
def test_user_function_raising_is_an_operator_error(make):
    def f(x):
        if x == "boom":
            raise ValueError("cannot parse the record")
        return x

    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        return inp, make(s, f).capture()

    inp, cap = w.dataflow(dataflow)
    inp.send("fine")
    inp.advance_to(1)
    w.step_while(lambda: cap.less_than(1), timeout=5)
    inp.send("boom")
    inp.advance_to(2)
    with pytest.raises(OperatorError) as info:
        w.step_until_done(timeout=5)
    err = info.value
    assert "'parse'" in str(err) and "cannot parse the record" in str(err)
    assert "ValueError" in str(err)
    assert err.operator == "parse" and err.worker == 0
    assert isinstance(err.__cause__, ValueError)
    assert cap.records() == [(0, "fine")]


def test_operator_error_propagates_out_of_execute():
    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()
            return inp, s.map(int, name="to-int").capture()

        inp, cap = worker.dataflow(dataflow)
        inp.send("12")
        inp.advance_to(1)
        worker.step_while(lambda: cap.less_than(1), timeout=5)
        assert cap.records() == [(0, 12)]
        inp.send("twelve")

    with pytest.raises(OperatorError, match=r"'to-int'.*invalid literal.*twelve"):
        tp.execute(build, timeout=10)


def test_generic_operator_logic_and_factory_raising_are_operator_errors():
    def bad_logic_factory(cap, info):
        cap.drop()

        def logic(input, output):
            for _, data in input:
                raise KeyError(f"missing {data[0]}")

        return logic

    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        return inp, s.unary(bad_logic_factory, name="lookup").capture()

    inp, _ = w.dataflow(dataflow)
    inp.send("k1")
    with pytest.raises(OperatorError, match=r"'lookup'.*KeyError.*missing k1"):
        w.step_until_done(timeout=5)

    def bad_factory(cap, info):
        raise RuntimeError("bad configuration")

    def dataflow2(scope):
        inp, s = scope.new_input()
        s.unary(bad_factory, name="configured")
        return inp

    with pytest.raises(OperatorError, match=r"'configured'.*bad configuration.*construction"):
        Worker().dataflow(dataflow2)


def test_operator_error_names_the_offending_record():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        return inp, s.map(lambda x: 1 / (x - 4242), name="invert").capture()

    inp, cap = w.dataflow(dataflow)
    inp.send_batch([1, 4242, 3])
    with pytest.raises(OperatorError) as info:
        w.step_until_done(timeout=5)
    assert "4242" in str(info.value)


def test_records_queued_behind_a_failing_batch_are_not_stranded():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input("numbers")
        return inp, s.map(lambda x: 1 / (x - 42), name="parse").capture()

    inp, cap = w.dataflow(dataflow)
    inp.send(43)
    inp.advance_to(1)
    inp.send(42)  # fails
    inp.advance_to(2)
    inp.send(44)  # accepted before the error
    inp.close()
    with pytest.raises(OperatorError):
        w.step()
    # Either the dataflow is poisoned (stepping re-raises) or it carries on; it must not
    # silently strand the record at time 2.
    try:
        w.step_until_done(timeout=5)
    except OperatorError:
        return
    assert cap.records() == [(0, 1.0), (2, 0.5)] and cap.done()


# ---------------------------------------------------------------------------------------------
# Never hang


def _hoarder(cap, info):
    """Holds its initial capability forever."""

    def logic(input, output):
        for _ in input:
            pass

    return logic


@pytest.mark.timeout(30)
def test_operator_holding_its_capability_does_not_hang_step_until_done():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        s.unary(_hoarder, name="hoarder").probe()
        return inp

    inp = w.dataflow(dataflow)
    inp.send(1)
    inp.close()
    with pytest.raises(WaitTimeoutError) as info:
        w.step_until_done(timeout=2)
    assert "'hoarder'" in str(info.value) and "[0]" in str(info.value)


@pytest.mark.timeout(30)
def test_execute_with_a_hoarding_operator_does_not_hang():
    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()
            return inp, s.unary(_hoarder, name="hoarder").capture()

        inp, cap = worker.dataflow(dataflow)
        inp.send("accepted")
        return cap

    with pytest.raises(WaitTimeoutError, match="'hoarder'"):
        tp.execute(build, timeout=2)


@pytest.mark.timeout(30)
def test_busy_operator_holding_a_capability_times_out_naming_it():
    def busy(cap, info):
        def logic(input, output):
            for _ in input:
                pass
            info.activate()  # always has "work": never looks stalled

        return logic

    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        s.unary(busy, name="spinner").probe()
        return inp

    inp = w.dataflow(dataflow)
    inp.close()
    with pytest.raises(WaitTimeoutError) as info:
        w.step_until_done(timeout=1)
    assert "'spinner'" in str(info.value)


@pytest.mark.timeout(30)
def test_step_until_a_time_that_never_comes_does_not_hang():
    w = Worker()

    def dataflow(scope):
        inp, s = scope.new_input()
        return inp, s.unary(_hoarder, name="hoarder").probe()

    inp, probe = w.dataflow(dataflow)
    inp.close()
    with pytest.raises(WaitTimeoutError, match="'hoarder'"):
        w.step_until(probe, 1, timeout=1)


@pytest.mark.timeout(30)
def test_waiting_on_an_input_that_was_never_advanced_fails_fast_with_a_hint():
    """The book's classic mistake (no advance_to / flush): a clear error, not a hang."""
    from timelypy.workers.worker import StallError

    def build(worker):
        def dataflow(scope):
            inp, stream = scope.new_input(name="clicks")
            return inp, stream.map(lambda x: x).probe()

        inp, probe = worker.dataflow(dataflow)
        inp.send(1)
        with pytest.raises(StallError, match=r"'clicks' at 0.*advance_to"):
            worker.step_until(probe, 1)
        inp.advance_to(1)
        worker.step_until(probe, 1)  # and it goes on once the input advances
        return probe.frontier

    assert tp.execute(build) == [[1]]
