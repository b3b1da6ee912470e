"""Sessions that checkpoint and restore: same and other worker counts, other backends, automatic
checkpoints, refusals, and a driver killed at a random moment and restored."""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import timelypy as tp
from timelypy.errors import TimelyError

NODES = 12
TIMES = 8


def dataflow(scope):
    """Out-degrees of a changing graph, and the nodes two hops from each node (a join)."""
    edges_in, edges = scope.new_collection()
    degrees = edges.map(lambda e: e[0]).count()
    reversed_edges = edges.map(lambda e: (e[1], e[0]))
    two_hops = reversed_edges.join(edges).map(lambda kv: (kv[1][0], kv[1][1])).distinct()
    by_node = two_hops.arrange_by_key()
    return {
        "edges": edges_in,
        "degrees": degrees.capture(),
        # probed through the arrangement: once the probe passes a time, lookups see it
        "probe": by_node.as_collection(lambda k, v: (k, v)).probe(),
        "degree_probe": degrees.probe(),
        "by_node": by_node,
    }


def updates_at(t: int) -> List[Tuple[Tuple[int, int], int]]:
    """The edge changes at time ``t``: inserts, and removals of edges inserted two times ago."""
    rng = random.Random(t)
    added = [((rng.randrange(NODES), rng.randrange(NODES)), 1) for _ in range(15)]
    if t >= 2:
        old = random.Random(t - 2)
        removed = [((old.randrange(NODES), old.randrange(NODES)), -1) for _ in range(5)]
        added += removed
    return added


def feed(s: tp.DataflowSession, start: int, end: int) -> None:
    """The updates of times ``start`` to ``end - 1``, each followed by an advance."""
    for t in range(start, end):
        for edge, diff in updates_at(t):
            s.update("edges", edge, diff)
        s.advance_to(t + 1)
    s.wait("probe")
    s.wait("degree_probe")


def contents(changes: List[Tuple[Any, Any, int]]) -> Dict[Any, int]:
    total: Counter = Counter()
    for data, _, diff in changes:
        total[data] += diff
    return {k: v for k, v in total.items() if v}


def answers(s: tp.DataflowSession) -> Dict[int, Dict[Any, int]]:
    return {n: s.lookup("by_node", n) for n in range(NODES)}


@pytest.fixture(scope="module")
def reference():
    """The uninterrupted run: degrees after every time, and the final two-hop answers."""
    with tp.open_session(dataflow) as s:
        feed(s, 0, TIMES)
        return contents(s.changes("degrees")), answers(s)


def checkpoint_then_restore(location, reference, before, after, split=4):
    """Run ``before`` to time ``split``, checkpoint, close; restore with ``after``, feed the
    rest: contents and lookups equal the uninterrupted run's."""
    with tp.open_session(dataflow, checkpoint=tp.Checkpoints(str(location)), **before) as s:
        feed(s, 0, split)
        manifest = s.checkpoint()
        assert manifest.time == split and manifest.peers == s.workers
    with tp.open_session(dataflow, restore=str(location), **after) as s:
        assert s.time == split and s.restored_at == split
        state = s.restored("degrees")
        feed(s, split, TIMES)
        later = s.changes("degrees")
        assert all(t >= split for _, t, _ in later), "changes before the checkpoint came again"
        degrees, two_hops = reference
        assert contents(state + later) == degrees
        assert answers(s) == two_hops


@pytest.mark.timeout(120)
@pytest.mark.parametrize("before,after", [(1, 1), (2, 2), (2, 3), (3, 1)])
def test_inline_checkpoint_and_restore(tmp_path, reference, before, after):
    checkpoint_then_restore(tmp_path, reference, {"workers": before}, {"workers": after})


@pytest.mark.processes
@pytest.mark.timeout(240)
@pytest.mark.parametrize("before,after", [(2, 3), (3, 1)])
def test_processes_checkpoint_and_restore_rescaled(tmp_path, reference, before, after):
    run = {"backend": "processes"}
    checkpoint_then_restore(
        tmp_path, reference, {"workers": before, **run}, {"workers": after, **run}
    )


@pytest.mark.processes
@pytest.mark.timeout(240)
def test_inline_checkpoint_restored_on_processes(tmp_path, reference):
    checkpoint_then_restore(
        tmp_path, reference, {"workers": 2}, {"workers": 2, "backend": "processes"}
    )


