"""Sessions that checkpoint and restore: same and other worker counts, other backends, automatic
checkpoints, refusals, and a driver killed at a random moment and restored."""

from __future__ import annotations

import json
import os
import random
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
    return {
        "edges": edges_in,
        "degrees": degrees.capture(),
        "probe": two_hops.probe(),
        "degree_probe": degrees.probe(),
        "by_node": two_hops.arrange_by_key(),
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
    # one that cannot be taken (an update made ahead) is put off to the next advance
    ahead = tp.Checkpoints(str(tmp_path / "a"), every_times=1)
    with caplog.at_level("INFO", logger="timelypy.workers.sessions"):
        with tp.open_session(dataflow, checkpoint=ahead) as s:
            s.update_at("edges", (1, 2), time=2, diff=1)
            s.advance_to(1)
            assert s.last_checkpoint is None
            s.advance_to(3)
            assert s.last_checkpoint is not None and s.last_checkpoint.time == 3
    assert "automatic checkpoint at 1 put off" in caplog.text
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
        with pytest.raises(TimelyError, match=r"updates were sent at or after it \('edges' at 2"):
            s.checkpoint()
        s.advance_to(3)
        s.update_at("edges", (2, 3), time=5, diff=1)
        s.flush()
        with pytest.raises(TimelyError, match="sent at or after it .at 5"):
            s.checkpoint()
        s.advance_to(6)
        assert s.checkpoint().time == 6


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
# a driver killed at a random moment, restored by another

DRIVER = r"""
import json, sys
import timelypy as tp
sys.path.insert(0, {here!r})
from test_session_checkpoint import dataflow, updates_at, answers, contents, TIMES, NODES



def main():
    location, mode, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    every = tp.Checkpoints(location, every_times=2)
    options = dict(workers=workers, backend="processes", timeout=120)
    if mode == "first":
        s = tp.open_session(dataflow, checkpoint=every, **options)
        start = 0
    else:
        s = tp.open_session(dataflow, restore=every, **options)
        start = s.time
        state = s.restored("degrees")
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


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_a_killed_driver_is_restored_from_its_last_checkpoint(tmp_path, reference):
    script = tmp_path / "driver.py"
    here = str(Path(__file__).parent)
    script.write_text(DRIVER.format(here=here))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), here, *sys.path])}
    location = str(tmp_path / "checkpoints")
    first = subprocess.Popen(
        [sys.executable, str(script), location, "first", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    # kill it at a random moment after its first automatic checkpoint (time 2)
    kill_after = random.Random().randrange(3, TIMES)
    assert first.stdout is not None
    for line in first.stdout:
        if line.startswith("advanced") and int(line.split()[1]) >= kill_after:
            break
    try:
        os.killpg(first.pid, signal.SIGKILL)  # the driver and its workers, as a lost machine
    except ProcessLookupError:
        pass
    first.wait(30)
    second = subprocess.run(
        [sys.executable, str(script), location, "restore", "3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert second.returncode == 0, second.stderr[-3000:]
    line = [x for x in second.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT ") :])
    degrees, two_hops = reference
    assert result["start"] % 2 == 0 and result["start"] >= 2
    assert {tuple(k) if isinstance(k, list) else k: v for k, v in result["degrees"]} == degrees
    assert {n: dict(v) for n, v in result["two_hops"]} == {n: dict(v) for n, v in two_hops.items()}
