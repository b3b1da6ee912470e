"""The collector policy while workers step: paused by default, restored afterwards, a safety net
for cyclic garbage, and the premise that justifies it (the engine makes no cyclic garbage while
a dataflow runs)."""

from __future__ import annotations

import gc

import pytest
from support.dataflows import reachability

import timelypy as tp
from timelypy.workers import collector


@pytest.fixture
def gc_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_by_default_nested_and_restored(gc_enabled, monkeypatch):
    monkeypatch.delenv("TIMELYPY_GC", raising=False)
    assert collector.gc_mode() == "paused"
    with collector.paused_collector():
        assert not gc.isenabled()
        with collector.paused_collector():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_execute_runs_paused_and_restores(gc_enabled, monkeypatch):
    monkeypatch.delenv("TIMELYPY_GC", raising=False)
    seen = tp.execute(lambda worker: gc.isenabled(), workers=2)
    assert seen == [False, False]
    assert gc.isenabled()


def test_tuned_and_python_modes(gc_enabled, monkeypatch):
    old = gc.get_threshold()
    monkeypatch.setenv("TIMELYPY_GC", "tuned")
    with collector.paused_collector():
        assert gc.isenabled()
        assert gc.get_threshold() == tuple(
            max(o, t) for o, t in zip(old, collector.TUNED_THRESHOLDS)
        )
    assert gc.get_threshold() == old
    monkeypatch.setenv("TIMELYPY_GC", "python")
    with collector.paused_collector():
        assert gc.isenabled() and gc.get_threshold() == old


def test_unknown_mode_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TIMELYPY_GC", "sometimes")
    with pytest.raises(ValueError, match="TIMELYPY_GC='sometimes'.*paused, tuned, python"):
        collector.gc_mode()


def test_safety_net_reclaims_user_cycles_between_steps(gc_enabled, monkeypatch):
    """A map whose function makes cyclic garbage per record: once the growth passes the
    limit, the next step's check collects it."""
    monkeypatch.delenv("TIMELYPY_GC", raising=False)
    monkeypatch.setattr(collector, "MIN_GROWTH", 5_000)
    collected = []
    monkeypatch.setattr(
        collector,
        "_collect",
        lambda: (
            collected.append(gc.collect()) or setattr(collector, "_limit", collector.MIN_GROWTH)
        ),
    )

    def cyclic(x):
        a = [x]
        a.append(a)  # a list that holds itself: only the cyclic collector frees it
        return x

    def build(worker):
        def define(scope):
            session, numbers = scope.new_collection()
            return session, numbers.map(cyclic).probe()

        session, probe = worker.dataflow(define)
        for t in range(40):
            for i in range(500):
                session.insert(i)
            session.advance_to(t + 1)
            session.flush()
            while probe.less_than(t + 1):
                worker.step()
        return sum(collected)

    [found] = tp.execute(build)
    assert found >= 5_000  # several thousand self-referencing lists reclaimed mid-run


def test_the_engine_makes_no_cyclic_garbage_while_stepping(gc_enabled):
    """The premise of pausing: a closed loop over join, reduce and iterate, with a full
    collection after every step, finds nothing to reclaim until the dataflow completes."""
    found_per_step = []

    def build(worker):
        def define(scope):
            session, edges = scope.new_collection()
            roots = edges.map(lambda e: e[0]).filter(lambda n: n == 0).distinct()
            reach = reachability(edges, roots)
            skip = edges.map(lambda e: (e[1], e[0])).join(edges)
            counts = skip.map(lambda r: r[0]).count()
            return session, reach.concat(counts.map(lambda kc: kc[0])).probe()

        session, probe = worker.dataflow(define)
        for n in range(50):
            session.insert((n, n + 1))
        gc.collect()  # what building the dataflow left
        for t in range(1, 60):
            session.advance_to(t)
            session.remove((t % 50, t % 50 + 1))
            session.insert((t % 50, (t * 7) % 50))
            session.flush()
            while probe.less_than(t):
                worker.step()
                found_per_step.append(gc.collect())
        return found_per_step

    # What the test process made before (the whole test session's heap) goes to the permanent
    # generation: each full collection then scans only what the run makes, which is where
    # the engine's cycles would be, instead of the session's every object, once a step.
    gc.collect()
    gc.freeze()
    try:
        [found] = tp.execute(build)
    finally:
        gc.unfreeze()
    assert len(found) > 59 and not any(found)


def test_an_inline_session_freezes_its_state_between_waits_and_thaws_on_close(
    gc_enabled, monkeypatch
):
    """Between an in-process session's waits, Python's collector resumes over what the caller
    made since, not over the dataflow's state (frozen, ``gc.freeze``); closing the session
    hands the state back, so a completed dataflow's cycles are still reclaimed."""
    monkeypatch.delenv("TIMELYPY_GC", raising=False)
    gc.unfreeze()

    def dataflow(scope):
        numbers_in, numbers = scope.new_collection("numbers")
        counts = numbers.map(lambda x: x % 7).count()
        return {"numbers": numbers_in, "counts": counts.capture(), "probe": counts.probe()}

    with tp.open_session(dataflow) as session:
        session.update_many("numbers", range(1000))
        session.advance_to(1)
        session.wait("probe")
        assert gc.isenabled()
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # the dataflow's operators and traces
        assert len(session.changes("counts")) == 7
    assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_other_modes_do_not_freeze(gc_enabled, monkeypatch):
    monkeypatch.setenv("TIMELYPY_GC", "tuned")
    gc.unfreeze()
    with collector.paused_collector(freeze=True):
        pass
    assert gc.get_freeze_count() == 0
