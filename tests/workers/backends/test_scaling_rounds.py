"""Scaling with workers: a worker applies its own progress within the step that made it, runs
rounds while progress or messages arrive, and two workers do the differential work of one."""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Tuple

import pytest

import timelypy as tp
from timelypy.differential.trace.layout import COLUMNS_VARIABLE
from timelypy.progress.broadcast import Progcaster
from timelypy.stats import Statistics
from timelypy.workers.launch.inline import local_workers
from timelypy.workers.worker import Worker

pytestmark = pytest.mark.timeout(120)


# ------------------------------------------------------------------------------------------
# the progress broadcaster


def test_loopback_batches_are_received_at_once_and_in_order():
    sent: List[Any] = []
    caster = Progcaster(7, sent.append, loopback=True)
    assert not caster.pending()
    caster.send(["mine 1"])
    caster.deliver(["peer 1"])
    caster.send(["mine 2"])
    assert sent == [["mine 1"], ["mine 2"]]  # the transport carries only this worker's own
    assert caster.pending()
    assert caster.recv() == [["mine 1"], ["peer 1"], ["mine 2"]]
    assert not caster.pending() and caster.recv() == []


def test_without_loopback_own_batches_come_back_through_the_transport():
    sent: List[Any] = []
    caster = Progcaster(7, sent.append)
    caster.send(["mine"])
    assert sent == [["mine"]] and not caster.pending()


def test_a_worker_with_peers_sends_its_progress_to_the_others_only():
    workers = local_workers(3)
    sessions = [w.dataflow(lambda scope: scope.new_collection()[0]) for w in workers]
    w0 = workers[0]
    sessions[0].insert(1)
    sessions[0].advance_to(1)
    w0.step()
    boxes = w0.fabric.fabric.mailboxes
    assert not boxes[0]  # its own batches looped back, none went through its mailbox
    assert boxes[1] and boxes[2]
    assert all(msg[0] == "p" for _, msg in boxes[1])


# ------------------------------------------------------------------------------------------
# rounds within a step


def _probe_dataflow(worker: Worker) -> Tuple[Any, Any]:
    def dataflow(scope):
        session, numbers = scope.new_collection()
        return session, numbers.map(lambda x: x + 1).probe()

    return worker.dataflow(dataflow)


def test_the_last_worker_to_advance_sees_the_frontier_move_in_the_same_step():
    """Worker 0 advances and steps, then worker 1 does: worker 1 has worker 0's progress and
    its own input's, and its probe passes within that one step (before: one step later, as
    its own progress came back through the transport)."""
    w0, w1 = local_workers(2)
    (s0, p0), (s1, p1) = _probe_dataflow(w0), _probe_dataflow(w1)
    s0.insert(1)
    s1.insert(2)
    for s in (s0, s1):
        s.advance_to(1)
        s.flush()
    w0.step()
    assert p0.less_than(1)  # worker 1's input still holds time 0
    w1.step()
    assert not p1.less_than(1)
    w0.step()
    assert not p0.less_than(1)


def test_a_step_runs_a_bounded_number_of_rounds():
    """An operator that activates itself forever: each step of a worker with peers still
    returns, after ``max_rounds`` rounds (a round schedules it once)."""
    runs = {0: 0, 1: 0}
    workers = local_workers(2)
    for w in workers:

        def busy(cap, info, index=w.index):
            def logic(input, output):
                for _ in input:
                    pass
                runs[index] += 1
                info.activate()

            return logic

        def dataflow(scope, busy=busy):
            inp, s = scope.new_input()
            s.unary(busy, name="spinner").probe()
            return inp

        w.dataflow(dataflow)
    for w in workers:
        assert w.step() is True
    assert runs == {0: Worker.max_rounds, 1: Worker.max_rounds}


def _harness_counts(workers: int, size: int) -> Tuple[Dict[str, Any], Counter]:
    """The comparison harness's W1 (every change buffered, no step, close, then step)."""
    outputs: List[Counter] = []

    def build(worker):
        out: Counter = Counter()
        outputs.append(out)

        def dataflow(scope):
            session, manages = scope.new_collection()
            probe = (
                manages.map(lambda mp: (mp[1], mp[0]))
                .join(manages)
                .inspect(lambda u: out.__setitem__(u[0], out[u[0]] + u[2]))
                .probe()
            )
            return session, probe

        session, probe = worker.dataflow(dataflow)
        for p in range(worker.index, size, worker.peers):
            session.insert((p // 2, p))
        session.advance_to(1)
        session.flush()
        while probe.less_than(1):
            worker.step()
        for k, p in enumerate(range(1, size)):
            if k % worker.peers == worker.index:
                session.remove((p // 2, p))
                session.insert((p // 3, p))
            session.advance_to(p + 1)
        session.close()
        while worker.step():
            pass

    stats = Statistics()
    tp.execute(build, workers=workers, backend="inline", statistics=stats)
    total: Counter = Counter()
    for out in outputs:
        total.update(out)
    join = sum(op["records_out"] for op in stats.operators() if op["name"].startswith("Join"))
    stored = [op["arrangement"]["updates"] for op in stats.operators() if op["arrangement"]]
    return {"join_records_out": join, "arranged_updates": stored}, +total


@pytest.mark.parametrize("workers", [2, 3])
def test_buffered_changes_do_the_work_of_one_worker(workers, monkeypatch):
    """The harness's W1 on several inline workers: the same output, the join emits exactly as
    many records and the arrangements end with as many updates as on one worker. On the object
    path: on columns the join consolidates its chunks of pairs where they may cancel, and how
    many cancel depends on how the batches of each worker fell (fewer records, not more)."""
    monkeypatch.setenv(COLUMNS_VARIABLE, "off")
    one, out_one = _harness_counts(1, 600)
    many, out_many = _harness_counts(workers, 600)
    assert out_many == out_one
    assert many == one


def _open_loop_output(workers: int, size: int, batch: int) -> Counter:
    outputs: List[Counter] = []

    def build(worker):
        out: Counter = Counter()
        outputs.append(out)

        def dataflow(scope):
            session, manages = scope.new_collection()
            probe = (
                manages.map(lambda mp: (mp[1], mp[0]))
                .join(manages)
                .inspect(lambda u: out.__setitem__(u[0], out[u[0]] + u[2]))
                .probe()
            )
            return session, probe

        session, probe = worker.dataflow(dataflow)
        for p in range(worker.index, size, worker.peers):
            session.insert((p // 2, p))
        for p in range(1, size):
            session.advance_to(p)
            if p % worker.peers == worker.index:
                session.remove((p // 2, p))
                session.insert((p // 3, p))
            if p % batch == 0:
                session.flush()
                worker.step()
        session.advance_to(size)
        session.flush()
        worker.step_until(probe, size)

    tp.execute(build, workers=workers, backend="inline")
    total: Counter = Counter()
    for out in outputs:
        total.update(out)
    return +total


def test_open_loop_answers_agree_across_workers():
    one = _open_loop_output(1, 500, 37)
    assert _open_loop_output(2, 500, 37) == one
    assert _open_loop_output(3, 500, 37) == one
