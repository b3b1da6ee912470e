"""``benchmarks/windows.py`` at a tiny size, timelypy only: its JSON's shape, every query's
results equal to the from-scratch reference, the ``windows`` and ``direct`` paths agreeing
where both exist, and the memory workload's RSS samples. Performance is the benchmark's
business, never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "windows.py"

pytestmark = pytest.mark.slow


def _run(*args: str) -> Dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    command = [sys.executable, str(SCRIPT), *args, "--timeout", "300"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result: Dict[str, Any] = json.loads(done.stdout)
    assert result["benchmark"] == "windows"
    assert {"python", "cpus", "commit", "loadavg_1m_at_start"} <= set(result["environment"])
    return result


def test_every_query_agrees_with_the_reference_on_both_timelypy_paths() -> None:
    result = _run(
        "--events", "12000", "--systems", "timelypy", "--timelypy-path", "both",
        "--size", "4000", "--hop", "1000", "--batch", "500", "--check",
    )  # fmt: skip
    assert result["params"]["events"] == 12000
    assert (
        result["stream"]["bids"] + result["stream"]["persons"] + result["stream"]["auctions"]
        == 12000
    )
    assert set(result["queries"]) == {"q5", "q7", "q8"}
    for query, run in result["queries"].items():
        systems = run["systems"]
        assert set(systems) == {"timelypy.windows", "timelypy.direct"}, query
        direct = systems["timelypy.direct"]
        assert "error" not in direct, (query, direct)
        assert direct["events"] == 12000 and direct["events_per_s"] > 0
        assert direct["results"] > 0 and direct["windows_closed"] > 0
        latency = direct["window_close_latency"]
        assert latency["count"] == direct["windows_closed"]
        assert {"median_us", "p90_us", "p99_us", "max_us"} <= set(latency)
        assert direct["batch_latency_us"]["count"] == 12000 // 500
        assert direct["peak_rss_mb"] > 0 and direct["path"] == "direct"
        windows = systems["timelypy.windows"]
        # Either the windows API is on this checkout (and held to the same digest) or the
        # column says why not.
        assert "digest" in windows or windows.get("unavailable"), (query, windows)
        digests = run["agreement"]["digests"]
        assert {"timelypy.direct", "reference"} <= set(digests), query
        if "digest" in windows:
            assert windows["path"] == "windows" and "timelypy.windows" in digests
        assert run["agreement"]["agree"] is True, (query, run["agreement"])


def test_memory_workload_samples_rss_as_the_stream_goes() -> None:
    result = _run(
        "--workloads", "memory", "--events", "20000", "--sample-every", "5000",
        "--size", "4000", "--hop", "1000",
    )  # fmt: skip
    memory = result["memory"]
    assert "error" not in memory, memory
    assert memory["events"] == 20000
    assert [s["events"] for s in memory["samples"]] == [5000, 10000, 15000, 20000]
    assert all(s["rss_mb"] > 0 for s in memory["samples"])
    assert isinstance(memory["rss_growth_pct"], float)
    assert memory["window_results_seen"] > 0