@pytest.mark.timeout(120)
def test_automatic_checkpoints_every_k_times_and_every_s_seconds(tmp_path, caplog):
    every = tp.Checkpoints(str(tmp_path / "k"), every_times=3, keep=2)
    with caplog.at_level("INFO", logger="timelypy.workers.sessions"):
        with tp.open_session(dataflow, workers=2, checkpoint=every) as s:
            feed(s, 0, 7)
            assert s.last_checkpoint is not None and s.last_checkpoint.time == 6
    assert "automatic checkpoint at 3" in caplog.text
    assert "automatic checkpoint at 6" in caplog.text
    seconds = tp.Checkpoints(str(tmp_path / "s"), every_seconds=0.2)
    with tp.open_session(dataflow, checkpoint=seconds) as s:
        feed(s, 0, 1)
        assert s.last_checkpoint is None  # too early
        time.sleep(0.3)
        feed(s, 1, 2)
        assert s.last_checkpoint is not None and s.last_checkpoint.time == 2
    # an update made ahead does not hold an automatic checkpoint back: it is pending work
    ahead = tp.Checkpoints(str(tmp_path / "a"), every_times=1)
    with tp.open_session(dataflow, checkpoint=ahead) as s:
        s.update_at("edges", (1, 2), time=2, diff=1)
        s.advance_to(1)
        assert s.last_checkpoint is not None and s.last_checkpoint.time == 1
    # a restore with the Checkpoints themselves goes on checkpointing there
    with tp.open_session(dataflow, restore=every) as s:
        assert s.time == 6
        feed(s, 6, 9)
        assert s.last_checkpoint.time == 9


@pytest.mark.timeout(120)
def test_checkpoints_are_refused_when_the_time_is_not_closed(tmp_path):
    with tp.open_session(dataflow) as s:
        with pytest.raises(TimelyError, match=r"checkpoint\(\) needs a location"):
            s.checkpoint()
    with tp.open_session(dataflow, checkpoint=tp.Checkpoints(str(tmp_path))) as s:
        feed(s, 0, 2)
        s.insert("edges", (1, 2))
        with pytest.raises(TimelyError, match=r"1 update\(s\) are buffered at or after it"):
            s.checkpoint()
        s.flush()
        with pytest.raises(TimelyError, match=r"updates were sent at it \('edges' at 2"):
            s.checkpoint()
        s.advance_to(3)
        s.update_at("edges", (2, 3), time=5, diff=1)  # ahead: pending work, kept as state
        s.flush()
        assert s.checkpoint().time == 3


def test_a_memory_location_is_refused_for_workers_of_other_processes():
    for backend in ("processes", "ray"):
        with pytest.raises(ValueError, match=f"'memory://job'.*the '{backend}' backend"):
            tp.open_session(dataflow, backend=backend, checkpoint=tp.Checkpoints("memory://job"))
        with pytest.raises(ValueError, match="cannot reach"):
            tp.open_session(dataflow, backend=backend, restore="memory://job")


def test_checkpoints_settings_are_checked():
    with pytest.raises(ValueError, match="every_times must be an int >= 1"):
        tp.Checkpoints("/tmp/x", every_times=0)
    with pytest.raises(ValueError, match="keep must be an int >= 1"):
        tp.Checkpoints("/tmp/x", keep=0)
    assert "secret" not in repr(tp.Checkpoints("/tmp/x", signing_key=b"secret"))


def two_inputs(scope):
    a_in, a = scope.new_collection()
    b_in, b = scope.new_collection()
    both = a.concat(b)
    return {"a": a_in, "b": b_in, "probe": both.probe(), "out": both.capture()}


@pytest.mark.timeout(120)
def test_restore_errors_name_the_location_and_the_differences(tmp_path):
    from timelypy import errors

    with pytest.raises(errors.CheckpointError, match=f"no valid checkpoint.*{tmp_path.name}"):
        tp.open_session(dataflow, restore=str(tmp_path))
    with tp.open_session(two_inputs, checkpoint=tp.Checkpoints(str(tmp_path))) as s:
        s.insert("a", 1)
        s.advance_to(1, input="a")
        with pytest.raises(TimelyError, match=r"inputs are at other times \('a' at 1\)"):
            s.checkpoint()
        s.advance_to(1)
        s.checkpoint()
    with pytest.raises(errors.RecoveryError, match="another program; its operators differ"):
        tp.open_session(dataflow, restore=str(tmp_path))


