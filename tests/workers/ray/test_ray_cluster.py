"""The ray backend on a simulated two-node Ray cluster: workers on both nodes, mesh on the node
address, token authentication on, random programs still exact.

``ray.cluster_utils.Cluster`` starts two Ray nodes (a head and a worker node, one CPU each) on
this machine. A cluster and the session's ``ray.init()`` Ray cannot share a process, so the
test below runs this same file again in a child pytest process (``TestOnTwoNodes``, defined only
there) with an environment of its own:

* ``RAY_AUTH_MODE=token`` and a token made for this test (``RAY_AUTH_TOKEN``): the cluster's
  GCS, raylets and workers authenticate every call; a client without the token is refused;
* ``RAY_TMPDIR`` set to a fresh directory: the cluster's files, and the "current cluster" file
  Ray writes for ``address="auto"``, stay there instead of in the user's ``/tmp/ray``;
* ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` and ``node_ip_address="127.0.0.1"``: Ray's own
  single-machine mode, in which it resolves the node address to the loopback address (by default
  it picks the address of the machine's outgoing interface). The nodes, and the driver that
  connects to them, are all on 127.0.0.1: on a two-node cluster the ray backend binds each
  worker's mesh listener to the node address Ray reports, which is then loopback too.

Afterwards the test stops exactly that cluster: ``Cluster.shutdown()`` in the child, then any of
its processes still alive (found by its directory on their command lines) by pid.
``TIMELYPY_RAY_CLUSTER_EXAMPLES`` sets the number of random programs (default 8).
"""

from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

import pytest
from support.paths import ROOT
from support.ray_cluster import (
    RAY_AUTH_VARIABLES,
    new_ray_base_dir,
    non_loopback_listeners,
    probe_ray_gcs,
    processes_under,
    ray_token_environment,
    stop_processes_under,
)

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")

pytestmark = [pytest.mark.ray]

CHILD = "TIMELYPY_RAY_CLUSTER_DIR"
"""Set (to the cluster's directory) in the child process that runs :class:`TestOnTwoNodes`."""

CHILD_TIMEOUT = 420
"""Seconds the child process may take (it takes about 20-30 s on 2 cores)."""

LOOPBACK = "127.0.0.1"


