"""A Ray that timelypy starts itself: reused across sessions and jobs, ended with its driver.

Ray forks a local cluster's ``gcs_server`` and ``raylet`` with ``PR_SET_PDEATHSIG``, which Linux
fires when the *thread* that forked them ends. A session used to start Ray from its job thread,
so after the first ``close()`` both daemons were dead and the next session hung ~60 s before
Ray terminated the driver. And the raylet's agents outlived a ``SIGKILL``-ed driver by more than
a minute. These tests run real drivers in fresh processes - so the suite's shared Ray
(``tests/conftest.py``) cannot hide the bug - each with a temp dir of its own, and fail if any
process of that Ray is left.

The watchdog tests need no Ray: a fake driver with a fake daemon (its command line names the
session dir) and a renamed grandchild (as Ray's agents rename themselves); nor does the test of
the owner thread, which starts a child with a parent-death signal as Ray does.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from support.paths import ROOT
from support.ray_cluster import (
    LOOPBACK_ADDRESSES,
    RAY_AUTH_VARIABLES,
    new_ray_base_dir,
    processes_under,
    ray_token_environment,
    stop_processes_under,
)

psutil = pytest.importorskip("psutil", reason="the process checks need psutil (dev extra)")


linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="the watchdog completes Linux's parent-death signal",
)


def _child_env(base: str, token: str) -> Dict[str, str]:
    """A driver's environment: this checkout importable, Ray's files under ``base``, token
    authentication with this run's token, no Ray to connect to, and not Ray's single-machine
    mode (``tests/conftest.py`` sets it for the suite): a Ray that timelypy starts must keep
    to loopback by itself."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in RAY_AUTH_VARIABLES
        and k not in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    }
    env.update(ray_token_environment(token))
    env.update(PYTHONPATH=str(ROOT), RAY_TMPDIR=base, TPY_TEST_BASE=base)
    return env


