"""The ray backend: same answers as one inline worker; failures named, bounded, cleaned up.

One local Ray serves the whole session (``ray_session`` in conftest.py); every test checks that
no worker actor of ours is left alive afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import signal
import time
from typing import Any, Dict, List

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import timelypy as tp  # noqa: E402
from timelypy.errors import WaitTimeoutError, WorkerDiedError, WorkerError  # noqa: E402
from timelypy.workers.ray_actors import ACTOR_CLASS_NAME  # noqa: E402

try:
    import strategies as strat
    from differential_harness import run_and_check
except ModuleNotFoundError:  # pragma: no cover
    from tests import strategies as strat
    from tests.differential_harness import run_and_check

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180), pytest.mark.usefixtures("ray_session")]

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _load_example(name: str):
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def live_worker_actors() -> List[Dict[str, Any]]:
    from ray._private import state

    return [a for a in state.actors().values()
            if a.get("ActorClassName") == ACTOR_CLASS_NAME and a.get("State") != "DEAD"]


def assert_no_leftover_actors(within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while True:
        live = live_worker_actors()
        if not live:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"worker actors still alive: {[(a['ActorID'], a['State']) for a in live]}")
        time.sleep(0.05)


def consolidate(updates) -> Dict[Any, int]:
    acc: Dict[Any, int] = {}
    for data, t, diff in updates:
        acc[(data, t)] = acc.get((data, t), 0) + diff
    return {k: v for k, v in acc.items() if v}


# ------------------------------------------------------------------------------------------
# same answers


@st.composite
def program_and_script(draw):
    program = draw(strat.programs(max_depth=3))
    script = draw(strat.update_streams(program.n_inputs, max_actions=25))
    return program, script, program.n_inputs


@settings(max_examples=int(os.environ.get("TIMELYPY_RAY_EXAMPLES", "15")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program_and_script())
def test_random_programs_two_ray_workers_match_one_inline_worker(case):
    program, script, n_inputs = case
    on_ray = run_and_check(program, script, n_inputs, workers=2, backend="ray")
    inline = run_and_check(program, script, n_inputs, workers=1, backend="inline")
    assert consolidate(on_ray) == consolidate(inline), f"program {program!r}"


def _skip_level_build(size: int, interactive: bool):
    def build(worker):
        def dataflow(scope):
            session, manages = scope.new_collection(name="manages")
            out = manages.map(lambda mp: (mp[1], mp[0])).join(manages)
            return session, out.capture(), out.probe()

        session, captured, probe = worker.dataflow(dataflow)
        index, peers = worker.index, worker.peers
        for person in range(index, size, peers):
            session.insert((person // 2, person))
        if interactive:
            session.advance_to(1)
            session.flush()
            worker.step_until(probe, session.time, timeout=60)
        for person in range(1, size):
            if person % peers != index:
                continue
            session.advance_to(person)
            session.remove((person // 2, person))
            session.insert((person // 3, person))
            if interactive:
                session.advance_to(person + 1)
                session.flush()
                worker.step_until(probe, session.time, timeout=60)
        session.close()
        return captured

    return build


@pytest.mark.parametrize("size,interactive", [(10, False), (1000, False), (60, True)])
def test_skip_level_two_ray_workers_equals_one_inline_worker(size, interactive):
    skip_level = _load_example("skip_level")
    expected = skip_level.main(size, 1, interactive=interactive)
    results = tp.execute(_skip_level_build(size, interactive), workers=2, backend="ray",
                         timeout=120)
    assert len(results) == 2
    got = consolidate(u for captured in results for u in captured.updates())
    assert got == consolidate(expected)
    if size == 10:
        assert ((0, (0, 2)), 2, 1) in expected and ((4, (2, 9)), 4, -1) in expected
    assert_no_leftover_actors()


def test_results_in_index_order_and_callers_ray_kept():
    results = tp.execute(lambda w: (w.index, w.peers, os.getpid()), workers=3, backend="ray")
    assert [r[:2] for r in results] == [(0, 3), (1, 3), (2, 3)]
    assert len({r[2] for r in results}) == 3 and os.getpid() not in {r[2] for r in results}
    assert ray.is_initialized()  # the session's Ray is the caller's: never shut down by us
    assert_no_leftover_actors()


# ------------------------------------------------------------------------------------------
# failures


def test_worker_raising_is_named_with_its_traceback():
    def build(worker):
        def dataflow(scope):
            session, c = scope.new_collection()
            return session, c.probe()

        session, probe = worker.dataflow(dataflow)
        for t in range(1, 20):
            session.advance_to(t)
            session.flush()
            worker.step_until(probe, t, timeout=30)
            if worker.index == 1 and t == 5:
                raise ValueError("boom in worker one")
        return "done"

    with pytest.raises(WorkerError) as info:
        tp.execute(build, workers=2, backend="ray", timeout=60)
    err = info.value
    assert not isinstance(err, WorkerDiedError)
    assert err.worker == 1
    assert "worker 1" in str(err) and "boom in worker one" in str(err)
    assert "ValueError" in err.traceback_text and "in build" in err.traceback_text
    assert_no_leftover_actors()


def test_killed_actor_is_reported_as_died_within_bounded_time():
    def build(worker):
        def dataflow(scope):
            session, c = scope.new_collection()
            return session, c.probe()

        session, probe = worker.dataflow(dataflow)
        for t in range(1, 200):
            session.insert(t)
            session.advance_to(t)
            session.flush()
            worker.step_until(probe, t, timeout=60)
            if worker.index == 1 and t == 20:
                os.kill(os.getpid(), signal.SIGKILL)
        return "done"

    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as info:
        tp.execute(build, workers=2, backend="ray", timeout=120)
    elapsed = time.monotonic() - start
    assert info.value.worker == 1
    assert "worker 1" in str(info.value)
    assert elapsed < 30, f"the death took {elapsed:.1f} s to report"
    assert_no_leftover_actors()


def test_timeout_kills_the_actors():
    def build(worker):
        if worker.index == 0:
            time.sleep(60)
        return worker.index

    start = time.monotonic()
    with pytest.raises(WaitTimeoutError, match="did not finish within"):
        tp.execute(build, workers=2, backend="ray", timeout=3)
    assert time.monotonic() - start < 20
    assert_no_leftover_actors()
