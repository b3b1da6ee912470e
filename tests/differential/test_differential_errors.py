"""Errors of the differential layer: each is one of timelypy's own exception types, says what
went wrong (naming the input / operator, the time, the value or key), and leaves the data that
was accepted before it intact.
"""

from __future__ import annotations

import pytest

import timelypy as tp
from timelypy.errors import (
    InputClosedError,
    NotConvergedError,
    ReduceOutputError,
    TimelyError,
    TimeOrderError,
    UnhashableDataError,
)

pytestmark = pytest.mark.timeout(60)


def one_input(body=lambda c: c, name="numbers"):
    """A `build` helper: returns (session, captured) from a dataflow applying `body`."""

    def dataflow(scope):
        session, c = scope.new_collection(name=name)
        return session, body(c).capture()

    return dataflow


# --------------------------------------------------------------------------- times
def test_update_at_before_the_session_time_is_a_time_order_error():
    def build(worker):
        session, captured = worker.dataflow(one_input(name="readings"))
        session.insert("early")
        session.advance_to(5)
        session.update_at("on time", 7, 1)
        with pytest.raises(TimeOrderError) as info:
            session.update_at("too late", 3, 1)
        message = str(info.value)
        session.insert("after the error")
        session.close()
        return captured, message

    ((captured, message),) = tp.execute(build)
    assert isinstance(TimeOrderError("x"), TimelyError)
    assert "readings" in message  # the session
    assert "too late" in message  # the value
    assert "3" in message and "5" in message
    # Data accepted before (and after) the error still arrives; the rejected update does not.
    assert captured.consolidated() == [
        ("early", 0, 1),
        ("after the error", 5, 1),
        ("on time", 7, 1),
    ]


def test_advance_to_backwards_is_a_time_order_error():
    def build(worker):
        session, captured = worker.dataflow(one_input(name="clock"))
        session.advance_to(4)
        session.insert("a")
        with pytest.raises(TimeOrderError) as info:
            session.advance_to(2)
        assert session.time == 4  # unchanged by the failed call
        session.advance_to(4)  # advancing to the current time is fine
        session.insert("b")
        session.close()
        return captured, str(info.value)

    ((captured, message),) = tp.execute(build)
    assert "clock" in message and "2" in message and "4" in message
    assert captured.consolidated() == [("a", 4, 1), ("b", 4, 1)]


# --------------------------------------------------------------------------- closed inputs
@pytest.mark.parametrize(
    "use",
    [
        lambda s: s.insert(1),
        lambda s: s.remove(1),
        lambda s: s.update(1, 3),
        lambda s: s.update_at(1, 9, 1),
        lambda s: s.advance_to(9),
        lambda s: s.insert_many([1, 2]),
    ],
    ids=["insert", "remove", "update", "update_at", "advance_to", "insert_many"],
)
def test_use_after_close_is_an_input_closed_error(use):
    def build(worker):
        session, captured = worker.dataflow(one_input(name="letters"))
        session.insert("x")
        session.close()
        session.close()  # idempotent
        assert session.closed
        with pytest.raises(InputClosedError) as info:
            use(session)
        return captured, str(info.value)

    ((captured, message),) = tp.execute(build)
    assert "letters" in message and "close" in message
    assert captured.consolidated() == [("x", 0, 1)]


# --------------------------------------------------------------------------- hashing
@pytest.mark.parametrize(
    "send",
    [
        lambda s: s.insert([1, 2]),
        lambda s: s.update({"a": 1}, 1),
        lambda s: s.update_at((1, [2]), 3, 1),
    ],
    ids=["list", "dict", "tuple-with-list"],
)
def test_unhashable_records_are_rejected_at_the_input(send):
    def build(worker):
        session, captured = worker.dataflow(one_input(name="rows"))
        session.insert((1, 2))
        with pytest.raises(UnhashableDataError) as info:
            send(session)
        session.insert((3, 4))
        session.close()
        return captured, str(info.value)

    ((captured, message),) = tp.execute(build)
    assert issubclass(UnhashableDataError, TypeError)
    assert "rows" in message
    assert captured.consolidated() == [((1, 2), 0, 1), ((3, 4), 0, 1)]


