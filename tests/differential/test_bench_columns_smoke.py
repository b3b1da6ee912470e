"""``benchmarks/columns.py`` and ``benchmarks/memory.py`` at a tiny size: their JSON's shape,
both paths giving the answer computed from scratch, and what each path stored. Performance is
the benchmarks' business, never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _run(script: str, *args: str) -> Dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TIMELYPY_COLUMNS", None)
    command = [sys.executable, str(ROOT / "benchmarks" / script), *args, "--timeout", "300"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result: Dict[str, Any] = json.loads(done.stdout)
    return result


def test_every_workload_gives_the_right_digest_on_both_paths() -> None:
    result = _run("columns.py", "--size", "3000", "--reps", "1", "--closed-rounds", "50")
    assert result["benchmark"] == "columns"
    assert {"python", "cpus", "commit", "loadavg_1m_at_start"} <= set(result)
    for workload in ("w1", "closed", "join", "count", "counts"):
        run = result[workload]
        assert "errors" not in run, run["errors"]
        assert run["digests_equal"] is True, workload
        assert run["digest_matches_expected"] is True, workload
        for name, row in run.items():
            if isinstance(row, dict) and "columns_over_objects" in row:
                assert len(row["objects"]["runs"]) == len(row["columns"]["runs"]) == 1, name
    # The join of (p // 2, p) with (p // 2, -p): two records a key on each side.
    assert result["join"]["output_updates"] == {"objects": [6000], "columns": [6000]}
    assert result["closed"]["latency_us_median_us"]["columns"]["median"] > 0


def test_memory_reports_what_each_path_stores() -> None:
    result = _run("memory.py", "--size", "3000", "--changes", "1000")
    arrangement = result["arrangement"]
    objects, columns = arrangement["objects"], arrangement["columns"]
    assert objects["column_batches"] == 0 and objects["column_bytes_per_update"] is None
    # Keys, values, times and diffs of (int, int) records: 8 bytes each.
    assert columns["column_batches"] == columns["batches"] >= 1
    assert columns["column_updates"] == columns["stored_updates"]
    assert columns["column_bytes_per_update"] == 32.0
    managers = {0} | {p // 3 for p in range(1, 1001)} | {p // 2 for p in range(1001, 3000)}
    for path in (objects, columns):
        assert path["keys"] == len(managers)
        assert path["stored_updates"] >= path["live_updates"] == 3000
    skip = result["skip-level"]
    assert skip["objects"]["output_net"] == skip["columns"]["output_net"] == 3000
    assert set(arrangement["columns_over_objects"]) >= {"bytes_per_stored_update"}
