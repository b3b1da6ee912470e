"""``benchmarks/datalog.py`` at a tiny size: its JSON's shape, and every system that ran (timelypy,
DuckDB, pydbsp where an interpreter with it is found) agreeing with the from-scratch evaluation
before and after the fact changes. Performance is the benchmark's business, never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "datalog.py"

pytestmark = pytest.mark.slow


def test_datalog_benchmark_runs_every_workload_and_the_digests_agree() -> None:
    pytest.importorskip("duckdb")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    command = [
        sys.executable,
        str(SCRIPT),
        "--workloads",
        "tc",
        "sg",
        "andersen",
        "--nodes",
        "40",
        "--edges",
        "60",
        "--sg-nodes",
        "30",
        "--statements",
        "80",
        "--changes",
        "6",
        "--timeout",
        "300",
        "--check",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["benchmark"] == "datalog"
    assert {"python", "cpus", "commit"} <= set(result["environment"])
    assert result["params"]["changes"] == 6
    assert set(result["workloads"]) == {"tc", "sg", "andersen"}
    for name, run in result["workloads"].items():
        systems = run["systems"]
        assert set(systems) == {"timelypy", "duckdb", "pydbsp"}, name
        for system in ("timelypy", "duckdb"):
            assert "error" not in systems[system], (name, system, systems[system])
            initial, changes = systems[system]["initial"], systems[system]["changes"]
            assert initial["initial_s"] >= 0 and initial["output_size"] > 0, (name, system)
            assert changes["complete"] and changes["changes_done"] == 6, (name, system)
            assert changes["latency"]["count"] == 6
            assert {"median_us", "p99_us"} <= set(changes["latency"])
        pydbsp = systems["pydbsp"]
        # Either it ran (and is held to the same digests below) or it says why it could not.
        assert "initial" in pydbsp or pydbsp.get("unavailable"), pydbsp
        for phase in ("initial", "changes"):
            agreement = run["agreement"][phase]
            assert {"timelypy", "duckdb", "reference"} <= set(agreement["digests"]), name
            assert agreement["agree"] is True, (name, phase, agreement)
        assert run["ratios"]["change_median_duckdb_over_timelypy"] is not None
