"""Shared helpers for the differential benchmarks: timing statistics, environment, JSON output.

Every benchmark prints exactly one JSON object on stdout; progress notes (if any) go to stderr.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
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
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "timelypy"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
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


def vocabulary(size: int, seed: int = 7) -> List[str]:
    """``size`` distinct words of 3 to 12 lowercase letters."""
    rnd = random.Random(seed)
    words: Dict[str, None] = {}
    while len(words) < size:
        length = rnd.randint(3, 12)
        words["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(length))] = None
    return list(words)


def sample_indices(total: int, sample: int) -> List[int]:
    """``sample`` indices spread evenly over ``range(total)`` (all of them if
    ``sample >= total``)."""
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
    parser.add_argument(
        "--gc",
        choices=["on", "off"],
        default="on",
        help="off: disable Python's cyclic garbage collector for the whole "
        "measurement; on (default): the library's policy (paused while "
        "workers step, see TIMELYPY_GC; set TIMELYPY_GC=tuned to compare)",
    )


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
    """Print ``result`` as one JSON object on stdout (with the ``--profile`` file, if any)."""
    if _profile.path is not None and "profile" not in result:
        result = {**result, "profile": _profile.describe()}
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


# ----------------------------------------------------------------------------- --profile

PROFILE_TOP = 20
"""Functions listed per ordering (tottime, cumtime) in a ``--profile`` summary."""


def add_profile_argument(parser: Any) -> None:
    """``--profile [PATH]``: profile the run (see :class:`profiled`)."""
    parser.add_argument(
        "--profile",
        nargs="?",
        const="auto",
        default=None,
        metavar="PATH",
        help="profile the run with cProfile and write the top %d functions by tottime and by "
        "cumtime to PATH (default: a file in the temporary directory), and to stderr; the "
        'JSON names the file under "profile" (with workers in other processes, one file '
        "per worker beside it)" % PROFILE_TOP,
    )


class _ProfileState:
    """The run's profile: the summary's path, the workers' files, the profiler."""

    def __init__(self) -> None:
        self.path: Optional[str] = None
        self.worker_paths: List[str] = []
        self.profiler: Any = None
        self.benchmark = "benchmark"

    def describe(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "path": self.path,
            "top": PROFILE_TOP,
            "sorted_by": ["tottime", "cumtime"],
            "profiler": "cProfile",
        }
        if self.worker_paths:
            out["worker_paths"] = list(self.worker_paths)
        return out


_profile = _ProfileState()


def _profile_path(args: Any, benchmark: str) -> Optional[str]:
    """The summary's path from ``args.profile`` (or ``--profile`` on the command line)."""
    value = getattr(args, "profile", None) if args is not None else _profile_from_argv()
    if value is None or value is False:
        return None
    if value in ("auto", True, ""):
        import tempfile

        stamp = time.strftime("%Y%m%d-%H%M%S")
        return os.path.join(
            tempfile.gettempdir(), f"timelypy-profile-{benchmark}-{stamp}-{os.getpid()}.txt"
        )
    return os.path.abspath(str(value))


def _profile_from_argv() -> Optional[str]:
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg == "--profile":
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            return nxt if nxt is not None and not nxt.startswith("-") else "auto"
        if arg.startswith("--profile="):
            return arg.split("=", 1)[1] or "auto"
    return None


