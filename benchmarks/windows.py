"""Windows over event time beside Bytewax and Pathway: Nexmark-style queries, events/s, latency
per window close, peak RSS, digests; and a bounded-memory run over an endless-looking stream.

A deterministic Nexmark-style stream (``benchmarks/windows_peers/nexmark.py``: persons,
auctions and bids in 1:3:46 proportions, event times in ms increasing with at most
``--disorder`` ms of disorder, seeded) and three queries (``--queries``):

* ``q5`` hot items: bids per auction in sliding windows (``--size``, ``--hop``);
* ``q7`` the highest bid per tumbling window (``--size``);
* ``q8`` new persons who opened an auction in the tumbling window they registered in.

Each system runs each query in a fresh process of its own (``windows_peers/peer.py``): the
stream is generated in memory (not timed), then handed over in batches of ``--batch`` events,
each followed by the watermark ``max(event time seen) - disorder`` (so nothing is ever late and
every system computes the same windows), and at the end every window is closed. Reported per
system and query: ``events_per_s`` (every event handed over, then every window's final result
received), ``window_close_latency`` (per window: from the hand-over of the batch whose watermark
passed its end to its result at the output; median / p90 / p99 µs), ``peak_rss_mb``, the number
of result rows and their ``digest``; ``agreement`` per query says whether every system's digest
is the same (and the from-scratch reference's with ``--check``).

Systems (``--systems``):

* ``timelypy``: one input stamped with event times, advanced to the watermark after each batch,
  waited on (a closed loop per batch: ``batch_latency_us`` too); the queries with
  ``timelypy.windows`` (``--timelypy-path windows``, the default where it exists) or written
  from ``temporal_filter`` + ``freeze_at`` + count / reduce / join (``direct``); ``both`` runs
  both (columns ``timelypy.windows`` and ``timelypy.direct``);
* ``bytewax`` (0.21) and ``pathway`` (0.33): their own windowing operators, in an interpreter
  that has them (``--peers-python`` or ``TIMELYPY_PEERS_PYTHON``; make one with ``python3 -m
  venv DIR && DIR/bin/pip install bytewax==0.21.1 pathway==0.33.0``); without one the column
  says why it is unavailable.

``--workloads memory`` runs the bounded-memory workload on timelypy instead (or as well): a
sliding-window count per (window, auction) over ``--events`` events generated as they are
pushed, results read and dropped by the driver and leaving the output ``--retain`` after
their window closed; RSS sampled every ``--sample-every`` events; ``rss_growth_pct`` from the
first sample to the last.

    python benchmarks/windows.py --events 1000000 --queries q5 q7 q8 \\
        --systems timelypy bytewax pathway --check
    python benchmarks/windows.py --workloads memory --events 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

from common import emit, environment, note, speedup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = os.path.join(HERE, "windows_peers")
PEER = os.path.join(PEERS, "peer.py")
sys.path.insert(0, PEERS)

import nexmark  # noqa: E402

SYSTEMS = ("timelypy", "bytewax", "pathway")
PEER_SYSTEMS = ("bytewax", "pathway")
PEERS_VENV_HINT = (
    "python3 -m venv /tmp/timelypy-peers-venv && /tmp/timelypy-peers-venv/bin/pip install "
    "bytewax==0.21.1 pathway==0.33.0"
)


def _env(with_checkout: bool) -> Dict[str, str]:
    """The environment of a peer process: the checkout on the path for timelypy, none for the
    peers' interpreter (its packages are not this interpreter's); one Pathway worker."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if with_checkout:
        env["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    env.setdefault("PATHWAY_THREADS", "1")
    env.setdefault("PATHWAY_PROCESSES", "1")
    return env


def peers_python(given: Optional[str]) -> Tuple[Optional[str], Dict[str, str]]:
    """The peers' interpreter and, per peer system, its version or why it is unavailable."""
    python = given or os.environ.get("TIMELYPY_PEERS_PYTHON")
    if not python:
        default = "/tmp/timelypy-peers-venv/bin/python"
        python = default if os.path.exists(default) else None
    if not python:
        why = f"no --peers-python (or TIMELYPY_PEERS_PYTHON) given; make one with {PEERS_VENV_HINT}"
        return None, {s: why for s in PEER_SYSTEMS}
    found: Dict[str, str] = {}
    for system in PEER_SYSTEMS:
        code = f"import importlib.metadata as m; import {system}; print(m.version({system!r}))"
        try:
            probe = subprocess.run(
                [python, "-c", code], capture_output=True, text=True, timeout=120, env=_env(False)
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            found[system] = f"unavailable: {python}: {exc}"
            continue
        if probe.returncode == 0:
            found[system] = probe.stdout.strip().splitlines()[-1]
        else:
            tail = (probe.stderr.strip().splitlines() or ["no output"])[-1]
            found[system] = f"unavailable: {python} cannot import {system}: {tail}"
    return python, found


def run_peer(
    system: str,
    query: str,
    spec: Dict[str, Any],
    options: Dict[str, Any],
    python: str,
    timeout: float,
) -> Dict[str, Any]:
    """One system on one query in a fresh process; its JSON line (or the error)."""
    cmd = [
        python,
        PEER,
        "--system",
        system,
        "--query",
        query,
        "--spec",
        json.dumps(spec),
        "--options",
        json.dumps(options),
    ]
    note(f"windows: {query} on {system} ({options.get('path', '')}) ...")
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=_env(system == "timelypy")
        )
    except subprocess.TimeoutExpired:
        return {"timed_out": True, "error": f"stopped after the time limit of {timeout:g} s"}
    for line in reversed(proc.stdout.splitlines()):
        try:
            return dict(json.loads(line))
        except ValueError:
            continue
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"exit status {proc.returncode}: {tail}"}


