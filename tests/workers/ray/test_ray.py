"""The ray backend: same answers as one inline worker; failures named, bounded, cleaned up.

One local Ray serves the whole session (``ray_session`` in conftest.py, token authentication
on); every test checks that no worker actor of ours is left alive afterwards. The tests of
Ray's authentication check that the session's Ray refuses a client without its token, and that
a Ray started by timelypy itself keeps Ray's default (token authentication).
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import strategies as strat
from support.harness import run_and_check
from support.paths import ROOT
from support.ray_cluster import (
    RAY_AUTH_VARIABLES,
    new_ray_base_dir,
    non_loopback_listeners,
    probe_ray_gcs,
    stop_processes_under,
)
from workers.ray.programs import programs_build

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")

import timelypy as tp  # noqa: E402
from timelypy.errors import WaitTimeoutError, WorkerDiedError, WorkerError  # noqa: E402
from timelypy.workers.launch.ray_actors import ACTOR_CLASS_NAME  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180), pytest.mark.usefixtures("ray_session")]


def _load_example(name: str):
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def live_worker_actors() -> List[Dict[str, Any]]:
    from ray._private import state

    return [
        a
        for a in state.actors().values()
        if a.get("ActorClassName") == ACTOR_CLASS_NAME and a.get("State") != "DEAD"
    ]


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


PROGRAMS_PER_JOB = 5
"""Programs per Ray job, side by side in one dataflow (a Ray job's start costs more than a
small program): ``TIMELYPY_RAY_EXAMPLES`` jobs of this many programs each."""


@settings(
    max_examples=int(os.environ.get("TIMELYPY_RAY_EXAMPLES", "3")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(program_and_script(), min_size=PROGRAMS_PER_JOB, max_size=PROGRAMS_PER_JOB))
def test_random_programs_two_ray_workers_match_one_inline_worker(cases):
    """Each program's output on two Ray workers equals its output on one inline worker, which
    is checked against the from-scratch reference at every time."""
    results = tp.execute(programs_build(cases), workers=2, backend="ray", timeout=300)
    for k, (program, script, n_inputs) in enumerate(cases):
        on_ray = [update for per_worker in results for update in per_worker[k]]
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
    results = tp.execute(
        _skip_level_build(size, interactive), workers=2, backend="ray", timeout=120
    )
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
# Ray's authentication


def _token_mode() -> bool:
    from ray._raylet import AuthenticationMode, get_authentication_mode

    return get_authentication_mode() == AuthenticationMode.TOKEN


def test_session_ray_has_token_auth_and_refuses_clients_without_the_token(ray_test_token):
    import psutil

    assert _token_mode()
    address = ray.get_runtime_context().gcs_address
    # Loopback only (conftest.py puts the tests' Rays in Ray's single-machine mode).
    assert address.startswith("127.0.0.1:"), address
    assert non_loopback_listeners(psutil.Process().children(recursive=True)) == {}
    # Without authentication, and with a wrong token: refused by the GCS itself.
    refused = probe_ray_gcs(address, {"RAY_AUTH_MODE": "disabled"})
    assert refused.startswith("REFUSED AuthenticationError"), refused
    wrong = probe_ray_gcs(address, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64})
    assert wrong.startswith("REFUSED AuthenticationError"), wrong
    # The same probe with this run's token gets in (so the refusals are the token's doing).
    assert (
        probe_ray_gcs(address, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": ray_test_token})
        == "ACCEPTED"
    )

    # Workers see token mode too.
    @ray.remote(num_cpus=0)
    def auth_mode_in_a_worker():
        return os.environ.get("RAY_AUTH_MODE")

    assert ray.get(auth_mode_in_a_worker.remote(), timeout=60) == "token"


def test_starting_ray_sets_no_environment_variable(monkeypatch):
    """timelypy leaves the environment (and with it Ray's authentication) alone."""
    from timelypy.workers.launch import ray_actors, ray_start

    seen = {}

    def fake_init(**kwargs):
        seen["kwargs"] = kwargs
        seen["environ"] = dict(os.environ)

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", fake_init)
    monkeypatch.setattr(ray_start, "_started_here", False)  # put back after the fake start
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    before = dict(os.environ)
    ray_actors._ensure_ray(None, 2, {})
    assert seen["environ"] == before and dict(os.environ) == before
    assert seen["kwargs"] == {
        "address": "local",
        "include_dashboard": False,
        "log_to_driver": False,
        "num_cpus": 2,
    }


_STARTS_RAY = """
import json, os, sys
import timelypy as tp
results = tp.execute(lambda w: w.index, workers=2, backend="ray", timeout=120)
import ray
from ray._raylet import AuthenticationMode, get_authentication_mode
report = {"results": results, "gcs": ray.get_runtime_context().gcs_address,
          "token_mode": get_authentication_mode() == AuthenticationMode.TOKEN}
with open(sys.argv[1] + ".part", "w") as f:
    json.dump(report, f)
os.rename(sys.argv[1] + ".part", sys.argv[1])
sys.stdin.read()  # stay up (and keep Ray up) until the test closes our stdin
"""


def test_local_ray_started_by_timelypy_keeps_ray_default_token_auth():
    """A process with no Ray settings at all: timelypy starts a local Ray, Ray generates a
    token (in that process's home) and the GCS refuses anyone without it."""
    base = new_ray_base_dir()
    home = os.path.join(base, "home")
    report_path = os.path.join(base, "report.json")
    os.mkdir(home)
    env = {
        k: v for k, v in os.environ.items() if k not in RAY_AUTH_VARIABLES and k != "RAY_ADDRESS"
    }
    env.update(HOME=home, RAY_TMPDIR=base, PYTHONPATH=str(ROOT))
    log_path = os.path.join(base, "child.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _STARTS_RAY, report_path],
            env=env,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=base,
        )
    try:
        deadline = time.monotonic() + 150
        while not os.path.exists(report_path):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait(timeout=10)
                pytest.fail(
                    "the child did not report: "
                    + pathlib.Path(log_path).read_text(errors="replace")[-3000:]
                )
            time.sleep(0.2)
        with open(report_path) as f:
            report = json.load(f)
        assert report["results"] == [0, 1] and report["token_mode"]
        token_file = pathlib.Path(home, ".ray", "auth_token")
        assert token_file.is_file(), "Ray generated no token for its new local cluster"
        refused = probe_ray_gcs(report["gcs"], {"RAY_AUTH_MODE": "disabled"})
        assert refused.startswith("REFUSED AuthenticationError"), refused
        assert (
            probe_ray_gcs(
                report["gcs"], {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file)}
            )
            == "ACCEPTED"
        )
    finally:
        try:
            proc.stdin.close()
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        finally:
            stop_processes_under(base)
            shutil.rmtree(base, ignore_errors=True)


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
