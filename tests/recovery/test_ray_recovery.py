"""Checkpoints and restore on the ray backend: a checkpoint of ``processes`` restored onto Ray
actors (another number of them), one the Ray actors wrote restored ``inline``, and both ways
on a simulated two-node cluster (one actor per node).

Every actor writes its part of a checkpoint to the location from its own process and reads the
parts back there; the driver only publishes the manifest. The suite's local Ray
(``ray_session`` in ``tests/conftest.py``) serves the first two tests; the two-node cluster
runs in a child process, on a cluster of its own. The driver killed at a random
moment and restored, on Ray as on the other backends, is the kill family of
``test_session_checkpoint.py``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import ROOT
from support.ray_cluster import (
    RAY_AUTH_VARIABLES,
    new_ray_base_dir,
    ray_token_environment,
    stop_processes_under,
)

import timelypy as tp
from tests.recovery.test_session_checkpoint import (  # noqa: F401 - reference is a fixture
    checkpoint_then_restore,
    dataflow,
    feed,
    reference,
)

pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")

pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(300),
    pytest.mark.usefixtures("ray_session"),
]

RAY = {"backend": "ray", "timeout": 120, "num_cpus_per_worker": 0.25}


@pytest.mark.processes
def test_processes_checkpoint_restored_on_ray_with_more_workers(tmp_path, reference):  # noqa: F811
    checkpoint_then_restore(
        tmp_path, reference, {"workers": 2, "backend": "processes"}, {"workers": 3, **RAY}
    )


def test_ray_checkpoint_restored_inline_on_one_worker(tmp_path, reference):  # noqa: F811
    checkpoint_then_restore(tmp_path, reference, {"workers": 2, **RAY}, {"workers": 1})


# ------------------------------------------------------------------------------------------
# two Ray nodes: each actor writes its part from its own node, and reads it back there

TWO_NODES = r"""
import json, os, sys
import ray
from ray.cluster_utils import Cluster
import timelypy as tp
sys.path.insert(0, {here!r})
from test_session_checkpoint import answers, contents, dataflow, feed, TIMES

NODES_DIR, LOCATION = sys.argv[1], sys.argv[2]


def placed(scope):
    # where this worker runs: one file per actor process, naming its Ray node
    with open(os.path.join(NODES_DIR, str(os.getpid())), "w") as f:
        f.write(ray.get_runtime_context().get_node_id())
    return dataflow(scope)


def nodes(session):
    return sorted(open(os.path.join(NODES_DIR, str(pid))).read() for pid in session.worker_pids)


def main():
    temp_dir = os.path.join(os.environ["RAY_TMPDIR"], "ray")
    os.makedirs(temp_dir, exist_ok=True)
    cluster = Cluster(initialize_head=True, head_node_args={{"num_cpus": 1,
        "node_ip_address": "127.0.0.1", "include_dashboard": False, "temp_dir": temp_dir}})
    try:
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes(timeout=120)
        ray.init(address=cluster.address, log_to_driver=False)
        options = dict(workers=2, backend="ray", timeout=240, num_cpus_per_worker=1)
        with tp.open_session(dataflow) as s:
            feed(s, 0, TIMES)
            reference = (contents(s.changes("degrees")), answers(s))
        with tp.open_session(placed, checkpoint=tp.Checkpoints(LOCATION), **options) as s:
            feed(s, 0, 4)
            s.checkpoint()
            first = nodes(s)
        with tp.open_session(placed, restore=LOCATION, **options) as s:
            state = s.restored("degrees")
            feed(s, 4, TIMES)
            result = (contents(state + s.changes("degrees")), answers(s))
            second = nodes(s)
        print("REPORT " + json.dumps({{"first": first, "second": second,
            "live_nodes": len([n for n in ray.nodes() if n.get("Alive")]),
            "equal": result == reference}}), flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
"""


@pytest.mark.timeout(480)
def test_checkpoint_and_restore_with_actors_on_two_nodes(tmp_path):
    """On a simulated two-node cluster (one CPU each, so one actor per node), each actor
    writes its part of the checkpoint and reads the checkpoint back from its own node; the
    restored session equals the uninterrupted run. Runs in a child process (a ``Cluster`` and
    the suite's Ray cannot share a process) with its own token and directory."""
    here = str(Path(__file__).parent)
    script = tmp_path / "two_nodes.py"
    script.write_text(TWO_NODES.format(here=here))
    (tmp_path / "nodes").mkdir()
    base = new_ray_base_dir()
    env = {k: v for k, v in os.environ.items() if k not in RAY_AUTH_VARIABLES}
    env.pop("RAY_ADDRESS", None)
    env.update(ray_token_environment(secrets.token_hex(32)))
    env.update(
        RAY_TMPDIR=base,
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        PYTHONPATH=os.pathsep.join([here, str(ROOT / "tests"), str(ROOT)]),
    )
    try:
        done = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "nodes"), str(tmp_path / "location")],
            env=env,
            capture_output=True,
            text=True,
            timeout=420,
            cwd=base,
            check=False,
        )
    finally:
        leftover = stop_processes_under(base, grace=5)
        shutil.rmtree(base, ignore_errors=True)
    lines = [x for x in done.stdout.splitlines() if x.startswith("REPORT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    report = json.loads(lines[-1][len("REPORT ") :])
    assert report["live_nodes"] == 2
    assert len(set(report["first"])) == 2, f"both actors on one node: {report['first']}"
    assert len(set(report["second"])) == 2, f"both actors on one node: {report['second']}"
    assert report["equal"], "the restored run differs from the uninterrupted one"
    assert not leftover, f"processes of the test cluster outlived it: {leftover}"


def test_a_relative_location_means_the_drivers_directory(tmp_path, monkeypatch, reference):  # noqa: F811
    """Ray actors run in directories of Ray's: a relative location is the driver's, taken when
    the ``Checkpoints`` are made, on every actor."""
    monkeypatch.chdir(tmp_path)
    every = tp.Checkpoints("checkpoints")
    assert every.location == str(tmp_path / "checkpoints")
    checkpoint_then_restore(every.location, reference, {"workers": 2, **RAY}, {"workers": 1})
    with tp.open_session(dataflow, workers=2, checkpoint=tp.Checkpoints("relative"), **RAY) as s:
        feed(s, 0, 2)
        s.checkpoint()
    assert (tmp_path / "relative" / "manifests").is_dir()