def windows_api() -> bool:
    """Whether this checkout's ``timelypy.windows`` has ``windowed`` (it is built beside this
    benchmark; until then the timelypy column runs the direct path)."""
    try:
        from timelypy.windows import Sliding, Tumbling, windowed  # noqa: F401
    except ImportError:
        return False
    return True


def agreement(systems: Dict[str, Dict[str, Any]], ref: Optional[str]) -> Dict[str, Any]:
    """The digests of the systems that finished, and whether they (and the reference) agree."""
    seen = {name: r["digest"] for name, r in systems.items() if "digest" in r}
    if ref is not None:
        seen["reference"] = ref
    return {"digests": seen, "agree": len(set(seen.values())) <= 1 if seen else None}


def ratios(systems: Dict[str, Dict[str, Any]]) -> Dict[str, Optional[float]]:
    """Each timelypy column's events/s over each peer's (above 1: timelypy is ahead)."""
    out: Dict[str, Optional[float]] = {}
    for ours, mine in systems.items():
        if not ours.startswith("timelypy") or "events_per_s" not in mine:
            continue
        for peer in PEER_SYSTEMS:
            if peer in systems:
                theirs = systems[peer].get("events_per_s")
                out[f"events_per_s_{ours}_over_{peer}"] = speedup(mine["events_per_s"], theirs)
    return out


