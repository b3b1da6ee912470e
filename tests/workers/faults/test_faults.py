"""Faults a long-lived job must survive: stalls explained at once, bad records named, bounded
memory under a fast producer. Parametrized over the backends where the fault applies."""

from __future__ import annotations

import threading
import time

import pytest

import timelypy as tp
from timelypy.dataflow import Exchange
from timelypy.errors import (
    DataEncodingError,
    OperatorError,
    StallError,
    UnhashableDataError,
    WorkerError,
)

psutil = pytest.importorskip("psutil")

BACKENDS = [
    ("inline", 1),
    ("inline", 2),
    pytest.param("processes", 2, marks=pytest.mark.processes),
    pytest.param("ray", 2, marks=pytest.mark.ray),
]


@pytest.fixture
def backend(request):
    """The parametrized backend's name, with the tests' local Ray started when it is ``ray``."""
    name = request.param
    if name == "ray":
        request.getfixturevalue("ray_session")
    return name


# ----------------------------------------------------------------------------- stalls
def _forgot_to_advance_timely(worker):
    def dataflow(scope):
        edges, stream = scope.new_input("edges")
        scope.new_input("unrelated")  # never advanced either, but not upstream of the probe
        return edges, stream.map(lambda x: x).probe()

    edges, probe = worker.dataflow(dataflow)
    edges.send(1)
    worker.step_until(probe, 1)  # the classic mistake: no advance_to(1)


def _forgot_to_advance_differential(worker):
    def dataflow(scope):
        edges, coll = scope.new_collection("edges")
        return edges, coll.count().probe()

    edges, probe = worker.dataflow(dataflow)
    edges.insert(("a", 1))
    worker.step_until(probe, 1)


def _advanced_but_unrelated_input_left_behind(worker):
    def dataflow(scope):
        edges, stream = scope.new_input("edges")
        other, _ = scope.new_input("unrelated")
        return edges, stream.map(lambda x: x).probe()

    edges, probe = worker.dataflow(dataflow)
    edges.send(1)
    edges.advance_to(1)
    worker.step_until(probe, 1, timeout=30)  # passes: the unrelated input does not hold it
    return "ok"


@pytest.mark.parametrize("backend,workers", BACKENDS, indirect=["backend"])
@pytest.mark.parametrize("build", [_forgot_to_advance_timely, _forgot_to_advance_differential])
def test_a_wait_that_cannot_finish_fails_at_once_naming_the_input(backend, workers, build):
    started = time.monotonic()
    with pytest.raises((StallError, WorkerError)) as info:
        tp.execute(build, workers=workers, backend=backend, timeout=60)
    assert time.monotonic() - started < 20
    text = str(info.value)
    assert "StallError" in text or isinstance(info.value, StallError)
    assert "'edges' at 0" in text and "advance_to(1)" in text and "flush()" in text
    assert "unrelated" not in text


@pytest.mark.parametrize("backend,workers", BACKENDS, indirect=["backend"])
def test_an_input_that_does_not_feed_the_probe_does_not_count_as_a_stall(backend, workers):
    assert (
        tp.execute(
            _advanced_but_unrelated_input_left_behind, workers=workers, backend=backend, timeout=60
        )
        == ["ok"] * workers
    )


# ----------------------------------------------------------------------------- bad records
def _exchange_program(records, key=lambda r: r):
    def build(worker):
        def dataflow(scope):
            inp, stream = scope.new_input("numbers")
            stream.unary(_drain, pact=Exchange(key), name="Sink")
            return inp

        inp = worker.dataflow(dataflow)
        if worker.index == 0:
            inp.send_batch(records)
        return None

    return build


def _drain(capability, info):
    capability.drop()
    return lambda input, output: [None for _ in input]


@pytest.mark.parametrize(
    "backend,workers", [("inline", 2), pytest.param("processes", 2, marks=pytest.mark.processes)]
)
def test_an_unroutable_key_names_the_operator_worker_and_record(backend, workers):
    build = _exchange_program([1, 2, [3, "a list"]])
    with pytest.raises((UnhashableDataError, WorkerError)) as info:
        tp.execute(build, workers=workers, backend=backend, timeout=60)
    text = str(info.value)
    assert "operator 'Sink'" in text and "worker 0" in text and "[3, 'a list']" in text


