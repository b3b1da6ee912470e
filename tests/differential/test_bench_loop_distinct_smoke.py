"""``benchmarks/loop_distinct.py`` at a tiny size: its JSON's shape, and the reachable set after
the changes equal to a BFS's. Performance is the benchmark's business, never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_loop_distinct_reports_every_run_and_checks_the_answer() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "loop_distinct.py"),
        *("--nodes", "400", "--changes", "40", "--reps", "2", "--timeout", "300"),
        "--check",
        "--per-operator",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["benchmark"] == "loop_distinct"
    assert {"python", "cpus", "commit", "loadavg_1m_at_start"} <= set(result)
    assert result["params"]["nodes"] == 400 and len(result["runs"]) == 2
    for run in result["runs"]:
        assert run["check"] is True
        assert run["reachable"] > 0
        assert "Distinct" in run["operators"] and "Semijoin" in run["operators"]
    assert set(result["median"]) == {
        "load_s",
        "update_s",
        "update_cpu_s",
        "us_per_change",
        "cpu_us_per_change",
    }