def parser() -> argparse.ArgumentParser:
    """The command line (sizes, systems, the timelypy path, the peers' interpreter)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--workloads", nargs="+", choices=("queries", "memory"), default=["queries"])
    ap.add_argument("--events", type=int, default=100_000, help="events in the stream")
    ap.add_argument("--queries", nargs="+", choices=nexmark.QUERIES, default=list(nexmark.QUERIES))
    ap.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=int, default=1000, help="events per event-time second")
    ap.add_argument("--disorder", type=int, default=500, help="most ms an event is early-stamped")
    ap.add_argument("--size", type=int, default=10_000, help="window length (ms)")
    ap.add_argument("--hop", type=int, default=2_000, help="sliding windows' hop (ms), q5")
    ap.add_argument("--batch", type=int, default=1000, help="events per batch (then a watermark)")
    ap.add_argument("--workers", type=int, default=1, help="timelypy workers")
    ap.add_argument("--backend", default="inline", help="timelypy backend")
    ap.add_argument(
        "--timelypy-path",
        choices=("auto", "windows", "direct", "both"),
        default="auto",
        help="auto: timelypy.windows where it exists, else direct (temporal_filter + freeze_at "
        "+ count/reduce/join); both: two columns, timelypy.windows and timelypy.direct",
    )
    ap.add_argument("--peers-python", default=None, help="an interpreter with bytewax, pathway")
    ap.add_argument("--retain", type=int, default=0, help="memory: ms results stay after closing")
    ap.add_argument("--sample-every", type=int, default=1_000_000, help="memory: RSS sampling")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per system and query")
    ap.add_argument("--check", action="store_true", help="compare with a from-scratch evaluation")
    return ap


Column = Tuple[str, str, Dict[str, Any]]
"""``(column name, system, options)``: ``timelypy`` (or ``timelypy.<path>`` with ``both``)."""


def columns_of(args: argparse.Namespace) -> List[Column]:
    """One column per system, two for timelypy under ``--timelypy-path both``."""
    timelypy_options = {"workers": args.workers, "backend": args.backend, "timeout": args.timeout}
    paths = ["windows", "direct"] if args.timelypy_path == "both" else [args.timelypy_path]
    columns: List[Column] = []
    for system in args.systems:
        if system != "timelypy":
            columns.append((system, system, {}))
            continue
        for path in paths:
            name = f"timelypy.{path}" if len(paths) > 1 else "timelypy"
            columns.append((name, system, {**timelypy_options, "path": path}))
    return columns


def run_queries(
    args: argparse.Namespace, spec: Dict[str, Any], columns: List[Column]
) -> Dict[str, Any]:
    """Every query on every column (a fresh process each), with agreement and ratios."""
    has_windows = windows_api()
    peer_python: Optional[str] = None
    peer_versions: Dict[str, str] = {}
    if any(system in PEER_SYSTEMS for _, system, _ in columns):
        peer_python, peer_versions = peers_python(args.peers_python)
    stream = None
    if args.check:
        stream = list(nexmark.events(args.events, args.seed, args.rate, args.disorder))
    queries: Dict[str, Any] = {}
    for query in args.queries:
        systems: Dict[str, Dict[str, Any]] = {}
        for name, system, options in columns:
            version = peer_versions.get(system, "")
            if system in PEER_SYSTEMS and (peer_python is None or version.startswith("unavail")):
                systems[name] = {"unavailable": version}
            elif options.get("path") == "windows" and not has_windows:
                systems[name] = {"unavailable": "timelypy.windows has no windowed() here"}
            else:
                python = peer_python if system in PEER_SYSTEMS else sys.executable
                assert python is not None
                systems[name] = run_peer(system, query, spec, options, python, args.timeout)
                if system in PEER_SYSTEMS:
                    systems[name]["version"] = version
        ref = None
        if stream is not None:
            ref = nexmark.digest(nexmark.reference(query, stream, spec))
        queries[query] = {
            "systems": systems,
            "agreement": agreement(systems, ref),
            "ratios": ratios(systems),
        }
    return queries


def run_memory(args: argparse.Namespace, spec: Dict[str, Any]) -> Dict[str, Any]:
    """The bounded-memory workload on timelypy (the windows path where it exists, unless
    ``--timelypy-path direct``)."""
    mem_spec = {**spec, "retain": args.retain, "sample_every": args.sample_every}
    path = "direct" if args.timelypy_path == "direct" or not windows_api() else "windows"
    options = {
        "workers": args.workers,
        "backend": args.backend,
        "timeout": args.timeout,
        "path": path,
    }
    return run_peer("timelypy", "memory", mem_spec, options, sys.executable, args.timeout)


def main() -> None:
    args = parser().parse_args()
    spec = {
        k: getattr(args, k) for k in ("events", "seed", "rate", "disorder", "size", "hop", "batch")
    }
    out: Dict[str, Any] = {
        "benchmark": "windows",
        "environment": environment(),
        "params": vars(args),
        "stream": {**spec, **nexmark.summary(spec)},
    }
    if "queries" in args.workloads:
        out["queries"] = run_queries(args, spec, columns_of(args))
    if "memory" in args.workloads:
        out["memory"] = run_memory(args, spec)
    emit(out)


if __name__ == "__main__":
    main()