# ------------------------------------------------------------------------------------------
# a driver killed at a random moment, restored by another: inline, processes and ray

DRIVER = r"""
import json, sys
import timelypy as tp
sys.path.insert(0, {here!r})
from test_session_checkpoint import dataflow, updates_at, answers, contents, TIMES, NODES



def main():
    location, mode, backend, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    every = tp.Checkpoints(location, every_times=2)
    options = dict(workers=workers, backend=backend, timeout=120)
    if backend == "ray":
        options["num_cpus_per_worker"] = 0.25
    if mode == "first":
        s = tp.open_session(dataflow, checkpoint=every, **options)
        start = 0
    else:
        s = tp.open_session(dataflow, restore=every, **options)
        start = s.time
        state = s.restored("degrees")
    print("opened", start, flush=True)
    for t in range(start, TIMES):
        for edge, diff in updates_at(t):
            s.update("edges", edge, diff)
        s.advance_to(t + 1)
        print("advanced", t + 1, flush=True)
    s.wait("probe"); s.wait("degree_probe")
    if mode != "first":
        later = s.changes("degrees")
        assert all(t >= start for _, t, _ in later)
        result = {{"start": start, "degrees": sorted(contents(state + later).items()),
                  "two_hops": sorted((n, sorted(v.items())) for n, v in answers(s).items())}}
        print("RESULT " + json.dumps(result), flush=True)
    s.close()


if __name__ == "__main__":  # worker processes import this script
    main()
"""

KILL_RUNS = [
    pytest.param("inline", 1, "inline", 2, id="inline-1-then-inline-2"),
    pytest.param(
        "processes", 2, "processes", 3, marks=pytest.mark.processes, id="processes-2-then-3"
    ),
    # A killed Ray driver once (its Ray must follow it), restored on processes: restoring onto
    # Ray with more workers is tests/recovery/test_ray_recovery.py's (a second driver starting
    # a Ray of its own here would add ~15 s and no other path).
    pytest.param(
        "ray",
        2,
        "processes",
        2,
        marks=[pytest.mark.ray, pytest.mark.processes],
        id="ray-2-then-processes-2",
    ),
]


def read_until(proc: subprocess.Popen, done: Any, limit: float) -> List[str]:
    """The lines ``proc`` prints until ``done(line)``; fails after ``limit`` seconds or if it
    ends first (with what it printed)."""
    assert proc.stdout is not None
    lines: List[str] = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if not ready:
            continue
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if done(line):
            return lines
    proc.kill()
    pytest.fail(f"the driver ended or stalled before the moment to kill it: {lines[-20:]}")