def _alive(pids: List[int]) -> List[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            pass
    return alive


def _wait_gone(pids: List[int], limit: float) -> List[int]:
    deadline = time.monotonic() + limit
    left = _alive(pids)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _alive(left)
    return left


# ------------------------------------------------------------------------------------------
# Ray started by timelypy in a fresh driver

_REOPEN = """
import json, os, sys, time
import psutil
import timelypy as tp
from timelypy.workers.launch import ray_actors

def dataflow(scope):
    words_in, words = scope.new_collection()
    return {"words": words_in, "counts": words.count().capture(), "probe": words.probe()}

def build(worker):
    def flow(scope):
        numbers_in, numbers = scope.new_collection()
        return numbers_in, numbers.map(lambda x: x % 3).count().capture()
    numbers_in, counts = worker.dataflow(flow)
    if worker.index == 0:
        for x in range(30):
            numbers_in.insert(x)
    numbers_in.close()
    worker.step_until_done()
    return counts.consolidated()

def daemons():
    import ray
    node = ray._private.worker._global_node
    return {kind: [info.process.pid for info in infos]
            for kind, infos in node.all_processes.items()}

report = {"rounds": []}
for r in range(3):
    t0 = time.monotonic()
    with tp.open_session(dataflow, workers=2, backend="ray", timeout=120,
                         num_cpus_per_worker=0.25) as s:
        for word in ["ray", "timely", "ray", f"round{r}"]:
            s.insert("words", word)
        s.advance_to(1)
        s.wait("probe")
        changes = sorted(s.changes("counts"))
    session_s = time.monotonic() - t0
    time.sleep(0.5)  # the job thread has ended: a death signal would have fired by now
    import ray
    gcs = ray.get_runtime_context().gcs_address
    found = daemons()
    status = {kind: [psutil.Process(pid).status() for pid in pids]
              for kind, pids in found.items() if kind in ("gcs_server", "raylet")}
    if r == 0:  # token mode as Ray sets it; loopback as timelypy starts it
        from ray._raylet import AuthenticationMode, get_authentication_mode
        report["token_mode"] = get_authentication_mode() == AuthenticationMode.TOKEN
        report["listening_on"] = sorted({
            c.laddr.ip for p in psutil.Process().children(recursive=True)
            for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN})
    t0 = time.monotonic()
    parts = tp.execute(build, workers=2, backend="ray", timeout=120, num_cpus_per_worker=0.25)
    report["rounds"].append({"changes": changes, "session_s": session_s, "gcs": gcs,
                             "daemon_status": status, "daemons": found,
                             "execute": sorted(u for part in parts for u in part),
                             "execute_s": time.monotonic() - t0})
t0 = time.monotonic()
ray_actors.shutdown()
report["shutdown_s"] = time.monotonic() - t0
# after a shutdown, the next job starts a new Ray (and defines its actor class there again)
parts = tp.execute(build, workers=2, backend="ray", timeout=120, num_cpus_per_worker=0.25)
import ray
report["restarted"] = {"execute": sorted(u for part in parts for u in part),
                       "gcs": ray.get_runtime_context().gcs_address}
ray_actors.shutdown()
me = psutil.Process()
report["left_children"] = [(p.pid, p.name()) for p in me.children(recursive=True)
                           if p.status() != psutil.STATUS_ZOMBIE]
print("REPORT " + json.dumps(report), flush=True)
"""


@linux_only
@pytest.mark.ray
@pytest.mark.timeout(600)
def test_sessions_and_jobs_reopen_three_times_on_a_ray_timelypy_started(ray_test_token):
    """Open, close and reopen a Ray session three times in one fresh driver, with an execute
    job after each: one Ray serves them all, its daemons outlive every session's job thread,
    and ``shutdown()`` ends it with every process of its own in seconds; the next job then
    starts a new Ray."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    base = new_ray_base_dir()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _REOPEN],
            env=_child_env(base, ray_test_token),
            capture_output=True,
            text=True,
            timeout=480,
            cwd=base,
            check=False,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
        assert done.returncode == 0 and lines, (
            f"the driver failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n"
            f"{done.stderr[-4000:]}"
        )
        report: Dict[str, Any] = json.loads(lines[-1][len("REPORT ") :])
        rounds = report["rounds"]
        assert len(rounds) == 3
        expected_jobs = [[[0, 10], 0, 1], [[1, 10], 0, 1], [[2, 10], 0, 1]]
        for r, one in enumerate(rounds):
            assert one["changes"] == sorted(
                [[["ray", 2], 0, 1], [["timely", 1], 0, 1], [[f"round{r}", 1], 0, 1]]
            ), one
            assert one["execute"] == expected_jobs, one
            for kind, states in one["daemon_status"].items():
                assert states and all(s not in ("zombie", "dead") for s in states), (
                    f"round {r}: Ray's {kind} is {states} after the session closed"
                )
        assert report["token_mode"]
        assert report["listening_on"] and set(report["listening_on"]) <= set(LOOPBACK_ADDRESSES), (
            report["listening_on"]
        )
        # the same Ray throughout: one GCS, the same daemon processes
        assert len({one["gcs"] for one in rounds}) == 1
        assert all(one["daemons"] == rounds[0]["daemons"] for one in rounds)
        # no ~60 s GCS reconnection stall in a later round
        assert max(one["session_s"] for one in rounds[1:]) < 60, rounds
        assert report["shutdown_s"] < 8, report["shutdown_s"]
        assert report["restarted"]["execute"] == expected_jobs
        assert report["restarted"]["gcs"] != rounds[0]["gcs"]
        assert report["left_children"] == [], report["left_children"]
        assert stop_processes_under(base, grace=5) == [], "processes of the driver's Ray were left"
    finally:
        stop_processes_under(base, grace=1)
        shutil.rmtree(base, ignore_errors=True)


_STAY_UP = """
import json, os, sys, time
import psutil
import timelypy as tp
results = tp.execute(lambda w: w.index, workers=2, backend="ray", timeout=120,
                     num_cpus_per_worker=0.25)
import ray
session_dir = ray._private.worker._global_node.get_session_dir_path()
me = psutil.Process()
family = [{"pid": p.pid, "name": p.name()} for p in me.children(recursive=True)]
print("REPORT " + json.dumps({"results": results, "session_dir": session_dir,
                              "family": family}), flush=True)
time.sleep(600)
"""


@linux_only
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_sigkilled_driver_takes_its_ray_with_it(ray_test_token):
    """A driver whose Ray timelypy started is SIGKILLed: within a few seconds no process of
    that Ray is left - the daemons, the dashboard and runtime-env agents, and the watchdog."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    base = new_ray_base_dir()
    log_path = os.path.join(base, "driver.log")
    try:
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-u", "-c", _STAY_UP],
                env=_child_env(base, ray_test_token),
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=base,
            )
        try:
            line = ""
            deadline = time.monotonic() + 180
            while not line.startswith("REPORT "):
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(
                        "the driver did not report: "
                        + pathlib.Path(log_path).read_text(errors="replace")[-3000:]
                    )
                line = proc.stdout.readline()
            report = json.loads(line[len("REPORT ") :])
            assert report["results"] == [0, 1]
            # (the job's actor processes may be on their way out: only the living count)
            pids = _alive([p["pid"] for p in report["family"]])
            family = [p for p in report["family"] if p["pid"] in pids]
            names = {p["name"] for p in family}
            assert {"gcs_server", "raylet"} <= names, names
            assert any("Agent" in name for name in names), names  # the raylet's agents
        finally:
            proc.kill()
            proc.wait(timeout=30)
        killed = time.monotonic()
        left = _wait_gone(pids, limit=10)
        gone_after = time.monotonic() - killed
        assert left == [], (
            f"alive 10 s after the driver was killed: "
            f"{[(p['pid'], p['name']) for p in family if p['pid'] in left]}"
        )
        assert processes_under(report["session_dir"]) == []
        assert gone_after < 10, gone_after
        assert (
            "stopped"
            in pathlib.Path(report["session_dir"], "logs", "timelypy_watchdog.err").read_text()
        )
    finally:
        stop_processes_under(base, grace=1)
        shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------------------------------