@pytest.mark.timeout(CHILD_TIMEOUT + 60)
@pytest.mark.skipif(bool(os.environ.get(CHILD)), reason="this is the child process")
def test_two_node_cluster_in_a_child_process():
    """Run :class:`TestOnTwoNodes` in a child process on a cluster of its own; stop that cluster."""
    base = new_ray_base_dir()
    env = {
        k: v for k, v in os.environ.items() if k not in RAY_AUTH_VARIABLES and k != "RAY_ADDRESS"
    }
    env.update(ray_token_environment(secrets.token_hex(32)))
    env.update({CHILD: base, "RAY_TMPDIR": base, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    log_path = os.path.join(base, "child.log")
    start = time.monotonic()
    try:
        with open(log_path, "wb") as log:
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-rA",
                    "-W",
                    "ignore::DeprecationWarning",
                    f"{pathlib.Path(__file__).resolve()}::TestOnTwoNodes",
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(ROOT),
            )
            try:
                code = child.wait(timeout=CHILD_TIMEOUT)
            except subprocess.TimeoutExpired:
                child.kill()
                code = child.wait(timeout=30)
        output = pathlib.Path(log_path).read_text(errors="replace")
        assert code == 0, f"the two-node tests failed (exit {code}):\n{output[-12000:]}"
        assert " passed" in output and "skipped" not in output.splitlines()[-1], output[-3000:]
    finally:
        leftover = stop_processes_under(base, grace=5)
        shutil.rmtree(base, ignore_errors=True)
    assert not leftover, f"processes of the test cluster outlived it: {leftover}"
    print(f"two-node cluster tests: {time.monotonic() - start:.1f} s")


# ------------------------------------------------------------------------------------------
# in the child process only

if os.environ.get(CHILD):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from support import strategies as strat
    from support.harness import ref
    from workers.ray.programs import programs_build

    import timelypy as tp

    PER_JOB = 4
    """Programs side by side in one job (a Ray job's start costs more than a small program)."""
    EXAMPLES = int(os.environ.get("TIMELYPY_RAY_CLUSTER_EXAMPLES", "2"))

    OPTIONS: Dict[str, Any] = {"num_cpus_per_worker": 1, "timeout": 240}
    """One CPU per worker on nodes of one CPU each: the two workers must use both nodes."""

    @pytest.fixture(scope="module")
    def cluster():
        """Two Ray nodes on 127.0.0.1 (head + worker node, one CPU each), this process
        connected as the driver."""
        from ray.cluster_utils import Cluster

        assert os.environ["RAY_AUTH_MODE"] == "token"
        temp_dir = os.path.join(os.environ[CHILD], "ray")
        os.makedirs(temp_dir, exist_ok=True)
        made = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "node_ip_address": LOOPBACK,
                "include_dashboard": False,
                "temp_dir": temp_dir,
            },
        )
        try:
            made.add_node(num_cpus=1, node_ip_address=LOOPBACK)
            made.wait_for_nodes(timeout=120)
            ray.init(address=made.address, log_to_driver=False)
            yield made
        finally:
            ray.shutdown()
            made.shutdown()

    def _nodes() -> Dict[str, str]:
        return {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")}

    def _placed(build):
        """``build`` plus where it ran: ``(result, node id, mesh address)`` per worker."""

        def placed(worker):
            result = build(worker)
            node = ray.get_runtime_context().get_node_id()
            return result, node, tuple(worker.fabric.mesh.address)

        return placed

    def _check_placement(results: List[Tuple[Any, str, Tuple[str, int]]]) -> None:
        nodes = _nodes()
        placed = [node for _, node, _ in results]
        assert len(set(placed)) == 2, f"both workers on one node: {placed}"
        for _, node, (host, _port) in results:
            # The mesh listens on the address Ray reports for the worker's node: loopback here.
            assert host == nodes[node] == LOOPBACK, (host, nodes)

    @st.composite
    def program_and_script(draw):
        program = draw(strat.programs(max_depth=3))
        script = draw(strat.update_streams(program.n_inputs, max_actions=25))
        return program, script, program.n_inputs

    class TestOnTwoNodes:
        """Runs in the child process, on the two-node cluster."""

        def test_two_nodes_with_token_auth(self, cluster):
            import psutil
            from ray._raylet import AuthenticationMode, get_authentication_mode

            nodes = _nodes()
            assert len(nodes) == 2 and set(nodes.values()) == {LOOPBACK}
            ours = processes_under(os.environ[CHILD]) + psutil.Process().children(recursive=True)
            assert len(ours) > 4 and non_loopback_listeners(ours) == {}
            assert get_authentication_mode() == AuthenticationMode.TOKEN
            address = ray.get_runtime_context().gcs_address
            assert address.startswith(LOOPBACK + ":")
            refused = probe_ray_gcs(address, {"RAY_AUTH_MODE": "disabled"})
            assert refused.startswith("REFUSED AuthenticationError"), refused
            assert (
                probe_ray_gcs(
                    address,
                    {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.environ["RAY_AUTH_TOKEN"]},
                )
                == "ACCEPTED"
            )

        def test_workers_on_both_nodes_mesh_on_the_node_address(self, cluster):
            results = tp.execute(_placed(lambda w: w.index), workers=2, backend="ray", **OPTIONS)
            assert [r[0] for r in results] == [0, 1]
            _check_placement(results)

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=[
                HealthCheck.too_slow,
                HealthCheck.data_too_large,
                HealthCheck.function_scoped_fixture,
            ],
        )
        @given(cases=st.lists(program_and_script(), min_size=PER_JOB, max_size=PER_JOB))
        def test_random_programs_on_two_nodes(self, cluster, cases):
            """The property suite, sized down: output equals a from-scratch evaluation at every
            time, workers on both nodes (a few programs side by side in each job)."""
            results = tp.execute(
                _placed(programs_build(cases)), workers=2, backend="ray", **OPTIONS
            )
            _check_placement(results)
            for k, (program, script, n_inputs) in enumerate(cases):
                updates = [u for per_worker, _node, _address in results for u in per_worker[k]]
                by_input = ref.script_updates(script, n_inputs)
                horizon = max(
                    [t for us in by_input.values() for _, t, _ in us]
                    + ref.final_times(script, n_inputs)
                    + [0]
                )
                for t in range(horizon + 1):
                    expected = ref.evaluate_at(program, by_input, t)
                    got = ref.accumulate(updates, t)
                    assert got == expected, (
                        f"program {program!r} at time {t}: expected "
                        f"{expected}, got {got}\nscript={list(script)!r}"
                    )