def test_a_key_function_that_raises_names_the_exchange():
    build = _exchange_program([1, 2, 0], key=lambda r: 1 // r)
    with pytest.raises(WorkerError) as info:
        tp.execute(build, workers=2, timeout=60)
    text = str(info.value)
    assert "operator 'Sink'" in text and "ZeroDivisionError" in text and "record 0" in text
    assert isinstance(info.value.__cause__, OperatorError)


def _recursive() -> list:
    loop: list = []
    loop.append(loop)
    return loop


@pytest.mark.processes
@pytest.mark.parametrize("make,kind", [(threading.Lock, "lock"), (_recursive, "list")])
def test_an_unserialisable_record_names_the_operator_and_its_type(make, kind):
    # the records must hash to worker 1 from worker 0 to cross the mesh: tuples keyed by 1
    def build(worker):
        def dataflow(scope):
            inp, stream = scope.new_input("things")
            stream.unary(_drain, pact=Exchange(lambda r: r[0]), name="Sink")
            return inp

        inp = worker.dataflow(dataflow)
        if worker.index == 0:
            inp.send_batch([(1, "fine"), (1, make())])
        return None

    with pytest.raises(WorkerError) as info:
        tp.execute(build, workers=2, backend="processes", timeout=60)
    text = str(info.value)
    assert "DataEncodingError" in text and "operator 'Sink'" in text
    assert "a record of type tuple" in text and "worker 0 cannot send" in text
    assert kind  # the record's own type is inside the tuple; the tuple is what is sent


def test_data_encoding_error_is_a_type_error():
    assert issubclass(DataEncodingError, TypeError)


# ----------------------------------------------------------------------------- memory
@pytest.mark.processes
def test_a_fast_producer_does_not_flood_a_slow_consumer():
    """Worker 0 sends 150 batches of 2*10^4 records (about 500 MB once decoded) to worker 1,
    which takes 50 ms per batch. Without flow control the consumer's inbox grows to most of it
    (measured: +460 MB); with the default 8 MiB window per link it holds about two windows of
    decoded records (measured: +120 MB)."""
    batches, batch = 150, 20_000

    def build(worker):
        rss = []

        def dataflow(scope):
            inp, stream = scope.new_input("bulk")

            def slow(capability, info):
                capability.drop()

                def logic(input, output):
                    for _ in input:
                        time.sleep(0.05)
                    rss.append(psutil.Process().memory_info().rss)

                return logic

            stream.unary(slow, pact=Exchange(lambda r: 1), name="Slow")
            return inp

        inp = worker.dataflow(dataflow)
        if worker.index == 0:
            records = [(k, k, "x" * 12) for k in range(batch)]
            for _ in range(batches):
                inp.send_batch(records)
                inp.flush()
                worker.step()
        inp.close()
        worker.step_until_done(timeout=240)
        return (min(rss), max(rss)) if rss else None

    _, (low, high) = tp.execute(build, workers=2, backend="processes", timeout=300)
    assert high - low < 250 << 20, ((low >> 20), (high >> 20))


# ----------------------------------------------------------------------------- captures
def _churn_dataflow(scope):
    records, coll = scope.new_collection("records")
    latest = coll.map(lambda r: (r[0], r[1] * 2))
    return {"records": records, "changes": latest.capture(), "probe": latest.probe()}


def _rss() -> int:
    return psutil.Process().memory_info().rss


def test_a_drained_capture_keeps_flat_memory():
    """10^5 modifications (300 per round) through a session that reads the changes after every
    round: what was read is released (measured: no growth between round 40 and the end;
    keeping every message grew the process by 25 MB)."""
    import gc

    keys, per_round, rounds = 1000, 300, 340
    with tp.open_session(_churn_dataflow, timeout=60) as session:
        value = {k: 0 for k in range(keys)}
        for k in range(keys):
            session.insert("records", (k, 0))
        rss = []
        for r in range(1, rounds + 1):
            for i in range(per_round):
                k = (r * per_round + i) % keys
                session.remove("records", (k, value[k]))
                value[k] += 1
                session.insert("records", (k, value[k]))
            session.advance_to(r)
            session.wait("probe")
            changes = session.changes("changes")
            assert len(changes) == (keys if r == 1 else 0) + 2 * per_round
            if r in (40, rounds):
                gc.collect()
                rss.append(_rss())
        assert rss[1] - rss[0] < 8 << 20, [x >> 20 for x in rss]


def test_captured_messages_are_released_once_read():
    from timelypy.dataflow.capture import Captured

    cap = Captured()
    cap.messages.extend([(0, [1, 2]), (1, [3])])
    first, position = cap.changes_from(0)
    assert first == [(0, 1), (0, 2), (1, 3)] and position == 2
    cap.messages.append((2, [4]))
    second, position = cap.changes_from(position)
    assert second == [(2, 4)] and position == 3 and cap.messages == [(2, [4])]
    assert cap.changes_from(position) == ([], 3) and cap.messages == []


# ----------------------------------------------------------------------------- inspect, diffs
def test_a_trailing_inspect_runs():
    seen = []

    def build(worker):
        def dataflow(scope):
            records, coll = scope.new_collection("records")
            coll.map(lambda x: x * 10).inspect(seen.append)  # nothing downstream
            return records

        records = worker.dataflow(dataflow)
        records.insert(1)
        records.insert(2)
        return None

    tp.execute(build)
    assert sorted(seen) == [(10, 0, 1), (20, 0, 1)]


@pytest.mark.parametrize("bad", [1.5, 0.1, "1", None, True])
def test_a_diff_that_is_not_an_integer_is_refused_at_the_call(bad):
    from timelypy.errors import DiffTypeError

    def build(worker):
        def dataflow(scope):
            records, coll = scope.new_collection("records")
            return records, coll.capture()

        records, out = worker.dataflow(dataflow)
        with pytest.raises(
            DiffTypeError, match="'records'.*must be an integer.*" + type(bad).__name__
        ):
            records.update("x", bad)
        with pytest.raises(DiffTypeError):
            records.update_at("x", 3, bad)
        records.update("y", 2)
        return out

    (out,) = tp.execute(build)
    assert out.consolidated() == [("y", 0, 2)]


def test_numpy_integer_diffs_are_accepted():
    numpy = pytest.importorskip("numpy")

    def build(worker):
        def dataflow(scope):
            records, coll = scope.new_collection("records")
            return records, coll.distinct().capture()

        records, out = worker.dataflow(dataflow)
        records.update("x", numpy.int64(3))
        records.update_at("x", 1, numpy.int32(-3))
        return out

    (out,) = tp.execute(build)
    assert out.consolidated() == [("x", 0, 1), ("x", 1, -1)]
    assert all(type(u[2]) is int for u in out.updates())


@pytest.mark.parametrize("backend,workers", BACKENDS, indirect=["backend"])
def test_a_session_wait_that_cannot_finish_fails_at_once_with_the_hint(backend, workers):
    def dataflow(scope):
        edges, coll = scope.new_collection("edges")
        return {"edges": edges, "probe": coll.count().probe()}

    with tp.open_session(dataflow, workers=workers, backend=backend, timeout=60) as session:
        session.insert("edges", ("a", 1))
        session.advance_to(1)
        started = time.monotonic()
        with pytest.raises(tp.errors.TimelyError) as info:
            session.wait("probe", time=3)  # the inputs are at 1: nothing moves them to 3
        assert time.monotonic() - started < 10
        text = str(info.value)
        assert "StallError" in text or isinstance(info.value, StallError)
        assert "'edges' at 1" in text and "advance_to(3)" in text
        session.wait("probe")  # the session is still usable


@pytest.mark.processes
@pytest.mark.parametrize("window", [0, 64 << 10])
def test_the_flow_control_window_is_an_option(window):
    """A tiny window (many waits for credit) and no window give the same exact answer."""

    def build(worker):
        def dataflow(scope):
            inp, stream = scope.new_input("bulk")
            return inp, stream.exchange(lambda r: r[0]).capture()

        inp, out = worker.dataflow(dataflow)
        if worker.index == 0:
            for i in range(50):
                inp.send_batch([(k, i) for k in range(2000)])
                inp.flush()
                worker.step()
        inp.close()
        worker.step_until_done(timeout=100)
        return len(out.records())

    counts = tp.execute(build, workers=2, backend="processes", timeout=120, mesh_window=window)
    assert sum(counts) == 50 * 2000 and all(counts)
