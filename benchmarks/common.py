"""Shared helpers for the differential benchmarks: timing statistics, environment, JSON output.

Every benchmark prints exactly one JSON object on stdout; progress notes (if any) go to stderr.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

try:
    import timelypy  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

now = time.perf_counter


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values`` by nearest rank (``nan`` when empty)."""
    if not values:
        return float("nan")
    s = sorted(values)
    rank = max(1, math.ceil(q * len(s)))
    return s[min(rank, len(s)) - 1]


def median(values: Sequence[float]) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def latency_stats_us(seconds: Sequence[float]) -> Dict[str, Any]:
    """Median, p90, p99, max and mean of per-operation latencies, in microseconds."""
    if not seconds:
        return {"count": 0}
    us = [s * 1e6 for s in seconds]
    return {
        "count": len(us),
        "median_us": round(median(us), 1),
        "p90_us": round(percentile(us, 0.90), 1),
        "p99_us": round(percentile(us, 0.99), 1),
        "max_us": round(max(us), 1),
        "mean_us": round(sum(us) / len(us), 1),
    }


def slowest(seconds: Sequence[float], k: int = 5) -> List[List[float]]:
    """The ``k`` slowest operations as ``[index, microseconds]``, slowest first (outliers)."""
    top = sorted(range(len(seconds)), key=lambda i: seconds[i], reverse=True)[:k]
    return [[i, round(seconds[i] * 1e6, 1)] for i in top]


def _library_version() -> Dict[str, Any]:
    """The checkout's commit and whether ``timelypy/`` has uncommitted changes (read-only git)."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "timelypy"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return {"commit": head or None, "timelypy_uncommitted_changes": bool(dirty)}
    except Exception:
        return {"commit": None}


def environment() -> Dict[str, Any]:
    """Python version, implementation, platform, CPU count, load and commit (JSON header)."""
    return {
        **_library_version(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        # Other work on the machine skews timings: record the load when the run started.
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def sample_indices(total: int, sample: int) -> List[int]:
    """``sample`` indices spread evenly over ``range(total)`` (all of them if ``sample >= total``)."""
    if sample <= 0 or total <= 0:
        return []
    if sample >= total:
        return list(range(total))
    step = total / sample
    return sorted({min(total - 1, int(i * step)) for i in range(sample)})


def timed(fn: Callable[[], Any]) -> float:
    """Seconds taken by ``fn()``."""
    start = now()
    fn()
    return now() - start


def add_gc_argument(parser: Any) -> None:
    parser.add_argument("--gc", choices=["on", "off"], default="on",
                        help="off: disable Python's cyclic garbage collector while the dataflow "
                             "runs (shows how much of the time is GC scanning the heap)")


class gc_mode:
    """``with gc_mode("off"):`` disables the cyclic GC for the block (``"on"``: no change)."""

    def __init__(self, mode: str):
        self.mode = mode
        self._was = True

    def __enter__(self) -> "gc_mode":
        import gc

        self._was = gc.isenabled()
        gc.collect()
        if self.mode == "off":
            gc.disable()
        return self

    def __exit__(self, *exc: Any) -> None:
        import gc

        if self._was:
            gc.enable()


def emit(result: Dict[str, Any]) -> None:
    """Print ``result`` as one JSON object on stdout."""
    print(json.dumps(result, default=_jsonable))
    sys.stdout.flush()


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    return repr(x)


def note(msg: str) -> None:
    """A progress note on stderr (never on stdout, which carries the JSON)."""
    print(msg, file=sys.stderr, flush=True)


def error_info(exc: BaseException) -> Dict[str, str]:
    return {"error": f"{type(exc).__name__}: {exc}"}


def speedup(naive: Optional[float], incremental: Optional[float]) -> Optional[float]:
    """``naive / incremental`` rounded, or ``None`` when either is missing."""
    if not naive or not incremental:
        return None
    return round(naive / incremental, 2)