@pytest.mark.parametrize(
    "body",
    [
        lambda c: c.map(lambda x: [x]).consolidate(),
        lambda c: c.map(lambda x: [x]).distinct(),
        lambda c: c.map(lambda x: ([x], x)).join(c.map(lambda x: ([x], x))),
    ],
    ids=["consolidate", "distinct", "join-key"],
)
def test_unhashable_records_inside_the_dataflow(body):
    def build(worker):
        session, captured = worker.dataflow(one_input(body))
        session.insert(1)
        session.close()
        return captured

    with pytest.raises(UnhashableDataError) as info:
        tp.execute(build)
    assert "[1]" in str(info.value)


# --------------------------------------------------------------------------- reduce output
@pytest.mark.parametrize(
    "logic,shown",
    [
        (lambda key, vals: 3, "3"),  # a bare int
        (lambda key, vals: [(v, "1") for v, _ in vals], "'1'"),  # a str count
        (lambda key, vals: [(v,) for v, _ in vals], "("),  # not pairs
        (lambda key, vals: [(v, 1.5) for v, _ in vals], "1.5"),  # a float count
        (lambda key, vals: None, "None"),
    ],
    ids=["int", "str-count", "1-tuple", "float-count", "none"],
)
def test_malformed_reduce_output_is_a_reduce_output_error(logic, shown):
    def build(worker):
        def dataflow(scope):
            session, c = scope.new_collection(name="pairs")
            return session, c.reduce(logic, name="Broken").capture()

        session, captured = worker.dataflow(dataflow)
        session.insert(("the key", 1))
        session.close()
        return captured

    with pytest.raises(ReduceOutputError) as info:
        tp.execute(build)
    message = str(info.value)
    assert "Broken" in message  # the operator
    assert "'the key'" in message  # the key
    assert shown in message  # what the logic returned


def test_well_formed_reduce_output_is_accepted():
    """Generators, lists of tuples and zero counts are all fine."""

    def build(worker):
        def dataflow(scope):
            session, c = scope.new_collection()
            out = c.reduce(lambda k, vals: ((v, c2) for v, c2 in vals if v > 0)).capture()
            zero = c.reduce(lambda k, vals: [("zero", 0), ("one", 1)]).capture()
            return session, out, zero

        session, out, zero = worker.dataflow(dataflow)
        for kv in [("a", 1), ("a", -2), ("b", 3), ("b", 3)]:
            session.insert(kv)
        session.close()
        return out, zero

    ((out, zero),) = tp.execute(build)
    assert out.at(0) == {("a", 1): 1, ("b", 3): 2}
    assert zero.at(0) == {("a", "one"): 1, ("b", "one"): 1}


# --------------------------------------------------------------------------- convergence
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "body",
    [
        lambda c: c.map(lambda x: x + 1).concat(c).distinct(),  # grows forever
        lambda c: c.map(lambda x: x + 1),  # moves forever
        lambda c: c.map(lambda x: x + 1).consolidate(),
    ],
    ids=["growing-distinct", "moving-map", "moving-consolidated"],
)
def test_non_converging_iterate_raises_not_converged(body):
    def build(worker):
        session, captured = worker.dataflow(one_input(lambda c: c.iterate(body, max_iterations=50)))
        session.insert(0)
        session.close()
        return captured

    with pytest.raises(NotConvergedError) as info:
        tp.execute(build)
    assert "50" in str(info.value)


def test_converging_iterate_within_the_limit_is_fine():
    def build(worker):
        session, captured = worker.dataflow(
            one_input(
                lambda c: c.iterate(
                    lambda v: v.map(lambda x: min(x + 1, 10)).concat(v).distinct(),
                    max_iterations=50,
                )
            )
        )
        session.insert(0)
        session.close()
        return captured

    ((captured,),) = [tp.execute(build)]
    assert captured.at(0) == {x: 1 for x in range(11)}


def test_input_closed_during_construction_before_its_consumer():
    def build(worker):
        def dataflow(scope):
            session, c = scope.new_collection()
            rejected = None
            try:
                session.insert(1)
                session.close()
            except TimelyError as exc:  # rejecting the early send is acceptable too
                rejected = exc
            return c.capture(), rejected

        return worker.dataflow(dataflow)

    ((captured, rejected),) = tp.execute(build)
    if rejected is None:
        assert captured.consolidated() == [(1, 0, 1)]