def profile_summary(profiler: Any, title: str, top: int = PROFILE_TOP) -> str:
    """The ``top`` functions of a ``cProfile.Profile`` by tottime and by cumtime, as text
    (paths relative to the checkout)."""
    import pstats

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    stats = pstats.Stats(profiler).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}
    total_calls = sum(v[1] for v in stats.values())
    total = max((v[3] for v in stats.values()), default=0.0)
    lines = [
        f"# {title}",
        f"# {total_calls} calls, {total:.3f} s in the outermost frame",
        f"# python {platform.python_version()}, {' '.join(sys.argv)}",
    ]
    for column, label in ((2, "tottime"), (3, "cumtime")):
        lines.append(f"\n## top {top} by {label}")
        lines.append(f"{'ncalls':>12} {'tottime':>9} {'cumtime':>9} {'percall_us':>11}  function")
        ranked = sorted(stats.items(), key=lambda kv: kv[1][column], reverse=True)[:top]
        for (file, line, name), (cc, nc, tt, ct, _) in ranked:
            where = file[len(root) :] if file.startswith(root) else file
            calls = str(nc) if nc == cc else f"{nc}/{cc}"
            per = (ct if column == 3 else tt) / nc * 1e6 if nc else 0.0
            lines.append(f"{calls:>12} {tt:9.3f} {ct:9.3f} {per:11.2f}  {where}:{line}({name})")
    return "\n".join(lines) + "\n"


class profiled:
    """Profile a block when ``--profile`` was given; no cost otherwise.

    ``with profiled(args, "wordcount"):`` (or ``with profiled():``, which reads ``--profile``
    from ``sys.argv``) runs the block under ``cProfile``; at the end the top
    :data:`PROFILE_TOP` functions by tottime and by cumtime go to the file and to stderr, and
    :func:`emit` adds ``"profile": {"path": ...}`` to the JSON. Work done in other processes
    (the ``processes`` and ``ray`` backends) is profiled by wrapping the ``build`` with
    :func:`profile_workers`.
    """

    def __init__(self, args: Any = None, benchmark: Optional[str] = None) -> None:
        self.benchmark = benchmark or os.path.splitext(os.path.basename(sys.argv[0]))[0]
        self.path = _profile_path(args, self.benchmark)

    def __enter__(self) -> "profiled":
        if self.path is not None:
            import cProfile

            _profile.path = self.path
            _profile.benchmark = self.benchmark
            _profile.profiler = cProfile.Profile()
            _profile.profiler.enable()
        return self

    def __exit__(self, *exc: Any) -> None:
        profiler = _profile.profiler
        if profiler is None:
            return
        profiler.disable()
        _profile.profiler = None
        text = profile_summary(profiler, f"{self.benchmark}: the driver process")
        with open(self.path, "w") as f:
            f.write(text)
        note(text)
        note(f"profile written to {self.path}")


class _ProfiledBuild:
    """A worker's ``build`` run under cProfile; the summary goes to ``<path>.worker<i>.txt``."""

    def __init__(self, build: Callable[[Any], Any], path: str, benchmark: str) -> None:
        self.build, self.path, self.benchmark = build, path, benchmark

    def __call__(self, worker: Any) -> Any:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        try:
            return self.build(worker)
        finally:
            profiler.disable()
            title = f"{self.benchmark}: worker {worker.index} of {worker.peers}"
            with open(worker_profile_path(self.path, worker.index, worker.peers), "w") as f:
                f.write(profile_summary(profiler, title))


def worker_profile_path(path: str, index: int, peers: int) -> str:
    """Where worker ``index`` of ``peers`` writes its profile beside the summary ``path``."""
    base, ext = os.path.splitext(path)
    return f"{base}.w{peers}-worker{index}{ext or '.txt'}"


def profile_workers(
    build: Callable[[Any], Any], workers: int, backend: str = "processes"
) -> Callable[[Any], Any]:
    """``build`` itself, or (under ``--profile``, on a backend with worker processes) ``build``
    profiled in every worker process, each writing its own summary file (listed in the JSON
    under ``profile.worker_paths``). Inline workers are in the driver's profile already."""
    path = _profile.path
    if path is None or backend == "inline":
        return build
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    for i in range(workers):
        worker_path = worker_profile_path(path, i, workers)
        if worker_path not in _profile.worker_paths:
            _profile.worker_paths.append(worker_path)
    return _ProfiledBuild(build, path, _profile.benchmark)