def driver_environment(tmp_path: Path, here: str, backend: str, token: str) -> Dict[str, str]:
    """The drivers' environment: this checkout and the test module importable; on Ray, a Ray
    of its own that timelypy starts (no address to connect to, token authentication with this
    run's token, its files under ``tmp_path``'s base dir)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), here, *sys.path])}
    if backend == "ray":
        from support.ray_cluster import RAY_AUTH_VARIABLES, ray_token_environment

        for name in (*RAY_AUTH_VARIABLES, "RAY_ADDRESS", "TIMELYPY_RAY_ADDRESS"):
            env.pop(name, None)
        env.update(ray_token_environment(token))
    return env


@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend,workers,then_backend,then_workers", KILL_RUNS)
def test_a_killed_driver_is_restored_from_its_last_checkpoint(
    tmp_path, reference, request, backend, workers, then_backend, then_workers
):
    """A driver with checkpoints every 2 times is SIGKILLed at a random moment after its first
    one; a second driver restores the last (onto another number of workers), feeds the rest,
    and its contents and lookups equal the uninterrupted run's. On Ray the killed driver's Ray
    (started by timelypy in it) is gone within seconds: its watchdog stops what is left."""
    rays = any(b == "ray" for b in (backend, then_backend))
    token = request.getfixturevalue("ray_test_token") if rays else ""
    script = tmp_path / "driver.py"
    here = str(Path(__file__).parent)
    script.write_text(DRIVER.format(here=here))
    location = str(tmp_path / "checkpoints")
    bases: List[str] = []

    def start(mode: str, run_backend: str, run_workers: int) -> subprocess.Popen:
        env = driver_environment(tmp_path, here, run_backend, token)
        if run_backend == "ray":
            from support.ray_cluster import new_ray_base_dir

            bases.append(new_ray_base_dir())
            env["RAY_TMPDIR"] = bases[-1]
        errors = open(tmp_path / f"{mode}.err", "w")  # a file: a full pipe would block it
        return subprocess.Popen(
            [sys.executable, "-u", str(script), location, mode, run_backend, str(run_workers)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=env,
            start_new_session=True,
        )

    def tail(mode: str) -> str:
        return (tmp_path / f"{mode}.err").read_text(errors="replace")[-3000:]

    rng = random.Random()
    kill_after = rng.randrange(3, TIMES)
    try:
        first = start("first", backend, workers)
        read_until(
            first, lambda x: x.startswith("advanced") and int(x.split()[1]) >= kill_after, 300
        )
        time.sleep(rng.uniform(0, 0.2))  # at a random moment: between advances, or in one
        if backend == "ray":
            os.kill(first.pid, signal.SIGKILL)  # the driver alone: its Ray must follow it
        else:
            os.killpg(first.pid, signal.SIGKILL)  # the driver and its workers: a lost machine
        first.wait(30)
        if backend == "ray":
            assert_ray_gone(bases[-1])
        second = start("restore", then_backend, then_workers)
        try:
            out, _ = second.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            second.kill()
            second.communicate(timeout=30)
            pytest.fail(f"the restoring driver did not finish within 300 s: {tail('restore')}")
    finally:
        for base in bases:
            _stop_and_remove(base)
    assert second.returncode == 0, tail("restore")
    line = [x for x in out.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT ") :])
    degrees, two_hops = reference
    assert result["start"] % 2 == 0 and result["start"] >= 2
    assert {tuple(k) if isinstance(k, list) else k: v for k, v in result["degrees"]} == degrees
    assert {n: dict(v) for n, v in result["two_hops"]} == {n: dict(v) for n, v in two_hops.items()}


def assert_ray_gone(base: str, limit: float = 20.0) -> None:
    """No process of the Ray under ``base`` is left within ``limit`` seconds."""
    from support.ray_cluster import processes_under

    deadline = time.monotonic() + limit
    left = processes_under(base)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = processes_under(base)
    names = []
    for proc in left:
        try:
            names.append((proc.pid, proc.name()))
        except Exception:  # noqa: BLE001 - gone meanwhile
            pass
    assert not names, f"the killed driver's Ray is still running after {limit} s: {names}"


def _stop_and_remove(base: str) -> None:
    from support.ray_cluster import stop_processes_under

    stop_processes_under(base, grace=1)
    shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------------------------------
# a damaged checkpoint: refused naming the file, the one before restored


def _damage(location: Path, checkpoint_id: str) -> str:
    """Flip the last byte of worker 0's part index of ``checkpoint_id`` (a file only that
    checkpoint has, of the same size: found only when a worker reads it); returns its path."""
    from timelypy.recovery import CheckpointStore

    manifest = CheckpointStore(str(location)).manifest(checkpoint_id)
    name = manifest.parts[0]["index"]
    path = location / "chunks" / name[:2] / f"{name}.chunk"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    return f"chunks/{name[:2]}/{name}.chunk"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_damaged_checkpoint_is_refused_and_the_one_before_restored(
    tmp_path, reference, caplog, workers
):
    with tp.open_session(dataflow, workers=2, checkpoint=tp.Checkpoints(str(tmp_path))) as s:
        feed(s, 0, 4)
        s.checkpoint()
        feed(s, 4, 6)
        newest = s.checkpoint()
    damaged = _damage(tmp_path, newest.checkpoint_id)
    with caplog.at_level("WARNING", logger="timelypy.workers.sessions"):
        with tp.open_session(dataflow, workers=workers, restore=str(tmp_path)) as s:
            assert s.time == 4 and s.last_checkpoint.checkpoint_id != newest.checkpoint_id
            state = s.restored("degrees")
            feed(s, 4, TIMES)
            degrees, two_hops = reference
            assert contents(state + s.changes("degrees")) == degrees
            assert answers(s) == two_hops
    assert f"skipping checkpoint {newest.checkpoint_id}" in caplog.text
    assert damaged in caplog.text and "corrupt" in caplog.text


@pytest.mark.timeout(120)
def test_with_every_checkpoint_damaged_the_error_names_the_location_and_the_files(tmp_path):
    from timelypy import errors

    ids = []
    with tp.open_session(dataflow, checkpoint=tp.Checkpoints(str(tmp_path))) as s:
        for end in (2, 4):
            feed(s, end - 2, end)
            ids.append(s.checkpoint().checkpoint_id)
    damaged = [_damage(tmp_path, cid) for cid in ids]
    with pytest.raises(errors.CheckpointError) as caught:
        tp.open_session(dataflow, workers=2, restore=str(tmp_path))
    message = str(caught.value)
    assert f"no valid checkpoint to restore at {str(tmp_path)!r}" in message
    assert all(path in message for path in damaged), message
    assert caught.value.path == damaged[-1] and "corrupt" in caught.value.reason


@pytest.mark.timeout(180)
@pytest.mark.parametrize("workers_after", [1, 3])
def test_updates_sent_ahead_are_kept_by_a_checkpoint(tmp_path, workers_after):
    """Updates made ahead of the session's time (``update_at`` a later time, as an event-time
    input does for records ahead of its watermark) are pending work when the checkpoint is
    taken: it keeps them, and the restored session (on other worker counts) shows them at their
    times, as the uninterrupted run does."""
    _check_updates_sent_ahead(tmp_path, workers_after)


@pytest.mark.timeout(180)
def test_updates_waiting_as_columns_are_kept_by_a_checkpoint(tmp_path, monkeypatch):
    """As above with the join's arrangements sealing columns from the first update and
    encoding every two waiting updates into columns: the updates sent ahead wait as columns
    (split from the sealed ones at the frontier), and the checkpoint turns them back into
    tuples and keeps them."""
    from timelypy.differential import arrange_columns

    monkeypatch.setattr(arrange_columns, "COLUMNS_MIN_UPDATES", 1)
    monkeypatch.setattr(arrange_columns, "ENCODE_CHUNK", 2)
    calls = {"absorb": 0, "release": 0}
    for name in calls:
        method = getattr(arrange_columns.ColumnChoice, name)

        def counted(self, batcher, _method=method, _name=name):
            calls[_name] += 1
            return _method(self, batcher)

        monkeypatch.setattr(arrange_columns.ColumnChoice, name, counted)
    _check_updates_sent_ahead(tmp_path, 2)
    assert calls["absorb"] > 0 and calls["release"] > 0, calls


def _check_updates_sent_ahead(tmp_path, workers_after):
    def drive(s, start, end):
        for t in range(start, end):
            for edge, diff in updates_at(t):
                s.update("edges", edge, diff)
            s.update_at("edges", (t % NODES, (t + 1) % NODES), time=t + 3, diff=1)  # ahead
            s.advance_to(t + 1)
        s.wait("probe")

    with tp.open_session(dataflow, workers=2) as s:
        drive(s, 0, 8)
        s.advance_to(12)
        s.wait("probe")
        whole = sorted((d, t, r) for d, t, r in s.changes("degrees"))
    with tp.open_session(dataflow, workers=2, checkpoint=tp.Checkpoints(str(tmp_path))) as s:
        drive(s, 0, 4)
        s.checkpoint()  # updates at 4, 5 and 6 were sent ahead
        before = sorted(s.changes("degrees"))
    with tp.open_session(dataflow, workers=workers_after, restore=str(tmp_path)) as s:
        assert s.time == 4
        restored = sorted(s.restored("degrees"))
        drive(s, 4, 8)
        s.advance_to(12)
        s.wait("probe")
        after = sorted(s.changes("degrees"))
    assert sorted(u for u in before + after if u[1] >= 4) == [u for u in whole if u[1] >= 4]
    assert sorted(u for u in restored if u[1] < 4) == sorted(u for u in whole if u[1] < 4)
