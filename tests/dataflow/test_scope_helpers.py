"""Small public helpers of the timely layer: ``Scope.input_from``, ``CapabilitySet.drop_all``,
an output session's ``give_iterator``, and the time maps of an iterative scope."""

from __future__ import annotations

from typing import Any, List

import timelypy as tp
from timelypy import Product
from timelypy.dataflow.scope import enter_time, leave_time


def test_input_from_holds_the_records_at_the_minimum_time_then_completes():
    def build(worker):
        def dataflow(scope):
            return scope.input_from(range(4), name="digits").map(lambda x: x * 10).capture()

        return worker.dataflow(dataflow)

    (cap,) = tp.execute(build)
    assert sorted(cap.records()) == [(0, 0), (0, 10), (0, 20), (0, 30)]
    assert cap.done()


def test_capabilities_held_in_a_set_are_released_by_drop_all():
    """An operator keeps capabilities at two later times in a CapabilitySet, sends at each with
    ``give_iterator``, and releases them all on a ``"done"`` record: the output completes only
    then."""
    released: List[Any] = []

    def factory(cap, info):
        cap.drop()
        held = tp.CapabilitySet(lambda a, b: a <= b)

        def logic(input, output):
            for icap, data in input:
                for cmd in data:
                    if cmd == "hold":
                        held.insert(icap.delayed(icap.time + 2))
                        held.insert(icap.delayed(icap.time + 4))
                        for c in held:
                            with output.session(c) as session:
                                session.give_iterator(iter([f"at {c.time}", "again"]))
                    elif cmd == "done":
                        released.append(held.times())
                        held.drop_all()

        return logic

    def build(worker):
        def dataflow(scope):
            inp, s = scope.new_input()
            return inp, s.unary(factory, name="holder").capture()

        inp, cap = worker.dataflow(dataflow)
        inp.send("hold")
        inp.advance_to(1)
        worker.step_while(lambda: cap.less_than(1))
        before = list(cap.frontier)
        inp.send("done")
        inp.close()
        worker.step_while(lambda: not cap.done())
        return before, released, cap

    ((before, released, cap),) = tp.execute(build)
    assert before == [1]  # the set holds 2; the input holds 1
    assert released == [[2]]  # 4 is at or after 2: the antichain keeps 2 only
    assert sorted(cap.records()) == [(2, "again"), (2, "at 2")]
    assert cap.frontier == [] and cap.done()


def test_enter_time_and_leave_time_are_inverse_on_the_outer_time():
    assert enter_time(7) == Product(7, 0) and type(enter_time(7)) is Product
    assert leave_time(Product(7, 3)) == 7
    assert leave_time(enter_time(Product(1, 2))) == Product(1, 2)