# the watchdog alone, with a fake driver

_FAKE_DRIVER = """
import os, subprocess, sys, time
session_dir, watchdog_path = sys.argv[1], sys.argv[2]
# a daemon that names the session dir, and under it an 'agent' that does not
daemon = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
    "'import time; time.sleep(600)']); time.sleep(600)", "--session-dir=" + session_dir])
watchdog = subprocess.Popen([sys.executable, "-I", watchdog_path, str(os.getpid()), session_dir],
                            stdin=subprocess.PIPE, start_new_session=True)
print(daemon.pid, watchdog.pid, flush=True)
if sys.stdin.readline().strip() == "stop":
    watchdog.stdin.write(b"stop\\n")
    watchdog.stdin.close()
    watchdog.wait(timeout=30)
    print("stopped", flush=True)
time.sleep(600)
"""


@contextlib.contextmanager
def _fake_driver() -> Iterator[Tuple[Any, List[int], int, Any, str]]:
    """A fake driver with its watchdog, its daemon family and a bystander, in a base dir of
    its own: ``(driver, family, watchdog_pid, bystander, base)``; everything ended after."""
    base = new_ray_base_dir()
    driver = bystander = None
    try:
        driver, family, watchdog_pid, bystander = _start_fake_driver(base)
        yield driver, family, watchdog_pid, bystander, base
    finally:
        for proc in (driver, bystander):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        stop_processes_under(base, grace=1)
        shutil.rmtree(base, ignore_errors=True)


def _start_fake_driver(base: str):
    from timelypy.workers.launch import ray_watchdog

    session_dir = os.path.join(base, "session_fake")
    os.makedirs(session_dir)
    driver = subprocess.Popen(
        [sys.executable, "-c", _FAKE_DRIVER, session_dir, ray_watchdog.__file__],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    daemon_pid, watchdog_pid = (int(x) for x in driver.stdout.readline().split())
    # a bystander naming the same dir but not the driver's child: never touched
    bystander = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", session_dir]
    )
    deadline = time.monotonic() + 30
    family: List[int] = []
    while time.monotonic() < deadline:  # until the daemon started its 'agent'
        family = [p.pid for p in psutil.Process(daemon_pid).children()]
        if family:
            break
        time.sleep(0.05)
    assert family, "the fake daemon did not start its child"
    time.sleep(2.5)  # a scan of the watchdog (one a second) saw the whole family
    return driver, [daemon_pid] + family, watchdog_pid, bystander


@linux_only
@pytest.mark.timeout(120)
def test_watchdog_stops_the_session_processes_when_the_driver_is_killed():
    with _fake_driver() as (driver, family, watchdog_pid, bystander, base):
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        # the daemon has no death signal here: only the watchdog can end it and its child
        assert _wait_gone(family + [watchdog_pid], limit=10) == []
        assert bystander.poll() is None, "the watchdog hit a process that is not the driver's"


@linux_only
@pytest.mark.timeout(120)
def test_watchdog_stop_ends_the_session_processes_and_leaves_the_driver():
    with _fake_driver() as (driver, family, watchdog_pid, bystander, base):
        driver.stdin.write("stop\n")
        driver.stdin.flush()
        assert driver.stdout.readline().strip() == "stopped"
        assert _alive(family + [watchdog_pid]) == []
        assert driver.poll() is None and bystander.poll() is None


@linux_only
def test_watchdog_finds_the_family_by_session_dir_and_parent():
    from timelypy.workers.launch.ray_watchdog import session_processes

    with _fake_driver() as (driver, family, watchdog_pid, bystander, base):
        found = {
            pid for pid, _ in session_processes(driver.pid, os.path.join(base, "session_fake"))
        }
        # not the driver nor the bystander; the watchdog, seen from here, is a child of the
        # driver naming the dir too (it leaves itself out of its own list)
        assert found == set(family) | {watchdog_pid}


# ------------------------------------------------------------------------------------------
# the owner thread, without Ray: what Ray's daemons go through

_THREAD_DEATH = """
import ctypes, json, os, signal, subprocess, sys, threading, time
from timelypy.workers.launch import ray_start

libc = ctypes.CDLL(None, use_errno=True)

def start_child():
    # as Ray starts gcs_server and raylet: SIGKILL when the parent *thread* ends
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                            preexec_fn=lambda: libc.prctl(1, signal.SIGKILL, 0, 0, 0))

children = {}

def from_a_thread(name, via_owner):
    call = (lambda: ray_start._in_owner_thread(start_child)) if via_owner else start_child
    children[name] = call()

for name, via_owner in (("direct", False), ("owner", True)):
    t = threading.Thread(target=from_a_thread, args=(name, via_owner))
    t.start()
    t.join(timeout=30)
time.sleep(1.0)  # both starting threads have ended
report = {name: child.poll() for name, child in children.items()}
report["owner_thread"] = ray_start._owner.name if ray_start._owner else None
for child in children.values():
    child.kill()
    child.wait(timeout=10)
print(json.dumps(report))
"""


@linux_only
@pytest.mark.timeout(120)
def test_a_child_started_through_the_owner_thread_outlives_the_calling_thread():
    """The mechanism behind the fix, without Ray: a child with a parent-death signal dies when
    the thread that started it ends, unless it was started by the owner thread."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", _THREAD_DEATH],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["direct"] == -signal.SIGKILL  # killed when its starting thread ended
    assert report["owner"] is None  # still running
    assert report["owner_thread"] == "timelypy-ray-owner"
